//! `NodePool`: an EKS managed node group.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, LocalReference};
use crate::managed::ResourceSpec;

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "eks.m.modelplane.ai",
    version = "v1alpha1",
    kind = "NodePool",
    namespaced,
    derive = "Default",
    status = "NodePoolStatus",
    category = "crossplane",
    category = "managed",
    category = "eks",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"EXTERNAL-NAME","type":"string","jsonPath":".metadata.annotations.crossplane\\.io/external-name"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    pub for_provider: NodePoolParameters,
    #[serde(flatten)]
    pub resource: ResourceSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolParameters {
    pub region: String,
    /// The `Cluster` managed resource (same namespace) this pool joins; the provider resolves it to the EKS
    /// cluster name once that cluster is ACTIVE.
    pub cluster_ref: LocalReference,
    /// IAM role the nodes assume.
    pub node_role_arn: String,
    pub instance_types: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_type: Option<String>,
    /// Root volume size in GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_size: Option<u32>,
    pub scaling: Scaling,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Availability zones; the provider picks the cluster's subnets in these zones. Empty: all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    #[serde(default)]
    pub capacity_type: CapacityType,
    /// EC2 capacity reservation (a capacity block) the nodes launch into; required for CAPACITY_BLOCK.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_reservation_id: Option<String>,
    /// Security groups of the nodes (a `Network`'s group, shared with the control plane), set through a launch
    /// template; EKS then leaves its own cluster group off the nodes. Empty: EKS's cluster group. Fixed at
    /// creation, like the rest of the launch template.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_group_ids: Vec<String>,
    /// EFA network interfaces per node (through a launch template, in a cluster placement group); 0 for none.
    #[serde(default)]
    pub efa_interfaces: u32,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scaling {
    pub min_size: u32,
    pub max_size: u32,
    pub desired_size: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CapacityType {
    #[default]
    OnDemand,
    CapacityBlock,
}

/// A node taint in EKS's own spelling.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaintEffect {
    NoSchedule,
    NoExecute,
    PreferNoSchedule,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    #[serde(default)]
    pub at_provider: NodePoolObservation,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolObservation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    /// CREATING, ACTIVE, UPDATING, DELETING, CREATE_FAILED, DELETE_FAILED or DEGRADED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<Scaling>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_template_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnet_ids: Vec<String>,
}
