//! SafeStart: the package declares the capability, so Crossplane creates our ManagedResourceDefinitions
//! Inactive. A kind's controller starts only once its MRD's `spec.state` is `Active`; until then the process
//! builds no AWS client and makes no AWS call. Activation is one-way in Crossplane, so nothing is ever stopped.

use std::collections::BTreeSet;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

pub const MRD_GROUP: &str = "apiextensions.crossplane.io";
pub const MRD_VERSION: &str = "v1alpha1";
pub const MRD_KIND: &str = "ManagedResourceDefinition";

/// The managed kinds this provider can run, by MRD name (which is the CRD name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ManagedKind {
    Cluster,
    NodePool,
    Role,
    FileSystem,
    Addon,
    PodIdentityAssociation,
    Network,
}

impl ManagedKind {
    pub const ALL: [ManagedKind; 7] = [
        ManagedKind::Cluster,
        ManagedKind::NodePool,
        ManagedKind::Role,
        ManagedKind::FileSystem,
        ManagedKind::Addon,
        ManagedKind::PodIdentityAssociation,
        ManagedKind::Network,
    ];

    pub fn mrd_name(self) -> &'static str {
        match self {
            ManagedKind::Cluster => "clusters.eks.m.modelplane.ai",
            ManagedKind::NodePool => "nodepools.eks.m.modelplane.ai",
            ManagedKind::Role => "roles.eks.m.modelplane.ai",
            ManagedKind::FileSystem => "filesystems.eks.m.modelplane.ai",
            ManagedKind::Addon => "addons.eks.m.modelplane.ai",
            ManagedKind::PodIdentityAssociation => "podidentityassociations.eks.m.modelplane.ai",
            ManagedKind::Network => "networks.eks.m.modelplane.ai",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            ManagedKind::Cluster => "Cluster",
            ManagedKind::NodePool => "NodePool",
            ManagedKind::Role => "Role",
            ManagedKind::FileSystem => "FileSystem",
            ManagedKind::Addon => "Addon",
            ManagedKind::PodIdentityAssociation => "PodIdentityAssociation",
            ManagedKind::Network => "Network",
        }
    }
}

/// The kind `mrd` activates, if it is one of ours, Active, and not started yet.
pub fn newly_active(mrd: &DynamicObject, started: &BTreeSet<ManagedKind>) -> Option<ManagedKind> {
    let kind = ManagedKind::ALL
        .into_iter()
        .find(|k| k.mrd_name() == mrd.name_any())?;
    let active = mrd
        .data
        .get("spec")
        .and_then(|s| s.get("state"))
        .and_then(|s| s.as_str())
        == Some("Active");
    (active && !started.contains(&kind)).then_some(kind)
}

fn mrd_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(MRD_GROUP, MRD_VERSION, MRD_KIND),
        "managedresourcedefinitions",
    )
}

/// The kind whose CRD this is, if it is one of ours and the API server serves it (`Established=True`).
/// Crossplane creates the CRD only after the MRD turns Active, and a watch on a kind that is not served yet
/// fails and backs off for up to a minute; so a controller starts only when both are true.
pub fn established(crd: &CustomResourceDefinition) -> Option<ManagedKind> {
    let kind = ManagedKind::ALL
        .into_iter()
        .find(|k| k.mrd_name() == crd.name_any())?;
    let conditions = crd.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
        .then_some(kind)
}

/// What one watch event says about a kind.
enum Signal {
    Active(ManagedKind),
    Established(ManagedKind),
}

/// Calls `start` once per kind when its MRD is Active (unless `activate_all`: Crossplane before v2 has no
/// MRDs) and its CRD is Established. Returns when every kind runs.
pub async fn run(kube: kube::Client, activate_all: bool, mut start: impl FnMut(ManagedKind)) {
    let mrds: Api<DynamicObject> = Api::all_with(kube.clone(), &mrd_resource());
    let crds: Api<CustomResourceDefinition> = Api::all(kube);
    let none = BTreeSet::new();
    let activations = watcher(mrds, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .map(move |e| e.map(|mrd| newly_active(&mrd, &none).map(Signal::Active)));
    let establishments = watcher(crds, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .map(|e| e.map(|crd| established(&crd).map(Signal::Established)));
    let mut events = if activate_all {
        establishments.boxed()
    } else {
        futures::stream::select(activations, establishments).boxed()
    };
    let mut active: BTreeSet<ManagedKind> = if activate_all {
        ManagedKind::ALL.into()
    } else {
        BTreeSet::new()
    };
    let mut served = BTreeSet::new();
    let mut started = BTreeSet::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(Some(Signal::Active(kind))) => {
                active.insert(kind);
            }
            Ok(Some(Signal::Established(kind))) => {
                served.insert(kind);
            }
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "watching ManagedResourceDefinitions or CRDs failed; retrying");
                continue;
            }
        }
        for kind in active.intersection(&served) {
            if started.insert(*kind) {
                tracing::info!(
                    kind = kind.label(),
                    "ManagedResourceDefinition is Active and its CRD Established: starting controller"
                );
                start(*kind);
            }
        }
        if started.len() == ManagedKind::ALL.len() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn mrd(name: &str, state: &str) -> DynamicObject {
        let mut o = DynamicObject::new(name, &mrd_resource());
        o.data = json!({ "spec": { "state": state } });
        o
    }

    #[test]
    fn an_inactive_definition_starts_nothing() {
        assert_eq!(
            newly_active(&mrd("clusters.eks.m.modelplane.ai", "Inactive"), &BTreeSet::new()),
            None
        );
    }

    #[test]
    fn an_active_definition_starts_its_kind_once() {
        let active = mrd("nodepools.eks.m.modelplane.ai", "Active");
        assert_eq!(
            newly_active(&active, &BTreeSet::new()),
            Some(ManagedKind::NodePool)
        );
        assert_eq!(newly_active(&active, &[ManagedKind::NodePool].into()), None);
    }

    #[test]
    fn definitions_of_other_providers_are_ignored() {
        assert_eq!(
            newly_active(&mrd("buckets.s3.aws.m.upbound.io", "Active"), &BTreeSet::new()),
            None
        );
    }

    fn crd(name: &str, established: &str) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": { "group": "eks.m.modelplane.ai", "names": { "kind": "X", "plural": "x" },
                      "scope": "Namespaced", "versions": [] },
            "status": { "conditions": [{ "type": "Established", "status": established }] },
        }))
        .unwrap()
    }

    #[test]
    fn a_crd_counts_only_once_established() {
        assert_eq!(established(&crd("clusters.eks.m.modelplane.ai", "False")), None);
        assert_eq!(
            established(&crd("clusters.eks.m.modelplane.ai", "True")),
            Some(ManagedKind::Cluster)
        );
        assert_eq!(established(&crd("buckets.s3.aws.m.upbound.io", "True")), None);
    }
}
