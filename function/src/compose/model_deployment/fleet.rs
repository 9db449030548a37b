//! What a ModelDeployment reads of the fleet (docs/scheduling.md): the clusters it has placements on, by name,
//! and the candidate set only while something waits. Nodes other deployments hold come from each cluster's
//! placement ledger in its status, never from the other deployments themselves.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use crate::{
    api::{availability::Reachability, model_deployment::ModelDeploymentSpec},
    compose::API_VERSION,
    proto::v1::{MatchLabels, Resource, ResourceSelector, RunFunctionRequest, resource_selector::Match},
    schedule::{ClusterView, Pin},
    sdk::request,
    wire::RawStruct,
};

/// The candidate set: every cluster the deployment's selector could match.
pub const CLUSTERS: &str = "inference-clusters";

/// The requirement for one cluster the deployment has a placement on.
pub fn named(cluster: &str) -> String {
    format!("cluster-{cluster}")
}

/// The clusters it runs on by name, plus the candidate set when `candidates`. Depends only on the spec, the
/// observed placements and whether something waits, so it settles in Crossplane's requirements loop.
pub fn requirements(
    spec: &ModelDeploymentSpec,
    placed_on: &BTreeSet<String>,
    candidates: bool,
) -> BTreeMap<String, ResourceSelector> {
    let selector = |r#match| ResourceSelector {
        api_version: API_VERSION.into(),
        kind: "InferenceCluster".into(),
        r#match: Some(r#match),
        namespace: None,
    };
    let mut requirements: BTreeMap<String, ResourceSelector> = placed_on
        .iter()
        .map(|cluster| (named(cluster), selector(Match::MatchName(cluster.clone()))))
        .collect();
    if candidates {
        // Only the selector's matchLabels narrow the list; its expressions are the scheduler's to check.
        let labels = spec
            .template
            .spec
            .cluster_selector
            .as_ref()
            .map(|s| s.match_labels.clone())
            .unwrap_or_default();
        requirements.insert(
            CLUSTERS.to_owned(),
            selector(Match::MatchLabels(MatchLabels {
                labels: labels.into_iter().collect(),
            })),
        );
    }
    requirements
}

/// The clusters fetched, by name, or None while Crossplane has not fetched what was asked. A named cluster
/// Crossplane did not find is gone. Without `candidates`, only the named clusters are read (found in a candidate
/// set sent anyway, when it has them): what decides whether to ask for the candidates must be the same on every
/// call of the requirements loop, whatever else the call carries.
pub fn gather(
    req: &RunFunctionRequest,
    placed_on: &BTreeSet<String>,
    candidates: bool,
    warnings: &mut Vec<String>,
) -> Option<Vec<ClusterView>> {
    let candidate_items = request::required_resources(req, CLUSTERS);
    if candidates && candidate_items.is_none() {
        return None;
    }
    let mut clusters = BTreeMap::new();
    for cluster in placed_on {
        match request::required_resources(req, &named(cluster)) {
            Some(items) => read(items, &mut clusters, warnings),
            None if candidate_items.is_some() => {}
            None => return None,
        }
    }
    let mut found = BTreeMap::new();
    read(candidate_items.unwrap_or_default(), &mut found, warnings);
    for (name, cluster) in found {
        if candidates || placed_on.contains(&name) {
            clusters.entry(name).or_insert(cluster);
        }
    }
    Some(clusters.into_values().collect())
}

/// Corrects a cluster whose status says it is lost when this deployment's own Objects there have been Synced
/// since: the provider reached its API server after the cluster's status last changed, so that status lags (its
/// composite waits to be reconciled, e.g. behind Crossplane's watch circuit breaker after a control-plane
/// restart). The cluster is read as back from that moment, as its next reconcile will say, and a replica that
/// runs there is not evacuated for an outage that ended.
pub fn heard_from(
    clusters: &mut [ClusterView],
    answered: &BTreeMap<String, Timestamp>,
    warnings: &mut Vec<String>,
) {
    for cluster in clusters {
        let name = &cluster.metadata.name;
        let (Some(lost), Some(at)) = (&cluster.status.reachability, answered.get(name)) else {
            continue;
        };
        let Some(since) = lost.since.filter(|since| !lost.reachable && since < at) else {
            continue;
        };
        warnings.push(format!(
            "InferenceCluster {name:?} says it has not answered since {since}, but this deployment's Objects there \
             were synced at {at}: reading it as back since then"
        ));
        cluster.status.reachability = Some(Reachability {
            reachable: true,
            since: Some(*at),
            message: None,
        });
    }
}

/// Decodes each cluster's narrow view. A cluster that cannot be read is skipped with a warning rather than
/// failing the deployment.
fn read(items: &[Resource], clusters: &mut BTreeMap<String, ClusterView>, warnings: &mut Vec<String>) {
    for item in items {
        match item.resource.as_ref().map(RawStruct::parse::<ClusterView>) {
            Some(Ok(cluster)) => {
                clusters.entry(cluster.metadata.name.clone()).or_insert(cluster);
            }
            Some(Err(e)) => warnings.push(format!("cannot read an InferenceCluster, skipping it: {e}")),
            None => {}
        }
    }
}

/// Nodes other deployments hold, by (cluster, pool): each pool's admitted nodes less this deployment's own
/// holders (its own placements are counted by the scheduler keeping them).
pub fn used_elsewhere(clusters: &[ClusterView], me: &str) -> BTreeMap<(String, String), u64> {
    let mut used = BTreeMap::new();
    for cluster in clusters {
        for pool in &cluster.status.pools {
            let own = pool
                .holders
                .iter()
                .filter(|h| h.deployment == me)
                .fold(0u64, |sum, h| sum.saturating_add(h.nodes));
            let others = pool.allocated_nodes.saturating_sub(own);
            if others > 0 {
                used.insert((cluster.metadata.name.clone(), pool.name.clone()), others);
            }
        }
    }
    used
}

/// The pinned replicas their cluster lists as over-committed, with that cluster.
pub fn overcommitted(clusters: &[ClusterView], me: &str, pins: &BTreeMap<u32, Pin>) -> BTreeMap<u32, String> {
    pins.iter()
        .filter(|(replica, pin)| {
            clusters.iter().any(|c| {
                c.metadata.name == pin.cluster
                    && c.status
                        .overcommitted
                        .iter()
                        .any(|o| o.deployment == me && o.replica == **replica)
            })
        })
        .map(|(replica, pin)| (*replica, pin.cluster.clone()))
        .collect()
}

/// Whether `cluster`'s ledger lists the replica among its holders.
pub fn admitted(cluster: &ClusterView, me: &str, replica: u32) -> bool {
    cluster
        .status
        .pools
        .iter()
        .flat_map(|p| &p.holders)
        .any(|h| h.deployment == me && h.replica == replica)
}
