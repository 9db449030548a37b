//! Managed resources of provider-eks (group `eks.m.modelplane.ai`), defined once for both sides: the
//! composition function builds them and provider-eks reconciles them, so the two can never drift.
//!
//! They follow Crossplane v2's namespaced managed-resource shape: desired external state under
//! `spec.forProvider`, observed external state under `status.atProvider`, and Crossplane's common fields
//! (`providerConfigRef`, `managementPolicies`, `writeConnectionSecretToRef`, `Ready`/`Synced` conditions).

mod addon;
mod cluster;
mod common;
mod file_system;
mod managed;
pub mod names;
mod network;
mod node_pool;
mod pod_identity;
mod provider_config;
mod role;
mod usage;

pub use addon::{Addon, AddonObservation, AddonParameters, AddonSpec, AddonStatus};
pub use file_system::{
    FileSystem, FileSystemObservation, FileSystemParameters, FileSystemSpec, FileSystemStatus, MountTarget,
    ThroughputMode,
};
pub use managed::{ResourceSpec, ResourceStatus};
pub use network::{Network, NetworkObservation, NetworkParameters, NetworkSpec, NetworkStatus, Subnet};
pub use pod_identity::{
    PodIdentityAssociation, PodIdentityAssociationObservation, PodIdentityAssociationParameters,
    PodIdentityAssociationSpec, PodIdentityAssociationStatus,
};
pub use role::{Role, RoleObservation, RoleParameters, RoleSpec, RoleStatus};
pub use usage::{ProviderConfigUsage, ProviderConfigUsageSpec, TypedReference};

pub use cluster::{Cluster, ClusterObservation, ClusterParameters, ClusterSpec, ClusterStatus, Networking};
pub use common::{
    Condition, ConditionStatus, LocalReference, ManagementPolicy, ProviderConfigReference, SecretReference,
};
pub use node_pool::{
    CapacityType, NodePool, NodePoolObservation, NodePoolParameters, NodePoolSpec, NodePoolStatus, Scaling,
    Taint, TaintEffect,
};
pub use provider_config::{
    ClusterProviderConfig, ClusterProviderConfigSpec, Credentials, CredentialsSource, ProviderConfig,
    ProviderConfigSpec, SecretKeySelector,
};

/// API group of every provider-eks kind.
pub const GROUP: &str = "eks.m.modelplane.ai";
/// The one served version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every provider-eks kind.
pub const API_VERSION: &str = "eks.m.modelplane.ai/v1alpha1";
