//! `InferenceCluster`: one GPU cluster of the fleet and the serving stack it runs. Cluster-scoped.
//!
//! The spec carries no versions: each release installs one version-locked component list per cloud (see
//! `stack/`). The status is the contract with the ModelDeployment composer, which reads clusters as required
//! resources: it schedules onto `status.pools` and reaches the cluster through `status.providerConfigName`.

use serde::{Deserialize, Serialize};

use super::inference_class::Device;

/// Node label every pool's nodes carry, so workloads can be pinned to a pool.
pub const POOL_LABEL: &str = "modelplane.ai/pool";
/// Taint on every GPU node, so only workloads that tolerate it land there.
pub const GPU_TAINT_KEY: &str = "nvidia.com/gpu";
pub const GPU_TAINT_EFFECT: &str = "NoSchedule";

/// Which serving stack a cluster runs. Chosen once: the XRD rejects changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
pub enum Stack {
    /// LeaderWorkerSet for multi-node engines.
    #[default]
    Standard,
    /// Grove PodCliqueSets gang-scheduled by KAI, plus a ModelExpress server.
    Dynamo,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InferenceClusterSpec {
    #[serde(default)]
    pub stack: Stack,
    pub cluster: ClusterSource,
    #[serde(default)]
    pub node_pools: Vec<NodePool>,
    /// Taints on the cluster as a whole; a ModelDeployment must tolerate them to be placed here.
    #[serde(default)]
    pub taints: Vec<Taint>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum Source {
    /// Modelplane provisions the cluster on EKS through provider-eks.
    #[default]
    #[serde(rename = "EKS")]
    Eks,
    /// The cluster exists; Modelplane reaches it with a kubeconfig the user provides.
    Existing,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSource {
    #[serde(default)]
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eks: Option<EksCluster>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<ExistingCluster>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EksCluster {
    pub region: String,
    /// Secret with AWS credentials for provider-eks; the default credential chain when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<SecretKeyRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_role_arn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_role_arn: Option<String>,
    #[serde(default)]
    pub networking: EksNetworking,
    /// A ReadWriteMany StorageClass for model caches (EFS CSI, say). Modelplane does not create one on EKS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_storage_class: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EksNetworking {
    /// Existing subnets to place the control plane and nodes in. Empty: provider-eks creates a VPC.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnet_ids: Vec<String>,
    /// CIDR of the VPC provider-eks creates when no subnets are given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpc_cidr: Option<String>,
    #[serde(default = "default_true")]
    pub endpoint_public_access: bool,
    #[serde(default)]
    pub endpoint_private_access: bool,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExistingCluster {
    pub kubeconfig_secret_ref: SecretKeyRef,
    /// A ReadWriteMany StorageClass the cluster already has, for model caches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_storage_class: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct SecretKeyRef {
    pub name: String,
    pub namespace: String,
    #[serde(default = "default_kubeconfig_key")]
    pub key: String,
}

fn default_kubeconfig_key() -> String {
    "kubeconfig".into()
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePool {
    pub name: String,
    /// The InferenceClass describing this pool's nodes.
    pub class_name: String,
    pub node_count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_node_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_node_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_block: Option<CapacityBlock>,
    #[serde(default)]
    pub fabric: Fabric,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBlock {
    pub capacity_reservation_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct Fabric {
    #[serde(rename = "type", default)]
    pub type_: FabricType,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum FabricType {
    #[default]
    None,
    #[serde(rename = "EFA")]
    Efa,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

/// What the InferenceCluster composer reports and the ModelDeployment composer schedules against.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InferenceClusterStatus {
    #[serde(default)]
    pub stack: Stack,
    /// provider-kubernetes and provider-helm ClusterProviderConfig (same name for both) that reach the cluster.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider_config_name: String,
    /// ReadWriteMany storage class for model caches.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cache_storage_class: String,
    /// `host:port` of the cluster's ModelExpress server (Dynamo only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_express_address: Option<String>,
    /// KAI queue engines are submitted to (Dynamo only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kai_queue: Option<String>,
    /// Pools that can take workloads now, with the devices copied from their classes.
    #[serde(default)]
    pub pools: Vec<PoolStatus>,
    #[serde(default)]
    pub components: Vec<ComponentStatus>,
    /// The conditions Crossplane keeps on the composite, read back by other composers; a composer reports its
    /// own through the response, never here.
    #[serde(default, skip_serializing)]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    pub name: String,
    pub class_name: String,
    /// Nodes the pool runs now.
    pub node_count: u32,
    /// Bounds the cluster autoscaler scales the pool between, when it autoscales.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_node_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_node_count: Option<u32>,
    /// EFA interfaces per node, when the pool's fabric is EFA and its class declares them; 0 otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub efa_interfaces: u32,
    #[serde(default)]
    pub devices: Vec<Device>,
}

impl PoolStatus {
    /// The most nodes the pool can offer: up to `maxNodeCount` when it autoscales.
    pub fn capacity(&self) -> u32 {
        self.max_node_count
            .map_or(self.node_count, |max| max.max(self.node_count))
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct ComponentStatus {
    pub name: String,
    pub version: String,
    /// Whether everything that installs it is observed ready.
    #[serde(default)]
    pub ready: bool,
}
