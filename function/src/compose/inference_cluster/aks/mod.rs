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

use super::observed::Observed;
use super::provision::{self, ClusterInput, Credentials, Progress, Provisioned, Provisioner};
use super::upjet;
use crate::{
    api::inference_cluster::AksCluster,
    compose::{ComposeError, Output, crossplane::EXTERNAL_NAME_POINTER},
    stack::Cloud,
};

mod check;
mod infra;
mod node_pools;

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

pub fn provisioner(cluster: &AksCluster) -> Box<dyn Provisioner + '_> {
    Box::new(Aks { cluster })
}

impl Provisioner for Aks<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Aks
    }

    fn credentials(&self) -> Option<Credentials> {
        Some(upjet::credentials(self.cluster))
    }

    fn region(&self) -> Option<&str> {
        Some(&self.cluster.location)
    }

    fn check(&self, input: &ClusterInput) -> Result<(), ComposeError> {
        check::cluster(self.cluster, input.spec)?;
        super::check::each_pool_class(input, |p| p.aks.as_ref(), check::pool)
    }

    /// With local accounts on, the kubeconfig carries a client certificate of the cluster's own, so
    /// provider-kubernetes and provider-helm need no Azure identity to reach the API server.
    fn compose(&self, input: &ClusterInput, out: &mut Output) -> Result<Provisioned, ComposeError> {
        let progress = compose(input, out, self.cluster)?;
        Ok(Provisioned::with_kubeconfig(input.name, progress))
    }

    /// Modelplane's Azure Files class, reported only once its StorageClass is observed on the cluster, so no
    /// cache volume waits on a class that does not exist yet.
    fn cache_storage_class(&self, out: &Output) -> Option<String> {
        provision::ready_storage_class(out, KEY_STORAGE_CLASS, AZURE_FILES_STORAGE_CLASS)
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
        provision::keys(uses)
    }
}

fn compose(input: &ClusterInput, out: &mut Output, cluster: &AksCluster) -> Result<Progress, ComposeError> {
    let (name, spec, classes) = (input.name, input.spec, input.classes);
    let seen = Observed::new(input.req);
    let policy = provision::activation_policy(name, "provider-upjet-azure", CRDS);
    let what = "the provider-upjet-azure activation policy";
    if let Some(waiting) = provision::activate(out, &seen, policy, KEY_PREFIX, what) {
        return Ok(waiting);
    }
    let mut progress = Progress::default();
    let ctx = Context::new(input, cluster, &seen);

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
pub type Context<'a> = upjet::Context<'a, AksCluster>;

/// The tags every Azure resource of the cluster carries. Azure refuses `/` in a tag name, so this is not the
/// `modelplane.ai/cluster` label the Kubernetes side uses.
pub fn tags(cluster: &str) -> BTreeMap<&'static str, String> {
    BTreeMap::from([("modelplane-cluster", cluster.to_owned())])
}

/// The name Azure knows the Ready resource under `key` by: its external name, which the provider sets.
pub fn external_name(ctx: &Context, key: &str) -> Option<String> {
    ctx.ready_string(key, EXTERNAL_NAME_POINTER)
}

#[cfg(test)]
mod tests;
