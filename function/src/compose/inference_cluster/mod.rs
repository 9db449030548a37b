//! Composes one GPU cluster from an `InferenceCluster`: what its cloud provisions (see [`provision`]: for
//! `source: EKS` the provider-eks `Cluster`, a system node pool and one `NodePool` per pool, plus the activation
//! policy that wakes provider-eks; for GKE, AKS, Nebius and Vultr the provider-upjet kinds of modules `gke`, `aks`,
//! `nebius` and `vultr`, staged the same way); for every cluster the provider configs that reach it and its
//! version-locked components, the cloud's common ones plus the serving stack's own.
//!
//! Namespaces: the InferenceCluster is cluster-scoped, but provider-eks MRs, provider-helm Releases and
//! provider-kubernetes Objects are namespaced, and a cluster-scoped composite must say where they go. They all
//! go in [`CONTROL_NAMESPACE`], Modelplane's own namespace on the control plane, named `<cluster>[-<part>]` so
//! many clusters never collide; a provisioned cluster's kubeconfig secret lands there too. Provider configs and
//! the activation policy are cluster-scoped, named after the cluster.
//!
//! The pools' InferenceClasses arrive as required resources, one requirement per distinct class, by name; so does
//! the cluster's placement ledger, the Objects of the replicas placed on it (see [`ledger`]), summed into
//! `status.pools[].allocatedNodes` for ModelDeployments to schedule against.

use std::collections::BTreeMap;

use super::{ComposeError, Output, inference_class, remote};
use crate::compose::conditions::{ConditionType, Reason};
use crate::{
    api::{
        Composite, TypeMeta, inference_class::InferenceClassSpec, inference_cluster::InferenceClusterSpec,
    },
    proto::v1::{ResourceSelector, RunFunctionRequest, Status, resource_selector::Match},
    sdk::request,
    stack::{
        ClusterFacts,
        components::{CLUSTER_GATEWAY, KUBE_PROMETHEUS_STACK},
        serving_stack,
    },
    wire::RawStruct,
};

mod aks;
mod check;
mod client_trust;
mod components;
mod eks;
mod existing;
mod gke;
pub mod ledger;
mod metallb;
mod nebius;
mod observed;
mod pod_reporter;
pub mod provision;
mod reachability;
mod remote_write;
mod status;
mod upjet;
mod usages;
mod vultr;

pub fn compose(req: &RunFunctionRequest, xr: &RawStruct) -> Result<Output, ComposeError> {
    compose_at(req, xr, jiff::Timestamp::now())
}

/// Composes as at `now`, the time the cluster's reachability is reported against.
pub fn compose_at(
    req: &RunFunctionRequest,
    xr: &RawStruct,
    now: jiff::Timestamp,
) -> Result<Output, ComposeError> {
    let cluster: Composite<InferenceClusterSpec> = xr.parse()?;
    let name = cluster.metadata.name.as_str();
    let spec = &cluster.spec;
    check::cluster_name(name)?;
    let cloud = provision::provisioner(spec)?;

    let mut out = Output {
        requirements: requirements(name, spec),
        ..Output::default()
    };
    let credentials = cloud.credentials();
    if let Some(credentials) = &credentials {
        out.requirements.insert(
            provision::CREDENTIALS_REQUIREMENT.to_owned(),
            credentials.selector(),
        );
    }
    if let Some(credentials) = &credentials {
        credentials.check(req)?;
    }
    let Some(classes) = classes(req, spec)? else {
        // Crossplane fetches the classes and calls again; nothing is composed until they are known.
        out.condition(
            ConditionType::ClassesResolved,
            Status::ConditionFalse,
            Reason::WaitingForClasses,
            "waiting for Crossplane to fetch the node pools' InferenceClasses",
        );
        return Ok(out);
    };
    let input = provision::ClusterInput {
        req,
        name,
        spec,
        classes: &classes,
    };
    check::pools_against_classes(&input, cloud.as_ref())?;
    metallb::check(spec)?;

    let stack = serving_stack(spec.stack);
    let mut plan = components::plan(cloud.cloud(), stack, spec, metallb::needed(req, name, spec));
    let provisioned = cloud.compose(&input, &mut out)?;
    let progress = provisioned.progress;
    // Charts and objects need the cluster's API server; once any is installed it stays composed.
    let installable = progress.cluster_ready || components::any_installed(req);
    components::compose_provider_configs(&mut out, name, provisioned.workload_credentials);
    if installable {
        let monitoring = plan
            .iter_mut()
            .find(|p| p.component.name == KUBE_PROMETHEUS_STACK.name);
        // Only where Modelplane installs the Prometheus: one a cluster provides is configured by its owner.
        let remote_write = match monitoring {
            Some(monitoring) => {
                let (target, keys) =
                    remote_write::compose(&mut out, req, name, spec.metrics.remote_write.as_ref());
                monitoring.keys.extend(keys);
                target
            }
            None => {
                if spec.metrics.remote_write.is_some() {
                    out.warnings.push(
                        "spec.metrics.remoteWrite is not applied: the cluster provides its own components, so its \
                         Prometheus is configured by whoever installed it"
                            .into(),
                    );
                }
                None
            }
        };
        let facts = ClusterFacts {
            name,
            cloud: cloud.cloud(),
            region: cloud.region(),
            taints: &spec.taints,
            remote_write,
        };
        components::compose_components(&mut out, name, &facts, stack, &mut plan);
        let gateway_planned = plan.iter().any(|p| p.component.name == CLUSTER_GATEWAY.name);
        // The trust belongs to our cluster gateway: a cluster providing its own components has none.
        if gateway_planned {
            client_trust::compose(&mut out, req, name, spec.gateway.before_fleet_client_ca);
        }
        pod_reporter::compose(&mut out, name, gateway_planned);
        reachability::compose_probe(&mut out, name);
        metallb::compose(&mut out, req, name, spec);
        remote::secret_copy::retire_dropped(&mut out, req, &[&components::provider_config_name(name)]);
    }
    usages::compose(&mut out, name, cloud.as_ref());
    let (entries, skipped) = ledger::read(req, name);
    if skipped > 0 {
        out.warnings.push(format!(
            "{skipped} Object(s) labelled {}={name} are not placement ledger entries; not counted",
            crate::api::ledger::CLUSTER_LABEL
        ));
    }
    let reachability = reachability::report(&mut out, req, xr, spec, now);
    let progress = status::Progress {
        cloud: cloud.as_ref(),
        plan: &plan,
        waiting: &progress.waiting,
        ledger: entries,
        previous: ledger::Previous::read(xr),
        reachability,
    };
    status::report(req, &mut out, name, spec, stack, progress, &classes);
    Ok(out)
}

/// Requirement name for the class a pool names.
pub fn class_requirement(class_name: &str) -> String {
    format!("class-{class_name}")
}

/// One requirement per distinct class, by name, and the cluster's placement ledger: the same every call, so
/// Crossplane's loop settles.
fn requirements(name: &str, spec: &InferenceClusterSpec) -> BTreeMap<String, ResourceSelector> {
    let mut requirements: BTreeMap<String, ResourceSelector> = spec
        .node_pools
        .iter()
        .map(|pool| {
            let selector = ResourceSelector {
                api_version: super::API_VERSION.into(),
                kind: "InferenceClass".into(),
                r#match: Some(Match::MatchName(pool.class_name.clone())),
                ..Default::default()
            };
            (class_requirement(&pool.class_name), selector)
        })
        .collect();
    requirements.insert(ledger::LEDGER.to_owned(), ledger::requirement(name));
    requirements.insert(client_trust::GATEWAYS.to_owned(), client_trust::requirement());
    requirements
}

/// The pools' classes by name, `None` while Crossplane has not fetched them all yet. A class Crossplane looked
/// for and did not find is an error on the first pool that names it.
fn classes(
    req: &RunFunctionRequest,
    spec: &InferenceClusterSpec,
) -> Result<Option<BTreeMap<String, InferenceClassSpec>>, ComposeError> {
    let mut classes = BTreeMap::new();
    for (i, pool) in spec.node_pools.iter().enumerate() {
        if classes.contains_key(&pool.class_name) {
            continue;
        }
        let path = format!("spec.nodePools[{i}].className");
        let Some(found) = request::required_resources(req, &class_requirement(&pool.class_name)) else {
            return Ok(None);
        };
        let Some(raw) = found.first().and_then(|r| r.resource.as_ref()) else {
            return Err(ComposeError::new(
                path,
                format!("InferenceClass {:?} not found", pool.class_name),
            ));
        };
        let invalid = |e: ComposeError| {
            ComposeError::caused_by(
                &path,
                format!("InferenceClass {:?} is invalid", pool.class_name),
                e,
            )
        };
        // Held to the class XRD as the class's own composer holds it, so an object of another kind is refused
        // here rather than passing a check no XRD of its kind makes.
        let type_meta: TypeMeta = raw.parse().map_err(|e| invalid(e.into()))?;
        if (type_meta.api_version.as_str(), type_meta.kind.as_str()) != (super::API_VERSION, "InferenceClass")
        {
            return Err(invalid(ComposeError::new(
                "",
                format!(
                    "is a {} {}, not an InferenceClass",
                    type_meta.api_version, type_meta.kind
                ),
            )));
        }
        crate::validate::composite_on_the_wire(&type_meta, raw).map_err(invalid)?;
        let class: Composite<InferenceClassSpec> = raw.parse().map_err(|e| invalid(e.into()))?;
        inference_class::validate(&class.spec).map_err(invalid)?;
        classes.insert(pool.class_name.clone(), class.spec);
    }
    Ok(Some(classes))
}

#[cfg(test)]
mod reachability_tests;
#[cfg(test)]
mod tests;
