//! How a moving replica hands its callers over: what its new placement's endpoint says, and whether the
//! namespace's ModelServices route the new endpoint, and still route the old one (see services.rs).

use super::{Output, Replicas, endpoint, endpoint::Routed};
use crate::schedule::ClusterView;

/// What of a replica's old placement is kept while it moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Everything, its endpoint too: the new placement does not serve callers yet.
    Serving,
    /// Its workload only, while some ModelService still routes its endpoint: the new one is routed.
    WhileRouted,
}

impl Replicas<'_> {
    /// Publishes the endpoint of replica `index`, which serves on `cluster`, when that cluster is read.
    pub(super) fn compose_endpoint(&self, out: &mut Output, index: u32, cluster: &str) -> Routed {
        let Some(view) = self.clusters.iter().find(|c| c.metadata.name == cluster) else {
            return Routed::NoEndpoint;
        };
        endpoint::publish(out, self.req, &self.endpoint_placement(index, view))
    }

    /// Whether every ModelService selecting replica `index`'s endpoint on `cluster` routes it (unknown until
    /// Crossplane fetched them: then not yet).
    pub(super) fn routed_by_services(&self, index: u32, cluster: &str) -> bool {
        let Some(view) = self.clusters.iter().find(|c| c.metadata.name == cluster) else {
            return true;
        };
        let placement = self.endpoint_placement(index, view);
        self.services.as_ref().is_some_and(|s| {
            s.route(
                &endpoint::name(self.name, index, cluster),
                &endpoint::labels(&placement),
            )
        })
    }

    /// Whether a ModelService may still route replica `index`'s endpoint on `cluster` (where it had one).
    pub(super) fn still_routed(&self, index: u32, cluster: &ClusterView) -> bool {
        endpoint::reach(cluster).is_some()
            && self
                .services
                .as_ref()
                .is_none_or(|s| s.still_route(&endpoint::name(self.name, index, &cluster.metadata.name)))
    }

    pub(super) fn endpoint_placement<'c>(
        &'c self,
        index: u32,
        cluster: &'c ClusterView,
    ) -> endpoint::Placement<'c> {
        endpoint::Placement {
            deployment: self.name,
            namespace: self.namespace,
            replica: index,
            spec: self.spec,
            cluster,
        }
    }
}
