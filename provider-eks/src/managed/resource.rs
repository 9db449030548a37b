//! What the generic reconciler needs to know about a managed resource kind.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use modelplane_eks_api::{Cluster, Condition, ManagementPolicy, NodePool, SecretReference};
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

impl Managed for Cluster {
    fn management_policies(&self) -> &[ManagementPolicy] {
        &self.spec.management_policies
    }
    fn connection_secret(&self) -> Option<&SecretReference> {
        self.spec.write_connection_secret_to_ref.as_ref()
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

impl Managed for NodePool {
    fn management_policies(&self) -> &[ManagementPolicy] {
        &self.spec.management_policies
    }
    fn connection_secret(&self) -> Option<&SecretReference> {
        self.spec.write_connection_secret_to_ref.as_ref()
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
