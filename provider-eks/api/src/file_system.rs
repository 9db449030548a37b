//! `FileSystem`: an EFS file system with a mount target in each of its subnets and the security group that
//! lets the nodes (or, without named node groups, the whole VPC) reach them over NFS. The cache storage for ModelCaches on a stock EKS cluster.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::managed::{ResourceSpec, ResourceStatus};

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "eks.m.modelplane.ai",
    version = "v1alpha1",
    kind = "FileSystem",
    namespaced,
    derive = "Default",
    status = "FileSystemStatus",
    category = "crossplane",
    category = "managed",
    category = "eks",
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"SYNCED","type":"string","jsonPath":".status.conditions[?(@.type=='Synced')].status"}"#,
    printcolumn = r#"{"name":"FILE-SYSTEM","type":"string","jsonPath":".status.atProvider.fileSystemId"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FileSystemSpec {
    pub for_provider: FileSystemParameters,
    #[serde(flatten)]
    pub resource: ResourceSpec,
}

pub type FileSystemStatus = ResourceStatus<FileSystemObservation>;

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileSystemParameters {
    pub region: String,
    /// One mount target per subnet; the subnets must be in distinct zones of one VPC.
    #[schemars(length(min = 1, max = 16))]
    pub subnet_ids: Vec<String>,
    #[serde(default)]
    pub throughput_mode: ThroughputMode,
    /// Security groups whose members (the nodes) may reach the mount targets on NFS (TCP 2049). Empty: the
    /// subnets' whole VPC CIDR may.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nfs_security_group_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// EFS throughput modes. Elastic scales with demand, which suits a cache written once and read in bursts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThroughputMode {
    #[default]
    Elastic,
    Bursting,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileSystemObservation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_system_id: Option<String>,
    /// creating, available, updating, deleting, deleted or error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub life_cycle_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_targets: Vec<MountTarget>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MountTarget {
    pub subnet_id: String,
    pub mount_target_id: String,
    pub life_cycle_state: String,
}
