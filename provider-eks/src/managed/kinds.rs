//! [`Managed`] for every kind: each spec embeds the shared [`modelplane_eks_api::ResourceSpec`].

use modelplane_eks_api::{
    Addon, Cluster, Condition, FileSystem, ManagementPolicy, Network, NodePool, PodIdentityAssociation,
    ProviderConfigReference, Role, SecretReference,
};

use super::resource::Managed;

macro_rules! managed_with_resource_spec {
    ($($kind:ty),+) => {$(
        impl Managed for $kind {
            fn management_policies(&self) -> &[ManagementPolicy] {
                &self.spec.resource.management_policies
            }
            fn provider_config_ref(&self) -> &ProviderConfigReference {
                &self.spec.resource.provider_config_ref
            }
            fn connection_secret(&self) -> Option<&SecretReference> {
                self.spec.resource.write_connection_secret_to_ref.as_ref()
            }
            fn conditions(&self) -> &[Condition] {
                self.status.as_ref().map_or(&[], |s| &s.conditions)
            }
            fn at_provider_json(&self) -> serde_json::Value {
                self.status
                    .as_ref()
                    .and_then(|s| serde_json::to_value(&s.at_provider).ok())
                    .unwrap_or_default()
            }
        }
    )+};
}

managed_with_resource_spec!(
    Cluster,
    NodePool,
    Network,
    Role,
    Addon,
    PodIdentityAssociation,
    FileSystem
);
