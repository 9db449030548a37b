//! An `InferenceCluster` as the ModelDeployment and ModelCache composers read it (as a required resource):
//! name, labels, taints and the status contract its own composer writes, plus the conditions Crossplane keeps.
//! Everything else in the object is skipped undecoded. The checks on it live with the scheduler.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{
    availability::Scheduling,
    inference_cluster::{ClusterGateway, InferenceClusterStatus, Taint},
};

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClusterView {
    pub metadata: ClusterMeta,
    #[serde(default)]
    pub spec: ClusterSpecView,
    #[serde(default)]
    pub status: InferenceClusterStatus,
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
    #[serde(default)]
    pub scheduling: Scheduling,
    #[serde(default)]
    pub gateway: ClusterGateway,
}
