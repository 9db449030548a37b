//! The narrow view of an `InferenceCluster` the scheduler reads, and the cluster-level checks: is it usable
//! yet, does the deployment's cluster selector pick it, does the deployment tolerate its taints.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::api::{
    inference_cluster::{PoolStatus, Stack, Taint, TaintEffect},
    model_deployment::{Toleration, TolerationOperator},
};

/// An `InferenceCluster` as the scheduler and the workload composer see it: name, labels, taints and the
/// status contract. Everything else in the object is skipped undecoded.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClusterView {
    pub metadata: ClusterMeta,
    #[serde(default)]
    pub spec: ClusterSpecView,
    #[serde(default)]
    pub status: ClusterStatusView,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClusterMeta {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClusterSpecView {
    #[serde(default)]
    pub taints: Vec<Taint>,
}

/// `InferenceClusterStatus` plus the conditions Crossplane maintains.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatusView {
    #[serde(default)]
    pub stack: Stack,
    #[serde(default)]
    pub provider_config_name: String,
    #[serde(default)]
    pub cache_storage_class: String,
    #[serde(default)]
    pub model_express_address: Option<String>,
    #[serde(default)]
    pub kai_queue: Option<String>,
    #[serde(default)]
    pub pools: Vec<PoolStatus>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

impl ClusterView {
    /// Why nothing can be placed here yet, if so: the cluster must be Ready and must say how to reach it.
    pub fn not_usable(&self) -> Option<&'static str> {
        let ready = self
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if !ready {
            Some("cluster is not Ready yet")
        } else if self.status.provider_config_name.is_empty() {
            Some("cluster status has no providerConfigName yet")
        } else {
            None
        }
    }

    pub fn pool(&self, name: &str) -> Option<&PoolStatus> {
        self.status.pools.iter().find(|p| p.name == name)
    }

    /// The first taint with one of `effects` that no toleration covers.
    pub fn untolerated_taint(&self, tolerations: &[Toleration], effects: &[TaintEffect]) -> Option<&Taint> {
        self.spec
            .taints
            .iter()
            .filter(|taint| effects.contains(&taint.effect))
            .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
    }
}

/// Kubernetes' toleration semantics (`v1.Toleration.ToleratesTaint`).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if toleration.effect.is_some_and(|effect| effect != taint.effect) {
        return false;
    }
    match toleration.operator {
        TolerationOperator::Exists => toleration.key.is_empty() || toleration.key == taint.key,
        TolerationOperator::Equal => toleration.key == taint.key && toleration.value == taint.value,
    }
}
