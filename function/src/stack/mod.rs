//! Serving stacks: everything that differs between a Standard and a Dynamo cluster, behind one trait.
//! Composers ask [`serving_stack`] and never match on [`Stack`] themselves.
//!
//! Two halves: what a stack installs on a cluster (its rows of the component table and their objects, read by
//! the InferenceCluster composer), and how it runs an engine (read by the ModelDeployment composer). A
//! Standalone engine is a Deployment everywhere ([`crate::workload::pod::deployment`]); a Leader + Worker gang is where stacks
//! differ: a LeaderWorkerSet on Standard, a Grove PodCliqueSet gang-scheduled by KAI on Dynamo. So is how a
//! gang's pods learn their leader's address and their rank, and what else an engine is told (the ModelExpress
//! server on Dynamo).

use crate::wire::tree::Tree;

use crate::api::{
    cluster_view::ClusterView,
    inference_cluster::{PoolStatus, Stack},
    model_deployment::{Engine, Phase, TemplateMetadata},
};

pub mod components;
pub mod dynamo;
mod leader_worker_set;
pub mod model_express;
mod pod_clique_set;
pub mod standard;

pub use components::{Cloud, ClusterFacts, Component, Install, Needs, RemoteWriteTarget};

/// Env var every gang container gets: the DNS name of its copy's leader pod.
pub const LEADER_ADDRESS_ENV: &str = "MODELPLANE_LEADER_ADDRESS";
/// Env var every gang container gets: 0 on the leader, 1..N on the workers.
pub const RANK_ENV: &str = "MODELPLANE_RANK";

/// One engine of one replica, placed on a cluster's pool: everything a stack needs to write its workload.
pub struct EngineWorkload<'a> {
    /// Name of the workload object, within [`ServingStack::workload_name_budget`].
    pub name: String,
    /// The replica's serving name ([`replica_routing::serving_name`]): its InferencePool selects the serving pods of
    /// every engine of the replica by it.
    pub serving_name: String,
    /// Namespace on the workload cluster.
    pub namespace: &'a str,
    pub engine: &'a Engine,
    /// The engine's phase under PrefillDecode serving ([`disaggregation`]); `None` under Unified.
    pub phase: Option<Phase>,
    pub cluster: &'a ClusterView,
    pub pool: &'a PoolStatus,
    /// The deployment's `spec.template.metadata`, merged under each member's own.
    pub metadata: &'a TemplateMetadata,
    /// ResourceClaimTemplate name per member, for members that claim devices.
    pub claim_templates: Vec<Option<String>>,
    /// The model cache volume claim, when the deployment references a ModelCache.
    pub cache_pvc: Option<String>,
    /// The deployment's ModelCache, when it references one.
    pub cache: Option<&'a CacheUse<'a>>,
    /// What the stack adds to every engine container ([`ServingStack::engine_additions`]).
    pub additions: EngineAdditions,
    /// Pod tolerations: the GPU taint's and every deployment toleration the scheduler relied on here.
    pub tolerations: Vec<Tree>,
}

/// The ModelCache a deployment's engines load from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheUse<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// The cache volume's size, when the ModelCache states one: what an engine loads at most.
    pub size_gib: Option<u64>,
}

/// What a stack adds to every engine container of a replica, beyond Modelplane's own env and mounts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineAdditions {
    /// After Modelplane's gang variables and before the user's.
    pub env: Vec<Tree>,
    /// Linux capabilities added to the container's security context.
    pub capabilities: Vec<&'static str>,
    /// DRA requests added to every claim a member makes (the fabric's interfaces, next to its GPUs).
    pub claim_requests: Vec<Tree>,
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
    fn gang_workload(&self, w: &EngineWorkload) -> Tree;

    /// provider-kubernetes readiness CEL (over `object`) that holds once the gang serves.
    fn gang_ready_query(&self) -> &'static str;

    /// The components of [`ServingStack::components`] a gang cannot be scheduled without.
    fn gang_components(&self) -> &'static [&'static str];

    /// What this stack adds to every engine container placed on `pool` of `cluster`.
    fn engine_additions(
        &self,
        cluster: &ClusterView,
        pool: &PoolStatus,
        cache: Option<&CacheUse>,
    ) -> EngineAdditions;
}

/// The stack implementation for `stack`.
pub fn serving_stack(stack: Stack) -> &'static dyn ServingStack {
    match stack {
        Stack::Standard => &standard::Standard,
        Stack::Dynamo => &dynamo::Dynamo,
    }
}

/// A Deployment or LeaderWorkerSet serves when every copy's pods pass their readiness probes: `Available`
/// alone holds with a Deployment's `maxUnavailable` pods still loading weights.
pub const AVAILABLE_QUERY: &str = "has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True') && has(object.status.readyReplicas) && object.status.readyReplicas >= object.spec.replicas";

/// One Kubernetes object a stack component needs on the workload cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct StackObject {
    /// Unique within its component; becomes part of the composed resource's key and name.
    pub suffix: &'static str,
    pub manifest: Tree,
    pub readiness: Readiness,
    pub lifecycle: Lifecycle,
}

/// When provider-kubernetes should call an object ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// As soon as the API server accepted it (namespaces, RBAC, CRDs, queues).
    Created,
    /// When the workload reports `Available=True` (Deployments).
    Available,
    /// When this CEL query holds on the remote object (`object.` is the object).
    Holds(&'static str),
}

/// What provider-kubernetes does with the remote object over its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Created, kept as composed, deleted with the cluster's stack.
    Owned,
    /// Created but never deleted: a namespace others may share. On a cluster that is also the control plane,
    /// deleting `modelplane-system` would take the control plane's own Objects, Releases and kubeconfig Secrets
    /// with it (and hang: the Objects' finalizers need those Secrets).
    Kept,
    /// Only read, never written: another controller on the cluster makes it (trust-manager's CA ConfigMap).
    Observed,
}

impl StackObject {
    pub fn created(suffix: &'static str, manifest: Tree) -> Self {
        Self {
            suffix,
            manifest,
            readiness: Readiness::Created,
            lifecycle: Lifecycle::Owned,
        }
    }

    /// Created, ready once created, and never deleted (see [`Lifecycle::Kept`]).
    pub fn kept(suffix: &'static str, manifest: Tree) -> Self {
        Self {
            lifecycle: Lifecycle::Kept,
            ..Self::created(suffix, manifest)
        }
    }

    /// Read from the cluster, ready once `query` holds on it (see [`Lifecycle::Observed`]).
    pub fn observed(suffix: &'static str, manifest: Tree, query: &'static str) -> Self {
        Self {
            suffix,
            manifest,
            readiness: Readiness::Holds(query),
            lifecycle: Lifecycle::Observed,
        }
    }

    pub fn available(suffix: &'static str, manifest: Tree) -> Self {
        Self {
            suffix,
            manifest,
            readiness: Readiness::Available,
            lifecycle: Lifecycle::Owned,
        }
    }
}
