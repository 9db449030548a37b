//! SafeStart: the package declares the capability, so Crossplane creates our ManagedResourceDefinitions
//! Inactive. A kind's controller starts only once its MRD's `spec.state` is `Active`; until then the process
//! builds no AWS client and makes no AWS call. Activation is one-way in Crossplane, so nothing is ever stopped.

use std::collections::BTreeSet;

use futures::StreamExt;
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
}

impl ManagedKind {
    pub const ALL: [ManagedKind; 2] = [ManagedKind::Cluster, ManagedKind::NodePool];

    pub fn mrd_name(self) -> &'static str {
        match self {
            ManagedKind::Cluster => "clusters.eks.m.modelplane.ai",
            ManagedKind::NodePool => "nodepools.eks.m.modelplane.ai",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            ManagedKind::Cluster => "Cluster",
            ManagedKind::NodePool => "NodePool",
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

/// Watches MRDs and calls `start` once per kind when it becomes Active. Returns when every kind runs.
pub async fn run(kube: kube::Client, mut start: impl FnMut(ManagedKind)) {
    let api: Api<DynamicObject> = Api::all_with(kube, &mrd_resource());
    let mut started = BTreeSet::new();
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(mrd) => {
                if let Some(kind) = newly_active(&mrd, &started) {
                    tracing::info!(
                        kind = kind.label(),
                        "ManagedResourceDefinition is Active: starting controller"
                    );
                    started.insert(kind);
                    start(kind);
                    if started.len() == ManagedKind::ALL.len() {
                        return;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "watching ManagedResourceDefinitions failed; retrying"),
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
}
