//! `InferenceCluster`: one GPU cluster of the fleet and the serving stack it runs. Cluster-scoped.
//!
//! The spec carries no component versions (only the cloud's `kubernetesVersion`, as upstream): each release
//! installs one version-locked component list per cloud (see `stack/`). The status is the contract with the
//! ModelDeployment composer, which reads clusters as required resources: it schedules onto `status.pools` and
//! reaches the cluster through `status.providerConfigName`.

use serde::{Deserialize, Serialize};

use super::{
    availability::{Reachability, Scheduling},
    inference_class::Device,
    load_balancer::AddressSource,
};

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
    #[serde(default)]
    pub metrics: ClusterMetrics,
    #[serde(default)]
    pub gateway: ClusterGateway,
    #[serde(default)]
    pub scheduling: Scheduling,
}

/// `spec.gateway`: the cluster gateway's callers.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterGateway {
    #[serde(default, rename = "beforeFleetClientCA")]
    pub before_fleet_client_ca: BeforeFleetClientCa,
}

/// Whom the cluster gateway admits while it trusts no fleet gateway's client CA.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum BeforeFleetClientCa {
    /// Nobody: a client certificate under a CA no one holds a key for is required.
    #[default]
    RefuseAll,
    /// Anyone: the platform team's explicit choice, reported in `status.gateway.admits`.
    AdmitAll,
}

/// Whether a cluster gateway that reports `admits` checks its callers as the cluster's `before` setting asks: it
/// requires a client certificate (the fleet's, or the placeholder nobody holds), or the platform team chose to
/// admit anyone before a fleet CA. Not reported (`None`) counts as not checking.
pub fn checks_callers(admits: Option<Admits>, before: BeforeFleetClientCa) -> bool {
    match admits {
        Some(Admits::FleetGateways | Admits::Nobody) => true,
        Some(Admits::Anyone) | None => before == BeforeFleetClientCa::AdmitAll,
    }
}

/// `status.gateway.admits`: whom the gateway admits, as applied on the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum Admits {
    FleetGateways,
    Nobody,
    Anyone,
}

/// `spec.metrics`: where the cluster's `modelplane_*` series go beyond its own Prometheus.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterMetrics {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_write: Option<RemoteWrite>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteWrite {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<RemoteWriteBasicAuth>,
}

/// `spec.metrics.remoteWrite.basicAuth`: a Secret in the control plane's Modelplane namespace holding `username`
/// and `password`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteWriteBasicAuth {
    pub secret_ref: super::routing::NameRef,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum Source {
    /// Modelplane provisions the cluster on EKS through provider-eks.
    #[default]
    #[serde(rename = "EKS")]
    Eks,
    /// Modelplane provisions the cluster on GKE through provider-upjet-gcp.
    #[serde(rename = "GKE")]
    Gke,
    /// Modelplane provisions the cluster on AKS through provider-upjet-azure.
    #[serde(rename = "AKS")]
    Aks,
    /// Modelplane provisions an mk8s cluster through provider-upjet-nebius.
    Nebius,
    /// Modelplane provisions a VKE cluster through provider-upjet-vultr.
    Vultr,
    /// The cluster exists; Modelplane reaches it with a kubeconfig the user provides.
    Existing,
}

impl Source {
    /// The field of `spec.cluster` that configures this source.
    pub fn field(self) -> &'static str {
        match self {
            Source::Eks => "eks",
            Source::Gke => "gke",
            Source::Aks => "aks",
            Source::Nebius => "nebius",
            Source::Vultr => "vultr",
            Source::Existing => "existing",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSource {
    #[serde(default)]
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eks: Option<EksCluster>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gke: Option<GkeCluster>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aks: Option<AksCluster>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nebius: Option<NebiusCluster>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vultr: Option<VultrCluster>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<ExistingCluster>,
}

/// A GKE cluster provider-upjet-gcp provisions (upstream Modelplane's `spec.cluster.gke`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GkeCluster {
    pub region: String,
    #[serde(default = "default_gke_version")]
    pub kubernetes_version: String,
    /// The provider-upjet-gcp ProviderConfig (or ClusterProviderConfig) the cluster's managed resources use.
    #[serde(default)]
    pub credentials: ProviderConfigRef,
}

/// An AKS cluster provider-upjet-azure provisions (upstream Modelplane's `spec.cluster.aks`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AksCluster {
    pub location: String,
    #[serde(default = "default_aks_version")]
    pub kubernetes_version: String,
    #[serde(default)]
    pub credentials: ProviderConfigRef,
}

/// A Nebius mk8s cluster provider-upjet-nebius provisions, in the project its provider config names (upstream
/// Modelplane's `spec.cluster.nebius`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NebiusCluster {
    #[serde(default = "default_nebius_version")]
    pub kubernetes_version: String,
    #[serde(default)]
    pub credentials: ProviderConfigRef,
}

/// A Vultr Kubernetes Engine cluster provider-upjet-vultr provisions (upstream Modelplane's `spec.cluster.vultr`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VultrCluster {
    pub region: String,
    /// VKE's exact version string, build suffix included.
    #[serde(default = "default_vultr_version")]
    pub kubernetes_version: String,
    #[serde(default)]
    pub credentials: ProviderConfigRef,
}

// Upstream Modelplane's defaults: on each cloud, a version where DRA is generally available.
fn default_gke_version() -> String {
    "1.35".into()
}

fn default_aks_version() -> String {
    "1.34".into()
}

fn default_nebius_version() -> String {
    "1.34".into()
}

fn default_vultr_version() -> String {
    "v1.36.1+3".into()
}

/// An EKS cluster provider-eks provisions. Only `region` is needed: the network, the IAM roles, the add-ons and
/// the EFS cache storage are composed too, unless the optional overrides name existing ones.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EksCluster {
    pub region: String,
    /// Unset: the version the component table is validated with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// The provider-eks ProviderConfig (or ClusterProviderConfig) the cluster's managed resources use.
    #[serde(default)]
    pub credentials: ProviderConfigRef,
    /// An existing IAM role for the control plane; Modelplane creates one when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_role_arn: Option<String>,
    /// An existing IAM role for the nodes; Modelplane creates one when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_role_arn: Option<String>,
    #[serde(default)]
    pub networking: EksNetworking,
}

/// Which provider config authenticates to AWS (upstream Modelplane's `spec.cluster.eks.credentials`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct ProviderConfigRef {
    #[serde(rename = "type", default = "default_provider_config_kind")]
    pub kind: ProviderConfigKind,
    #[serde(default = "default_provider_config_name")]
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum ProviderConfigKind {
    ProviderConfig,
    ClusterProviderConfig,
}

impl ProviderConfigKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderConfigKind::ProviderConfig => "ProviderConfig",
            ProviderConfigKind::ClusterProviderConfig => "ClusterProviderConfig",
        }
    }
}

fn default_provider_config_kind() -> ProviderConfigKind {
    ProviderConfigKind::ClusterProviderConfig
}

fn default_provider_config_name() -> String {
    "default".into()
}

impl Default for ProviderConfigRef {
    /// The ClusterProviderConfig named `default`, as the XRD defaults it.
    fn default() -> Self {
        Self {
            kind: default_provider_config_kind(),
            name: default_provider_config_name(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EksNetworking {
    /// Existing subnets to place the control plane and nodes in. Empty: Modelplane composes a network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnet_ids: Vec<String>,
    /// CIDR of the VPC Modelplane composes when no subnets are given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpc_cidr: Option<String>,
    #[serde(default = "default_true")]
    pub endpoint_public_access: bool,
    #[serde(default)]
    pub endpoint_private_access: bool,
}

impl Default for EksNetworking {
    /// What the XRD defaults to, and what EKS itself defaults to: a public API endpoint. Derived, this would
    /// turn both endpoints off and leave the cluster unreachable when `networking` is omitted.
    fn default() -> Self {
        Self {
            subnet_ids: Vec::new(),
            vpc_cidr: None,
            endpoint_public_access: true,
            endpoint_private_access: false,
        }
    }
}

fn default_true() -> bool {
    true
}

/// A cluster Modelplane does not provision, reached with a kubeconfig the user provides.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExistingCluster {
    pub secret_ref: KubeconfigSecretRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<ExistingCache>,
    #[serde(default)]
    pub components: Components,
    /// Where the cluster gateway's address comes from: the cluster's load balancer, or MetalLB's pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<AddressSource>,
}

/// A Secret holding a kubeconfig. Upstream Modelplane keeps these in `modelplane-system`; `namespace` is ours,
/// for a secret elsewhere.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct KubeconfigSecretRef {
    pub name: String,
    #[serde(default = "default_kubeconfig_key")]
    pub key: String,
    #[serde(default = "default_secret_namespace")]
    pub namespace: String,
}

impl Default for KubeconfigSecretRef {
    fn default() -> Self {
        Self {
            name: String::new(),
            key: default_kubeconfig_key(),
            namespace: default_secret_namespace(),
        }
    }
}

fn default_kubeconfig_key() -> String {
    "kubeconfig".into()
}

fn default_secret_namespace() -> String {
    "modelplane-system".into()
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExistingCache {
    /// A ReadWriteMany StorageClass the cluster already has, for model caches.
    pub storage_class_name: String,
}

/// Whether Modelplane installs the serving substrate on an existing cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum Components {
    /// Modelplane installs the common and stack components.
    #[default]
    Managed,
    /// The cluster already runs them; Modelplane installs nothing there.
    Provided,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePool {
    pub name: String,
    /// The InferenceClass describing this pool's nodes.
    pub class_name: String,
    #[serde(default = "default_node_count")]
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

fn default_node_count() -> u32 {
    1
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infiniband: Option<InfiniBand>,
}

/// The physical InfiniBand fabric a Nebius pool's GPU cluster joins.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct InfiniBand {
    pub fabric: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum FabricType {
    #[default]
    None,
    #[serde(rename = "EFA")]
    Efa,
    InfiniBand,
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
    /// Where the cluster's gateway answers, once it has an address: replicas here are reachable through it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewayStatus>,
    /// Pools that can take workloads now, with the devices copied from their classes.
    #[serde(default)]
    pub pools: Vec<PoolStatus>,
    #[serde(default)]
    pub components: Vec<ComponentStatus>,
    /// Replica placements on this cluster its ledger did not admit: their deployments move them (at most
    /// [`MAX_OVERCOMMITTED_SHOWN`]; the rest are listed as earlier ones leave). See docs/scheduling.md.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overcommitted: Vec<Overcommitted>,
    /// Whether Modelplane reaches the cluster's API server, and since when (see [`super::availability`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reachability: Option<Reachability>,
    /// The conditions Crossplane keeps on the composite, read back by other composers; a composer reports its
    /// own through the response, never here.
    #[serde(default, skip_serializing)]
    pub conditions: Vec<Condition>,
}

/// The cluster gateway every replica's route attaches to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    /// The Gateway's first `status.addresses` value: an IP or a DNS name.
    pub address: String,
    /// The name the gateway's certificate is issued for, which a client sends as SNI; with `caCertificate`, once
    /// the cluster has published its CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// PEM of the cluster's own CA, the only one that signs the gateway's certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_certificate: Option<String>,
    /// Fingerprints ([`crate::api::ca::fingerprint`]) of the fleet client CAs the gateway requires a caller's
    /// certificate under, as applied on the cluster; empty while it trusts none (the placeholder CA is not listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted_client_authorities: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admits: Option<Admits>,
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
    #[serde(default = "default_node_count")]
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
    /// Nodes the admitted replica placements in the cluster's ledger hold in this pool.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub allocated_nodes: u64,
    /// The admitted placements holding them, one per replica.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<Holder>,
}

/// How many over-committed placements a cluster lists in status.
pub const MAX_OVERCOMMITTED_SHOWN: usize = 32;

/// One admitted replica placement's nodes in one pool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Holder {
    /// `<namespace>/<name>` of the ModelDeployment.
    pub deployment: String,
    pub replica: u32,
    pub nodes: u64,
}

/// A replica placement the cluster's ledger did not admit.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Overcommitted {
    /// `<namespace>/<name>` of the ModelDeployment.
    pub deployment: String,
    pub replica: u32,
}

/// How a ledger names a deployment.
pub fn deployment_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
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

fn is_zero_u64(n: &u64) -> bool {
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
