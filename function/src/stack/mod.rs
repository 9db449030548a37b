//! Serving stacks: what differs between a Standard and a Dynamo cluster, behind one trait.
//!
//! A ModelDeployment's engines are the same on both. A Standalone engine is a Deployment everywhere
//! ([`pod::deployment`]); a Leader + Worker gang is where stacks differ: a LeaderWorkerSet on Standard, a Grove
//! PodCliqueSet gang-scheduled by KAI on Dynamo. So is how a gang's pods learn their leader's address and their
//! rank, and what else an engine is told (the ModelExpress server on Dynamo).

use serde_json::Value;

use crate::{
    api::{
        inference_cluster::{PoolStatus, Stack},
        model_deployment::{Engine, TemplateMetadata},
    },
    schedule::ClusterView,
};

pub mod dynamo;
mod leader_worker_set;
pub mod names;
pub mod pod;
mod pod_clique_set;
pub mod standard;

/// Env var every gang container gets: the DNS name of its copy's leader pod.
pub const LEADER_ADDRESS_ENV: &str = "MODELPLANE_LEADER_ADDRESS";
/// Env var every gang container gets: 0 on the leader, 1..N on the workers.
pub const RANK_ENV: &str = "MODELPLANE_RANK";

/// One engine of one replica, placed on a cluster's pool: everything a stack needs to write its workload.
pub struct EngineWorkload<'a> {
    /// Name of the workload object, within [`ServingStack::workload_name_budget`].
    pub name: String,
    /// Namespace on the workload cluster.
    pub namespace: &'a str,
    pub engine: &'a Engine,
    pub cluster: &'a ClusterView,
    pub pool: &'a PoolStatus,
    /// The deployment's `spec.template.metadata`, merged under each member's own.
    pub metadata: &'a TemplateMetadata,
    /// ResourceClaimTemplate name per member, for members that claim devices.
    pub claim_templates: Vec<Option<String>>,
    /// The model cache volume claim, when the deployment references a ModelCache.
    pub cache_pvc: Option<String>,
    /// [`ServingStack::engine_env`] for this cluster.
    pub stack_env: Vec<Value>,
}

pub trait ServingStack: Sync {
    fn stack(&self) -> Stack;

    /// Longest name the gang object may have for `engine`, given what the stack's controller appends to it.
    fn workload_name_budget(&self, engine: &Engine) -> usize;

    /// The gang object for a Leader + Worker engine, with `copies` independent copies.
    fn gang_workload(&self, w: &EngineWorkload) -> Value;

    /// provider-kubernetes readiness CEL (over `object`) that holds once the gang serves.
    fn gang_ready_query(&self) -> &'static str;

    /// Env this stack gives every engine container, after Modelplane's gang variables and before the user's.
    fn engine_env(&self, cluster: &ClusterView) -> Vec<Value>;
}

/// The stack a cluster runs.
pub fn serving_stack(stack: Stack) -> &'static dyn ServingStack {
    match stack {
        Stack::Standard => &standard::Standard,
        Stack::Dynamo => &dynamo::Dynamo,
    }
}

/// A Deployment or LeaderWorkerSet is ready when its `Available` condition is True.
pub const AVAILABLE_QUERY: &str = "has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')";
