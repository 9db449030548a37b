//! `ModelDeployment`: the engines an ML team wants served, and how many replicas of them. Namespaced.
//!
//! The spec says nothing about serving stacks: the same manifest runs on a Standard or a Dynamo cluster. The
//! engine container is the user's; composers add to it but never rewrite its image, command or args.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::inference_cluster::Stack;

pub use super::model_cache::LabelSelector;

/// Label and annotation prefix Modelplane owns; the XRD rejects it in user metadata.
pub const RESERVED_PREFIX: &str = "modelplane.ai/";

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelDeploymentSpec {
    #[serde(default = "one")]
    pub replicas: u32,
    #[serde(default)]
    pub autoscaling: Option<Autoscaling>,
    #[serde(default)]
    pub slo: Option<Slo>,
    pub template: DeploymentTemplate,
}

/// `spec.slo`: the latencies every replica should serve within, each at the 95th percentile of the last minute.
/// The XRD admits only durations with a unit above zero (`500ms`, `1.5s`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Slo {
    #[serde(default)]
    pub time_to_first_token: Option<String>,
    #[serde(default)]
    pub time_per_output_token: Option<String>,
}

/// `spec.autoscaling`: KEDA scales `spec.replicas` on one of the fleet's `modelplane_*` figures. The XRD bounds
/// every field (and defaults the optional ones); these defaults only serve objects that skipped admission.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Autoscaling {
    #[serde(default = "one")]
    pub min_replicas: u32,
    pub max_replicas: u32,
    pub target: ScalingTarget,
    #[serde(default = "default_scale_down_delay")]
    pub scale_down_delay: String,
    #[serde(default = "default_metrics_server")]
    pub metrics_server: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingTarget {
    pub metric: ScalingMetric,
    pub per_replica: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ScalingMetric {
    RequestsWaiting,
    RequestsRunning,
    GenerationTokensPerSecond,
}

fn default_scale_down_delay() -> String {
    "5m".into()
}

fn default_metrics_server() -> String {
    "http://prometheus-operated.monitoring.svc:9090".into()
}

fn one() -> u32 {
    1
}

impl ModelDeploymentSpec {
    /// The ModelCache the engines load from, if the deployment references one.
    pub fn cache_name(&self) -> Option<&str> {
        self.template
            .spec
            .model_cache_ref
            .as_ref()
            .map(|r| r.name.as_str())
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeploymentTemplate {
    #[serde(default)]
    pub metadata: TemplateMetadata,
    pub spec: ReplicaSpec,
}

/// Labels and annotations copied onto every pod Modelplane composes.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TemplateMetadata {
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// What one replica is: a set of engines placed together on one cluster.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpec {
    #[serde(default)]
    pub cluster_selector: Option<LabelSelector>,
    #[serde(default)]
    pub model_cache_ref: Option<LocalRef>,
    /// Cluster taints this deployment tolerates.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// How requests reach the engines; absent means Unified.
    #[serde(default)]
    pub serving: Option<Serving>,
    /// Upstream's design for metrics collection (`observability.metrics.enabled`, on unless false).
    #[serde(default)]
    pub observability: Observability,
    pub engines: Vec<Engine>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Observability {
    #[serde(default)]
    pub metrics: MetricsCollection,
}

#[derive(Debug, Clone, Deserialize)]
pub struct MetricsCollection {
    #[serde(default = "enabled")]
    pub enabled: bool,
}

impl Default for MetricsCollection {
    fn default() -> Self {
        Self { enabled: true }
    }
}

fn enabled() -> bool {
    true
}

impl ReplicaSpec {
    /// Whether the engines split each request into a prefill and a decode phase.
    pub fn disaggregated(&self) -> bool {
        self.serving
            .as_ref()
            .is_some_and(|s| s.mode == ServingMode::PrefillDecode)
    }

    /// The engine serving `phase`, under PrefillDecode serving (the XRD makes it exactly one).
    pub fn phase_engine(&self, phase: Phase) -> Option<(usize, &Engine)> {
        if !self.disaggregated() {
            return None;
        }
        self.engines
            .iter()
            .enumerate()
            .find(|(_, e)| e.phase == Some(phase))
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Serving {
    #[serde(default)]
    pub mode: ServingMode,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum ServingMode {
    #[default]
    Unified,
    PrefillDecode,
}

/// The half of a request an engine serves under PrefillDecode serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Phase {
    Prefill,
    Decode,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LocalRef {
    pub name: String,
}

/// A toleration of a cluster taint, with Kubernetes' semantics: an empty key with `Exists` tolerates
/// everything, and an empty effect matches every effect.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Toleration {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: TolerationOperator,
    #[serde(default)]
    pub value: String,
    #[serde(default)]
    pub effect: Option<super::inference_cluster::TaintEffect>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum TolerationOperator {
    #[default]
    Equal,
    Exists,
}

/// One inference engine: a Standalone member, or a Leader and a Worker spanning nodes. `copies` identical
/// instances of it run in every replica.
#[derive(Debug, Clone, Deserialize)]
pub struct Engine {
    pub name: String,
    #[serde(default = "one")]
    pub copies: u32,
    /// Set only under PrefillDecode serving.
    #[serde(default)]
    pub phase: Option<Phase>,
    pub members: Vec<Member>,
}

impl Engine {
    /// Index of the member playing `role`, or 0 when none does: the XRD's CEL rules make a gang exactly one
    /// Leader and one Worker, so a gang's builders can rely on both existing.
    pub fn member_index(&self, role: Role) -> usize {
        self.members.iter().position(|m| m.role == role).unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Role {
    Standalone,
    Leader,
    Worker,
}

impl Role {
    /// The lower-case form used in object names and clique names.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Standalone => "standalone",
            Role::Leader => "leader",
            Role::Worker => "worker",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub role: Role,
    #[serde(default)]
    pub worker: Option<WorkerSpec>,
    #[serde(default)]
    pub node_selector: Option<NodeSelector>,
    pub template: PodTemplate,
}

impl Member {
    /// Pods this member runs in one engine copy.
    pub fn pods(&self) -> u32 {
        match self.role {
            Role::Worker => self.worker.as_ref().map_or(1, |w| w.nodes),
            Role::Standalone | Role::Leader => 1,
        }
    }

    pub fn device_requests(&self) -> &[DeviceRequest] {
        self.node_selector.as_ref().map_or(&[], |s| s.devices.as_slice())
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct WorkerSpec {
    pub nodes: u32,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeSelector {
    #[serde(default)]
    pub devices: Vec<DeviceRequest>,
}

/// Devices one pod of a member needs, matched against the devices a pool's class publishes.
#[derive(Debug, Clone, Deserialize)]
pub struct DeviceRequest {
    pub name: String,
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub selectors: Vec<DeviceSelector>,
}

/// A DRA CEL selector over `device`.
#[derive(Debug, Clone, Deserialize)]
pub struct DeviceSelector {
    pub cel: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PodTemplate {
    #[serde(default)]
    pub metadata: TemplateMetadata,
    pub spec: EnginePodSpec,
}

/// The pod fields a user writes. Containers are kept as raw JSON so what the user wrote reaches the cluster
/// unchanged, including fields this view does not name.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnginePodSpec {
    pub containers: Vec<Map<String, Value>>,
    #[serde(default)]
    pub image_pull_secrets: Vec<Value>,
}

/// `status` of a ModelDeployment. `replicas` is a contract: the ModelCache composer stages where replicas are
/// placed, and every ModelDeployment counts the nodes the others hold, both by reading it back.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelDeploymentStatus {
    /// The scale subresource's label selector (`labelSelectorPath`). An HPA refuses a scale target without one,
    /// although KEDA's external metric never lists pods by it: it names the deployment's ModelEndpoints.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
    #[serde(default)]
    pub placed_replicas: u32,
    #[serde(default)]
    pub ready_replicas: u32,
    #[serde(default)]
    pub replicas: Vec<ReplicaStatus>,
    /// The fleet's figures for the whole deployment, when the function reads fleet metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<ServingStatus>,
}

/// `status.serving`: the deployment's figures and when they were sampled.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServingStatus {
    /// RFC 3339 time of the sample the figures come from.
    pub sampled_at: String,
    #[serde(flatten)]
    pub figures: ServingFigures,
}

/// The few figures a platform team reads first, from the `modelplane_*` series (docs/metrics.md). A figure no
/// engine reports is absent, never zero. Rounded, so a status does not change with every sample's noise.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServingFigures {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_waiting: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_running: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_per_second: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_tokens_per_second: Option<f64>,
    /// The 95th percentile time to first token over the last minute, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_first_token_p95_seconds: Option<f64>,
    /// The 95th percentile time per output token over the last minute, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_per_output_token_p95_seconds: Option<f64>,
    /// KV-cache in use, 0 to 1, averaged over the serving pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_utilization: Option<f64>,
}

/// Where one replica runs, or why it could not be placed.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    #[serde(default)]
    pub replica: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<Stack>,
    /// The nodes each engine holds there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engines: Vec<EngineStatus>,
    /// Every engine's pods pass their readiness probes: the replica serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// What keeps the engines from starting (the ModelCache not staged on the cluster yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// Pools whose running nodes are taken, where the engines wait for the autoscaler to add nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for_scale_up: Vec<String>,
    /// Cluster components that are not ready and that this replica does not need: reported, not waited for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components_not_ready: Vec<String>,
    /// The placement this replica is moving away from, still running until the new one is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moving_from: Option<PreviousPlacement>,
    /// Why the replica is not placed. A reason this version does not know (one a later version wrote) reads as
    /// none, so readers of the status (a ModelCache) never drop the whole deployment over it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "known_reason"
    )]
    pub reason: Option<UnplacedReason>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejections: Vec<RejectionStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more_rejections: Option<usize>,
    /// This replica's figures, when the function reads fleet metrics and its engines report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<ServingFigures>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct EngineStatus {
    #[serde(default)]
    pub name: String,
    pub pool: String,
    pub nodes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct PreviousPlacement {
    pub cluster: String,
    #[serde(default)]
    pub engines: Vec<EngineStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct RejectionStatus {
    pub cluster: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    pub reason: String,
}

/// Why the fleet scheduler could not place a replica, as its status reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum UnplacedReason {
    /// Some pool fits the engines' devices but lacks free nodes.
    InsufficientCapacity,
    /// No cluster and pool fit at all.
    NoMatchingCluster,
}

impl UnplacedReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InsufficientCapacity => "InsufficientCapacity",
            Self::NoMatchingCluster => "NoMatchingCluster",
        }
    }
}

fn known_reason<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<UnplacedReason>, D::Error> {
    let reason = Option::<String>::deserialize(deserializer)?;
    Ok(reason.and_then(|r| serde_json::from_value(Value::String(r)).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_this_version_does_not_know_reads_as_none() {
        let read = |reason: &str| -> ReplicaStatus {
            serde_json::from_value(serde_json::json!({"replica": 0, "reason": reason})).unwrap()
        };
        assert_eq!(
            read("InsufficientCapacity").reason,
            Some(UnplacedReason::InsufficientCapacity)
        );
        assert_eq!(read("OutOfQuota").reason, None);
    }
}
