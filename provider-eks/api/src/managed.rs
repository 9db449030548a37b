//! What every managed resource kind shares, written once: the Crossplane fields beside `forProvider` in the
//! spec, and the status shape around `atProvider`. A kind's spec embeds [`ResourceSpec`] with
//! `#[serde(flatten)]`, so the fields stay where Crossplane users expect them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Condition, ManagementPolicy, ProviderConfigReference, SecretReference, default_management_policies,
};

// Crossplane's common spec fields (crossplane `apis/core/v2` ManagedResourceSpec). A plain comment: a doc
// comment would become the description of every kind's whole `spec` in the CRDs, where it is wrong.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpec {
    #[serde(default)]
    pub provider_config_ref: ProviderConfigReference,
    #[serde(default = "default_management_policies")]
    pub management_policies: Vec<ManagementPolicy>,
    /// Where to write the resource's connection details, if it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_connection_secret_to_ref: Option<SecretReference>,
}

impl Default for ResourceSpec {
    /// Crossplane's defaults: every management policy and the `default` ClusterProviderConfig. (An empty
    /// policy list would pause the resource, so this is not derived.)
    fn default() -> Self {
        Self {
            provider_config_ref: ProviderConfigReference::default(),
            management_policies: default_management_policies(),
            write_connection_secret_to_ref: None,
        }
    }
}

impl ResourceSpec {
    /// Every policy, through `provider_config`.
    pub fn with_provider_config(provider_config: ProviderConfigReference) -> Self {
        Self {
            provider_config_ref: provider_config,
            ..Self::default()
        }
    }
}

/// A managed resource's status: what AWS reports under `atProvider`, and Crossplane's conditions.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus<O: Default> {
    #[serde(default)]
    pub at_provider: O,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
