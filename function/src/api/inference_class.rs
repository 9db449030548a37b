//! `InferenceClass`: a hardware recipe that node pools point at. Cluster-scoped.
//!
//! Devices are described the way a DRA driver publishes them in a ResourceSlice, so the scheduler can evaluate
//! a ModelDeployment's CEL selectors against a class without a cluster to ask.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InferenceClassSpec {
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub devices: Vec<Device>,
    #[serde(default)]
    pub provisioning: Provisioning,
}

/// How a device is claimed on a node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub enum Claim {
    /// Through a DRA ResourceClaim against the driver's DeviceClass.
    #[default]
    #[serde(rename = "DRA")]
    Dra,
    /// Described for scheduling only; nothing claims it (for example host memory). Never matches alone.
    Synthetic,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    pub name: String,
    #[serde(default)]
    pub claim: Claim,
    #[serde(default)]
    pub driver: String,
    #[serde(default)]
    pub device_class_name: String,
    /// Devices of this kind on each node.
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub attributes: BTreeMap<String, Attribute>,
    #[serde(default)]
    pub capacity: BTreeMap<String, Capacity>,
}

fn one() -> u32 {
    1
}

/// A typed device attribute, as in DRA's `DeviceAttribute`: exactly one field is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Attribute {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bool: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int: Option<i64>,
}

/// A device capacity, as in DRA's `DeviceCapacity`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub struct Capacity {
    /// A Kubernetes quantity such as `141Gi`.
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct Provisioning {
    /// Which cloud provisions pools of this class. Upstream Modelplane requires it; a class written before it
    /// existed is read as EKS when it carries `eks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eks: Option<EksProvisioning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gke: Option<GkeProvisioning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aks: Option<AksProvisioning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nebius: Option<NebiusProvisioning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vultr: Option<VultrProvisioning>,
}

/// The clouds that provision pools, upstream Modelplane's five; a pool of one cloud's class on a cluster of
/// another is refused by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum Provider {
    #[serde(rename = "EKS")]
    Eks,
    #[serde(rename = "GKE")]
    Gke,
    #[serde(rename = "AKS")]
    Aks,
    Nebius,
    Vultr,
}

impl Provider {
    /// The name as the XRD spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Eks => "EKS",
            Provider::Gke => "GKE",
            Provider::Aks => "AKS",
            Provider::Nebius => "Nebius",
            Provider::Vultr => "Vultr",
        }
    }
}

/// What an EKS managed node group needs to run this class.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EksProvisioning {
    pub instance_type: String,
    /// Root volume size in GB (upstream's name; EKS reads it as GiB).
    #[serde(default = "default_disk_size_gb")]
    pub disk_size_gb: u32,
    /// The GPU the instance type carries; informational, as upstream (the scheduler reads `devices`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<Accelerator>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_type: Option<String>,
    /// EFA network interfaces per node for EFA pools. Unset: the instance type's maximum (see
    /// `compose::inference_class::efa_interfaces`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efa_interfaces: Option<u32>,
}

/// What a GKE node pool needs to run this class.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GkeProvisioning {
    pub machine_type: String,
    #[serde(default = "default_disk_size_gb")]
    pub disk_size_gb: u32,
    /// The GPU attached to each node: GKE attaches what this names, unlike the other clouds.
    pub accelerator: Accelerator,
}

/// What an AKS node pool needs to run this class.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AksProvisioning {
    pub vm_size: String,
    #[serde(default = "default_disk_size_gb")]
    pub disk_size_gb: u32,
    /// Informational: the VM size fixes the GPU.
    pub accelerator: Accelerator,
}

/// What a Nebius mk8s node group needs to run this class.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NebiusProvisioning {
    pub platform: String,
    pub preset: String,
    #[serde(default = "default_disk_size_gb")]
    pub disk_size_gb: u32,
    /// The NVIDIA driver stack mk8s preinstalls on the nodes.
    #[serde(default = "default_drivers_preset")]
    pub drivers_preset: String,
    /// Informational: platform and preset fix the GPU.
    pub accelerator: Accelerator,
}

/// What a VKE node pool needs to run this class.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VultrProvisioning {
    pub plan: String,
    /// Informational: the plan fixes the GPU.
    pub accelerator: Accelerator,
}

/// Upstream Modelplane's default: the only preset mk8s implements on its default Kubernetes version.
fn default_drivers_preset() -> String {
    "cuda13.0".into()
}

/// Upstream Modelplane's default root volume.
fn default_disk_size_gb() -> u32 {
    100
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct Accelerator {
    #[serde(rename = "type")]
    pub type_: String,
    pub count: u32,
}

/// What an InferenceClass reports: its devices in brief, for `kubectl get` and for platform teams checking a class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InferenceClassStatus {
    pub devices: Vec<DeviceSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSummary {
    pub name: String,
    pub count: u32,
    pub claim: Claim,
}
