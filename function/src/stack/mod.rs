//! Serving stacks: everything that differs between a Standard and a Dynamo cluster, behind one trait.
//! Composers ask [`serving_stack`] and never match on [`Stack`] themselves.
//!
//! Two halves: what a stack installs on a cluster (its rows of the component table and their objects, read by
//! the InferenceCluster composer), and how it runs an engine (read by the ModelDeployment composer). A
//! Standalone engine is a Deployment everywhere ([`pod::deployment`]); a Leader + Worker gang is where stacks
//! differ: a LeaderWorkerSet on Standard, a Grove PodCliqueSet gang-scheduled by KAI on Dynamo. So is how a
//! gang's pods learn their leader's address and their rank, and what else an engine is told (the ModelExpress
//! server on Dynamo).

use serde_json::Value;

use crate::{
    api::{
        inference_cluster::{PoolStatus, Stack},
        model_deployment::{Engine, TemplateMetadata},
    },
    schedule::ClusterView,
};

pub mod components;
pub mod dynamo;
mod leader_worker_set;
pub mod model_express;
pub mod names;
pub mod pod;
mod pod_clique_set;
pub mod standard;

pub use components::{Cloud, ClusterFacts, Component, Install, Needs};

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

    /// The stack's own rows of the component table, in install order.
    fn components(&self) -> &'static [Component];

    /// The plain objects of the stack's `Install::Objects` components (KAI queues, the ModelExpress server),
    /// keyed by component name.
    fn objects(&self) -> Vec<(&'static str, Vec<StackObject>)>;

    /// `host:port` of the cluster's ModelExpress server, if the stack runs one.
    fn model_express_address(&self) -> Option<String>;

    /// The KAI queue engines are submitted to, if the stack schedules with KAI.
    fn kai_queue(&self) -> Option<&'static str>;

    // How the stack runs an engine.
    /// Longest name the gang object may have for `engine`, given what the stack's controller appends to it.
    fn workload_name_budget(&self, engine: &Engine) -> usize;

    /// The gang object for a Leader + Worker engine, with `copies` independent copies.
    fn gang_workload(&self, w: &EngineWorkload) -> Value;

    /// provider-kubernetes readiness CEL (over `object`) that holds once the gang serves.
    fn gang_ready_query(&self) -> &'static str;

    /// Env this stack gives every engine container, after Modelplane's gang variables and before the user's.
    fn engine_env(&self, cluster: &ClusterView) -> Vec<Value>;
}

/// The stack implementation for `stack`.
pub fn serving_stack(stack: Stack) -> &'static dyn ServingStack {
    match stack {
        Stack::Standard => &standard::Standard,
        Stack::Dynamo => &dynamo::Dynamo,
    }
}

/// A Deployment or LeaderWorkerSet is ready when its `Available` condition is True.
pub const AVAILABLE_QUERY: &str = "has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')";

/// One Kubernetes object a stack component needs on the workload cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct StackObject {
    /// Unique within its component; becomes part of the composed resource's key and name.
    pub suffix: &'static str,
    pub manifest: Value,
    pub readiness: Readiness,
}

/// When provider-kubernetes should call an object ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// As soon as the API server accepted it (namespaces, RBAC, CRDs, queues).
    Created,
    /// When the workload reports `Available=True` (Deployments).
    Available,
}

impl StackObject {
    pub fn created(suffix: &'static str, manifest: Value) -> Self {
        Self {
            suffix,
            manifest,
            readiness: Readiness::Created,
        }
    }

    pub fn available(suffix: &'static str, manifest: Value) -> Self {
        Self {
            suffix,
            manifest,
            readiness: Readiness::Available,
        }
    }
}
