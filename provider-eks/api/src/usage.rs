//! `ProviderConfigUsage`: records that a managed resource uses a ProviderConfig or ClusterProviderConfig, so
//! the config cannot be deleted while anything still needs its credentials (crossplane-runtime's
//! ProviderConfigUsage, which the provider writes itself).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ProviderConfigReference;

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "eks.m.modelplane.ai",
    version = "v1alpha1",
    kind = "ProviderConfigUsage",
    namespaced,
    category = "crossplane",
    category = "provider",
    category = "eks",
    printcolumn = r#"{"name":"CONFIG-NAME","type":"string","jsonPath":".spec.providerConfigRef.name"}"#,
    printcolumn = r#"{"name":"RESOURCE-KIND","type":"string","jsonPath":".spec.resourceRef.kind"}"#,
    printcolumn = r#"{"name":"RESOURCE-NAME","type":"string","jsonPath":".spec.resourceRef.name"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigUsageSpec {
    pub provider_config_ref: ProviderConfigReference,
    pub resource_ref: TypedReference,
}

/// A managed resource in the usage's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypedReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}
