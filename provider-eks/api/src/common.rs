//! Crossplane's common managed-resource fields (crossplane `apis/core/v2`), in Rust.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which ProviderConfig supplies credentials: a `ProviderConfig` in the managed resource's namespace or a
/// cluster-wide `ClusterProviderConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct ProviderConfigReference {
    #[schemars(extend("enum" = ["ProviderConfig", "ClusterProviderConfig"]))]
    pub kind: String,
    pub name: String,
}

impl Default for ProviderConfigReference {
    /// Crossplane's default: the ClusterProviderConfig named `default`.
    fn default() -> Self {
        Self {
            kind: "ClusterProviderConfig".into(),
            name: "default".into(),
        }
    }
}

/// What the provider may do to the external resource. `*` allows everything; leaving out `Delete` orphans it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize, JsonSchema)]
pub enum ManagementPolicy {
    #[serde(rename = "*")]
    All,
    Observe,
    Create,
    Update,
    Delete,
    LateInitialize,
}

pub fn default_management_policies() -> Vec<ManagementPolicy> {
    vec![ManagementPolicy::All]
}

/// A Secret in the managed resource's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct SecretReference {
    pub name: String,
}

/// Another object in the same namespace, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct LocalReference {
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// A status condition as Crossplane writes it (`Ready`: Available/Creating/Deleting/Unavailable;
/// `Synced`: ReconcileSuccess/ReconcileError/ReconcilePaused).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// RFC 3339 time of the last status change.
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
