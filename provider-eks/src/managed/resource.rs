//! What the generic reconciler needs to know about a managed resource kind.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use modelplane_eks_api::{Condition, ManagementPolicy, ProviderConfigReference, SecretReference};
use serde::{Serialize, de::DeserializeOwned};

pub trait Managed:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    fn management_policies(&self) -> &[ManagementPolicy];
    /// The ProviderConfig or ClusterProviderConfig whose credentials reach AWS.
    fn provider_config_ref(&self) -> &ProviderConfigReference;
    fn connection_secret(&self) -> Option<&SecretReference>;
    fn conditions(&self) -> &[Condition];
    /// `status.atProvider` as stored, for skipping status writes that would change nothing.
    fn at_provider_json(&self) -> serde_json::Value;
    /// `status.observedGeneration`: the generation the last reconcile acted on.
    fn observed_generation(&self) -> Option<i64> {
        self.conditions()
            .iter()
            .filter_map(|c| c.observed_generation)
            .min()
    }
}
