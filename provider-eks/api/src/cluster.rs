//! `Cluster`: an EKS control plane.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::Condition;
use crate::managed::ResourceSpec;

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "eks.m.modelplane.ai",
    version = "v1alpha1",
    kind = "Cluster",
    namespaced,
    derive = "Default",
    status = "ClusterStatus",
    category = "crossplane",
    category = "managed",
    category = "eks",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"EXTERNAL-NAME","type":"string","jsonPath":".metadata.annotations.crossplane\\.io/external-name"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    pub for_provider: ClusterParameters,
    #[serde(flatten)]
    pub resource: ResourceSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterParameters {
    pub region: String,
    /// Kubernetes minor version, e.g. `1.34`. Filled by the composition from the release's component table.
    pub version: String,
    /// IAM role the EKS control plane assumes.
    pub role_arn: String,
    pub networking: Networking,
    #[serde(default = "default_true")]
    pub endpoint_public_access: bool,
    #[serde(default)]
    pub endpoint_private_access: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

fn default_true() -> bool {
    true
}

/// Where the cluster's network comes from: subnets that already exist (a VPC is the `Network` kind's).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Networking {
    /// Existing subnets (at least two zones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnet_ids: Vec<String>,
    /// Security groups for the control plane's network interfaces, beside the one EKS makes itself (a
    /// `Network`'s group, which the nodes share, so control plane and nodes reach each other). Fixed at creation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_group_ids: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    #[serde(default)]
    pub at_provider: ClusterObservation,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The EKS cluster as AWS reports it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterObservation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    /// CREATING, ACTIVE, UPDATING, DELETING, FAILED or PENDING.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc_issuer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpc_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnet_ids: Vec<String>,
}
