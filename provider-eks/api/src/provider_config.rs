//! `ProviderConfig` (namespaced) and `ClusterProviderConfig`: how provider-eks reaches AWS.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "eks.m.modelplane.ai",
    version = "v1alpha1",
    kind = "ProviderConfig",
    namespaced,
    category = "crossplane",
    category = "provider",
    category = "eks"
)]
#[kube(derive = "Default")]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigSpec {
    pub credentials: Credentials,
    /// Send every AWS call to this URL instead of AWS (a test double such as moto, or a VPC endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// The same spec, cluster-scoped, usable from every namespace.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "eks.m.modelplane.ai",
    version = "v1alpha1",
    kind = "ClusterProviderConfig",
    category = "crossplane",
    category = "provider",
    category = "eks"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProviderConfigSpec {
    #[serde(flatten)]
    pub spec: ProviderConfigSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    pub source: CredentialsSource,
    /// For `Secret`: a Secret key holding an AWS shared-credentials (INI) profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
    /// For `WebIdentity`: the role to assume with the pod's projected service-account token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum CredentialsSource {
    Secret,
    WebIdentity,
    /// The SDK's default chain: environment, profile, IMDS, IRSA / Pod Identity.
    #[default]
    Default,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct SecretKeySelector {
    pub name: String,
    /// Defaults to the ProviderConfig's namespace; required for a ClusterProviderConfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub key: String,
}
