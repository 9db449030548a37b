//! The AKS half of a cluster, composed through provider-upjet-azure in the order Azure needs it and torn down in
//! reverse.
//!
//! Each stage is composed only once what it needs is observed Ready, reading names and IDs from the observed
//! resource of the stage before (never guessed from our own naming), so the provider never resolves a
//! reference and never sees a half-known spec:
//!
//! 1. the activation policy that starts provider-upjet-azure's controllers for the kinds below; nothing of the
//!    provider before it is seen, or Crossplane's first applies fail for want of the kinds;
//! 2. the `ResourceGroup` every Azure resource of the cluster lives in (deleting it is the last word on cleanup);
//! 3. in it, the `VirtualNetwork` and the control plane's `UserAssignedIdentity`;
//! 4. the node `Subnet` in that network;
//! 5. the `RoleAssignment` granting that identity Network Contributor on the subnet, which AKS needs to join
//!    node NICs and load balancers to a subnet it does not own;
//! 6. the `KubernetesCluster` on the subnet, running as that identity, with the system pool as its default pool
//!    (AKS creates no cluster without one) and its kubeconfig written to the connection secret;
//! 7. once the cluster is Ready: one `KubernetesClusterNodePool` per `spec.nodePools` entry, and the
//!    `modelplane-rwx-fs` StorageClass on the cluster (Azure Files through AKS's built-in CSI driver), which is
//!    what the InferenceCluster reports as its cache storage class once its Object is Ready.
//!
//! A resource that exists stays composed even if what it was built from is no longer observed (leaving it out
//! would delete it); its inputs then come from its own observed spec. Deletion runs in reverse, held in order by
//! Crossplane `Usage`s ([`Aks::uses`]): pools and what runs on the cluster first, then the cluster, then its role
//! assignment, identity and subnet, then the network, and the resource group last.

use std::collections::BTreeMap;

use serde_json::Value;

use super::observed::Observed;
use super::provision::{self, Credentials, Progress, Provisioner};
use super::upjet;
use crate::compose::shared::CONTROL_NAMESPACE;
use crate::{
    api::{
        inference_class::{InferenceClassSpec, Provider},
        inference_cluster::{AksCluster, InferenceClusterSpec},
    },
    compose::{ComposeError, Output},
    proto::v1::RunFunctionRequest,
    stack::Cloud,
};

mod infra;
mod node_pools;
mod validate;

pub const KEY_ACTIVATION_POLICY: &str = "activation-policy";
pub const KEY_RESOURCE_GROUP: &str = "aks-resource-group";
pub const KEY_NETWORK: &str = "aks-network";
pub const KEY_SUBNET: &str = "aks-subnet";
pub const KEY_IDENTITY: &str = "aks-identity";
pub const KEY_SUBNET_ROLE: &str = "aks-role-subnet";
pub const KEY_CLUSTER: &str = "aks-cluster";
pub const KEY_STORAGE_CLASS: &str = "object-storageclass-azurefile";
/// Every composed provider-upjet-azure resource's key starts so: once one exists, the activation policy has
/// done its work.
const KEY_PREFIX: &str = "aks-";
const NODE_POOL_PREFIX: &str = "aks-nodepool-";

/// The ReadWriteMany StorageClass every AKS cluster gets for model caches (upstream Modelplane's name, so
/// manifests written for it keep working).
pub const AZURE_FILES_STORAGE_CLASS: &str = "modelplane-rwx-fs";

/// The key provider-upjet-azure writes the cluster's kubeconfig (`kube_config_raw`) under in its connection
/// secret.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// The provider-upjet-azure kinds a cluster composes, by CRD name: what the activation policy activates.
pub const CRDS: &[&str] = &[
    "resourcegroups.azure.m.upbound.io",
    "virtualnetworks.network.azure.m.upbound.io",
    "subnets.network.azure.m.upbound.io",
    "userassignedidentities.managedidentity.azure.m.upbound.io",
    "roleassignments.authorization.azure.m.upbound.io",
    "kubernetesclusters.containerservice.azure.m.upbound.io",
    "kubernetesclusternodepools.containerservice.azure.m.upbound.io",
];

pub fn node_pool_key(pool: &str) -> String {
    format!("{NODE_POOL_PREFIX}{pool}")
}

/// An AKS cluster provider-upjet-azure provisions.
pub struct Aks<'a> {
    cluster: &'a AksCluster,
}

pub fn provisioner(cluster: &AksCluster) -> Result<Box<dyn Provisioner + '_>, ComposeError> {
    Ok(Box::new(Aks { cluster }))
}

impl Provisioner for Aks<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Aks
    }

    fn provider(&self) -> Option<Provider> {
        Some(Provider::Aks)
    }

    fn credentials(&self) -> Option<Credentials> {
        Some(Credentials {
            field: "spec.cluster.aks.credentials",
            api_version: "azure.m.upbound.io/v1beta1",
            reference: self.cluster.credentials.clone(),
        })
    }

    fn region(&self) -> Option<&str> {
        Some(&self.cluster.location)
    }

    fn check(
        &self,
        spec: &InferenceClusterSpec,
        classes: &BTreeMap<String, InferenceClassSpec>,
    ) -> Result<(), ComposeError> {
        validate::cluster(self.cluster, spec)?;
        validate::pools_against_classes(spec, classes)
    }

    fn compose(
        &self,
        req: &RunFunctionRequest,
        out: &mut Output,
        name: &str,
        spec: &InferenceClusterSpec,
        classes: &BTreeMap<String, InferenceClassSpec>,
    ) -> Result<Progress, ComposeError> {
        compose(req, out, name, self.cluster, spec, classes)
    }

    /// The kubeconfig alone: with local accounts on, it carries a client certificate of the cluster's own, so
    /// provider-kubernetes and provider-helm need no Azure identity to reach the API server.
    fn workload_credentials(&self, name: &str) -> Value {
        provision::kubeconfig_credentials(&upjet::kubeconfig_secret(name), CONTROL_NAMESPACE, KUBECONFIG_KEY)
    }

    /// Modelplane's Azure Files class, reported only once its StorageClass is observed on the cluster, so no
    /// cache volume waits on a class that does not exist yet.
    fn cache_storage_class(&self, out: &Output) -> Option<String> {
        out.resources
            .get(KEY_STORAGE_CLASS)
            .filter(|c| c.ready)
            .map(|_| AZURE_FILES_STORAGE_CLASS.to_owned())
    }

    /// The system pool is the cluster's default pool, so the cluster gates it; every other pool has its own.
    fn pool_key(&self, pool: &str) -> Option<String> {
        if pool == node_pools::SYSTEM {
            return Some(KEY_CLUSTER.to_owned());
        }
        Some(node_pool_key(pool))
    }

    fn uses(&self, kind: &str, _key: &str) -> Vec<String> {
        let uses: &[&str] = match kind {
            // A pool's nodes sit in the subnet; the pool is deleted before the cluster and the subnet.
            "KubernetesClusterNodePool" => &[KEY_CLUSTER, KEY_SUBNET],
            "Release" | "Object" => &[KEY_CLUSTER],
            // AKS tears down its load balancers and NICs in the subnet as the identity, so the identity keeps
            // its role on the subnet until the cluster is gone.
            "KubernetesCluster" => &[KEY_SUBNET, KEY_IDENTITY, KEY_SUBNET_ROLE, KEY_RESOURCE_GROUP],
            "RoleAssignment" => &[KEY_IDENTITY, KEY_SUBNET],
            "Subnet" => &[KEY_NETWORK],
            // Deleting a resource group deletes everything in it: it goes last.
            "VirtualNetwork" | "UserAssignedIdentity" => &[KEY_RESOURCE_GROUP],
            _ => &[],
        };
        uses.iter().map(|u| (*u).to_owned()).collect()
    }
}

fn compose(
    req: &RunFunctionRequest,
    out: &mut Output,
    name: &str,
    cluster: &AksCluster,
    spec: &InferenceClusterSpec,
    classes: &BTreeMap<String, InferenceClassSpec>,
) -> Result<Progress, ComposeError> {
    let seen = Observed::new(req);
    let mut progress = Progress::default();
    out.compose(
        KEY_ACTIVATION_POLICY,
        provision::activation_policy(name, "provider-upjet-azure", CRDS),
        false,
    );
    if !(seen.exists(KEY_ACTIVATION_POLICY) || seen.any_with_prefix(KEY_PREFIX)) {
        progress
            .waiting
            .push("the provider-upjet-azure activation policy");
        return Ok(progress);
    }
    let ctx = Context {
        name,
        cluster,
        seen: &seen,
    };

    let group = infra::resource_group(out, &ctx);
    let network = infra::network(out, &ctx, group.as_deref());
    let identity = infra::identity(out, &ctx, group.as_deref());
    let subnet = infra::subnet(out, &ctx, group.as_deref(), network.as_deref());
    let role_ready = infra::subnet_role(out, &ctx, subnet.as_deref(), identity.principal_id.as_deref());
    let composed = role_ready || seen.exists(KEY_CLUSTER);
    let cluster_composed = composed
        && infra::cluster(
            out,
            &ctx,
            group.as_deref(),
            subnet.as_deref(),
            identity.id.as_deref(),
        );
    if !cluster_composed {
        progress
            .waiting
            .push("the resource group, network, control plane identity and its role");
    }

    progress.cluster_ready = seen.ready(KEY_CLUSTER);
    if progress.cluster_ready || seen.any_with_prefix(NODE_POOL_PREFIX) {
        node_pools::compose(out, &ctx, spec, classes, subnet.as_deref());
    } else {
        progress.waiting.push("the AKS cluster");
    }
    // The Azure Files CSI driver is part of the cluster (its storage profile turns it on), so the class needs
    // the cluster's API server and nothing else; the driver creates the storage account on first use.
    if progress.cluster_ready || seen.exists(KEY_STORAGE_CLASS) {
        out.compose(KEY_STORAGE_CLASS, infra::storage_class(name), false);
    }
    Ok(progress)
}

/// What every stage reads.
pub struct Context<'a> {
    pub name: &'a str,
    pub cluster: &'a AksCluster,
    pub seen: &'a Observed<'a>,
}

impl Context<'_> {
    /// A provider-upjet-azure MR named `name`, authenticated by the provider config the cluster's `credentials`
    /// name.
    pub fn managed(&self, api_version: &str, kind: &str, name: &str, for_provider: Value) -> Value {
        upjet::managed(api_version, kind, name, &self.cluster.credentials, for_provider)
    }

    /// The tags every Azure resource of the cluster carries. Azure refuses `/` in a tag name, so this is not
    /// the `modelplane.ai/cluster` label the Kubernetes side uses.
    pub fn tags(&self) -> BTreeMap<&'static str, String> {
        BTreeMap::from([("modelplane-cluster", self.name.to_owned())])
    }

    /// A string at `pointer` of the Ready resource under `key`.
    pub fn ready_string(&self, key: &str, pointer: &str) -> Option<String> {
        self.seen
            .ready_field(key, pointer)
            .and_then(|v| v.as_str().map(str::to_owned))
            .filter(|s| !s.is_empty())
    }

    /// A string at `pointer` of what the resource under `key` was last composed with.
    pub fn spec_string(&self, key: &str, pointer: &str) -> Option<String> {
        self.seen
            .spec_field(key, pointer)
            .and_then(|v| v.as_str().map(str::to_owned))
            .filter(|s| !s.is_empty())
    }

    /// The name Azure knows the Ready resource under `key` by: its external name, which the provider sets.
    pub fn external_name(&self, key: &str) -> Option<String> {
        self.ready_string(key, EXTERNAL_NAME_POINTER)
    }
}

/// Where Crossplane keeps a managed resource's name in the cloud.
pub const EXTERNAL_NAME_ANNOTATION: &str = "crossplane.io/external-name";
const EXTERNAL_NAME_POINTER: &str = "/metadata/annotations/crossplane.io~1external-name";

#[cfg(test)]
mod tests;
