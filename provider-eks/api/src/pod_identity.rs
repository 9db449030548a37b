//! `PodIdentityAssociation`: lets one service account of an EKS cluster assume an IAM role through the EKS Pod
//! Identity agent (how the cluster autoscaler and the EFS CSI driver get their AWS permissions).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::managed::{ResourceSpec, ResourceStatus};

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "eks.m.modelplane.ai",
    version = "v1alpha1",
    kind = "PodIdentityAssociation",
    namespaced,
    derive = "Default",
    status = "PodIdentityAssociationStatus",
    category = "crossplane",
    category = "managed",
    category = "eks",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"SERVICE-ACCOUNT","type":"string","jsonPath":".spec.forProvider.serviceAccount"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PodIdentityAssociationSpec {
    pub for_provider: PodIdentityAssociationParameters,
    #[serde(flatten)]
    pub resource: ResourceSpec,
}

pub type PodIdentityAssociationStatus = ResourceStatus<PodIdentityAssociationObservation>;

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodIdentityAssociationParameters {
    pub region: String,
    pub cluster_name: String,
    pub namespace: String,
    pub service_account: String,
    /// The role the service account's pods get credentials for; it must trust `pods.eks.amazonaws.com`.
    pub role_arn: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodIdentityAssociationObservation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub association_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub association_arn: Option<String>,
}
