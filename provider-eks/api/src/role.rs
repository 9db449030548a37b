//! `Role`: an IAM role with the managed policies attached to it and, optionally, one inline policy. The role
//! and its attachments live and die together, so they are one resource.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::managed::{ResourceSpec, ResourceStatus};

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "eks.m.modelplane.ai",
    version = "v1alpha1",
    kind = "Role",
    namespaced,
    derive = "Default",
    status = "RoleStatus",
    category = "crossplane",
    category = "managed",
    category = "eks",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"ARN","type":"string","jsonPath":".status.atProvider.arn"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RoleSpec {
    pub for_provider: RoleParameters,
    #[serde(flatten)]
    pub resource: ResourceSpec,
}

pub type RoleStatus = ResourceStatus<RoleObservation>;

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleParameters {
    /// The AWS service that assumes the role: `eks.amazonaws.com` (a cluster), `ec2.amazonaws.com` (nodes) or
    /// `pods.eks.amazonaws.com` (EKS Pod Identity). The trust policy is written from it.
    pub assumed_by: String,
    /// Managed policies attached to the role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_arns: Vec<String>,
    /// One inline policy document (JSON), for permissions no managed policy grants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_policy: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleObservation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attached_policy_arns: Vec<String>,
}
