//! Stack differences behind one trait: everything that differs between a Standard and a Dynamo cluster is a
//! method of [`ServingStack`]; composers ask `serving_stack(stack)` and never match on [`Stack`] themselves.
//!
//! This half of the trait is what a stack installs on a cluster (its components and their objects). The
//! ModelDeployment half (how a stack runs a workload) lives beside it.

use serde_json::Value;

use crate::api::inference_cluster::Stack;

pub mod components;
mod dynamo;
pub mod model_express;
mod standard;

pub use components::{Cloud, ClusterFacts, Component, Install, Needs};

/// What one serving stack installs on a cluster, on top of its cloud's common components.
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
}

/// The stack implementation for `stack`.
pub fn serving_stack(stack: Stack) -> &'static dyn ServingStack {
    match stack {
        Stack::Standard => &standard::Standard,
        Stack::Dynamo => &dynamo::Dynamo,
    }
}

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
