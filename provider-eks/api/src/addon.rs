//! `Addon`: an EKS add-on (vpc-cni, kube-proxy, coredns, eks-pod-identity-agent, aws-efs-csi-driver) on a
//! cluster.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::managed::{ResourceSpec, ResourceStatus};

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "eks.m.modelplane.ai",
    version = "v1alpha1",
    kind = "Addon",
    namespaced,
    derive = "Default",
    status = "AddonStatus",
    category = "crossplane",
    category = "managed",
    category = "eks",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"ADDON","type":"string","jsonPath":".spec.forProvider.addonName"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AddonSpec {
    pub for_provider: AddonParameters,
    #[serde(flatten)]
    pub resource: ResourceSpec,
}

pub type AddonStatus = ResourceStatus<AddonObservation>;

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonParameters {
    pub region: String,
    /// The EKS cluster's name.
    pub cluster_name: String,
    /// The add-on as EKS names it, e.g. `aws-efs-csi-driver`.
    pub addon_name: String,
    /// Unset: the default version for the cluster's Kubernetes version, which EKS picks and late-init records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addon_version: Option<String>,
    /// The add-on's configuration values (JSON), as `aws eks describe-addon-configuration` documents them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration_values: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonObservation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    /// CREATING, ACTIVE, CREATE_FAILED, UPDATING, DELETING, DELETE_FAILED, DEGRADED or UPDATE_FAILED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addon_version: Option<String>,
}
