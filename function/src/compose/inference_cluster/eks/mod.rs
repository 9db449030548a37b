//! The EKS half of a cluster, composed in the order AWS needs it and torn down in reverse.
//!
//! Built from the typed specs provider-eks itself reconciles (`modelplane-eks-api`), so the two cannot drift.
//! Each stage is composed only once what it needs is observed, reading IDs and ARNs from the observed status of
//! the stage before (the way Crossplane compositions sequence resources), so provider-eks never has to resolve a
//! reference and never sees a half-known spec:
//!
//! 1. the activation policy that starts provider-eks's controllers; nothing of provider-eks before it is seen,
//!    or Crossplane's first applies fail for want of the kinds;
//! 2. the `Network` (VPC, subnets, gateways, routes and the cluster's security group) and the IAM `Role`s
//!    (unless the spec brings its own subnets and roles);
//! 3. the `Cluster` on the network's private subnets with the cluster role and the network's security group,
//!    and the EFS `FileSystem` with a mount target in each of those subnets, admitting NFS from that group;
//! 4. once the cluster is Ready: the `NodePool`s (whose nodes join the network's security group), the `Addon`s
//!    and the `PodIdentityAssociation`s;
//! 5. once the EFS CSI add-on and the file system are Ready: the `modelplane-rwx-efs` StorageClass on the
//!    workload cluster, which is what the InferenceCluster reports as its cache storage class.
//!
//! A resource that exists stays composed even if what it was built from is no longer observed (leaving it out
//! would delete it); its inputs then come from its own observed spec. Deletion runs in reverse, held in order
//! by Crossplane `Usage`s ([`Eks::uses`]): what runs on the cluster and what hangs off it (node groups, add-ons,
//! pod identities) first, then the cluster, then its network and role; EFS before the network; each pod
//! identity before its role; the node groups before the node role. The node role needs its Usages even though
//! IAM refuses to delete a role still in an instance profile: deleting a role first detaches its policies, so
//! without them the nodes of a group still being drained would lose their worker, CNI and registry permissions
//! while the workloads on them are uninstalled.

use std::collections::BTreeMap;

use kube::CustomResourceExt;
use modelplane_eks_api as eks_api;
use serde::Serialize;
use serde_json::Value;

use super::observed::Observed;
use super::provision::{self, ClusterInput, Progress, Provisioned, Provisioner};
use crate::compose::shared::CONTROL_NAMESPACE;
use crate::wire::tree::Fields;
use crate::{
    api::inference_cluster::EksCluster,
    compose::{ComposeError, Output},
    stack::Cloud,
};

mod check;
mod infra;
mod node_pools;

pub const KEY_CLUSTER: &str = "eks-cluster";
pub const KEY_NETWORK: &str = "eks-network";
pub const KEY_FILE_SYSTEM: &str = "eks-filesystem";
pub const KEY_STORAGE_CLASS: &str = "object-storageclass-efs";

/// The ReadWriteMany StorageClass every EKS cluster gets for model caches, backed by the cluster's EFS file
/// system (upstream Modelplane's name, so manifests written for it keep working).
pub const EFS_STORAGE_CLASS: &str = "modelplane-rwx-efs";

pub fn node_pool_key(pool: &str) -> String {
    format!("eks-nodepool-{pool}")
}

/// An EKS cluster provider-eks provisions.
pub struct Eks<'a> {
    cluster: &'a EksCluster,
}

impl<'a> Eks<'a> {
    pub fn new(cluster: &'a EksCluster) -> Self {
        Self { cluster }
    }
}

impl Provisioner for Eks<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Eks
    }

    fn region(&self) -> Option<&str> {
        Some(&self.cluster.region)
    }

    fn check(&self, input: &ClusterInput) -> Result<(), ComposeError> {
        check::cluster(self.cluster, input.spec)?;
        super::check::each_pool_class(input, |p| p.eks.as_ref(), check::pool)
    }

    fn compose(&self, input: &ClusterInput, out: &mut Output) -> Result<Provisioned, ComposeError> {
        let progress = compose(input, out, self.cluster)?;
        Ok(Provisioned::with_kubeconfig(input.name, progress))
    }

    /// Modelplane's own EFS class, once its StorageClass is observed on the cluster.
    fn cache_storage_class(&self, out: &Output) -> Option<String> {
        provision::ready_storage_class(out, KEY_STORAGE_CLASS, EFS_STORAGE_CLASS)
    }

    fn pool_key(&self, pool: &str) -> Option<String> {
        Some(node_pool_key(pool))
    }

    fn uses(&self, kind: &str, key: &str) -> Vec<String> {
        let uses: &[&str] = match kind {
            "NodePool" => &[KEY_CLUSTER, infra::KEY_NODE_ROLE],
            "Addon" | "Release" | "Object" | "PodIdentityAssociation" => &[KEY_CLUSTER],
            "Cluster" => &[KEY_NETWORK, infra::KEY_CLUSTER_ROLE],
            "FileSystem" => &[KEY_NETWORK],
            _ => &[],
        };
        let mut used = provision::keys(uses);
        if kind == "PodIdentityAssociation" {
            used.push(key.replace(infra::POD_IDENTITY_PREFIX, infra::ROLE_PREFIX));
        }
        used
    }
}

fn compose(input: &ClusterInput, out: &mut Output, cluster: &EksCluster) -> Result<Progress, ComposeError> {
    let (name, spec, classes) = (input.name, input.spec, input.classes);
    let seen = Observed::new(input.req);
    let policy = activation_policy(name);
    if let Some(waiting) =
        provision::activate(out, &seen, policy, "eks-", "the provider-eks activation policy")
    {
        return Ok(waiting);
    }
    let mut progress = Progress::default();
    let ctx = Context {
        name,
        cluster,
        seen: &seen,
        tags: BTreeMap::from([("modelplane.ai/cluster".to_owned(), name.to_owned())]),
    };

    let network = infra::network(out, &ctx, spec)?;
    let roles = infra::roles(out, &ctx)?;
    match (&network.private_subnets, &roles.cluster) {
        (Some(subnets), Some(role)) => infra::cluster(out, &ctx, subnets, role, &network)?,
        _ => progress.waiting.push("the network and IAM roles"),
    }
    let file_system = match &network.private_subnets {
        Some(subnets) => infra::file_system(out, &ctx, subnets, &network)?,
        None => None,
    };

    progress.cluster_ready = seen.ready(KEY_CLUSTER);
    if progress.cluster_ready || seen.exists(&node_pool_key(node_pools::SYSTEM)) {
        match &roles.node {
            Some(role) => node_pools::compose(out, &ctx, spec, classes, role, &network)?,
            None => progress.waiting.push("the node role"),
        }
        infra::addons(out, &ctx)?;
        infra::pod_identities(out, &ctx, &roles)?;
    } else {
        progress.waiting.push("the EKS cluster");
    }

    match file_system {
        Some(id) if seen.ready(&infra::addon_key(infra::EFS_CSI_ADDON)) || seen.exists(KEY_STORAGE_CLASS) => {
            out.compose(KEY_STORAGE_CLASS, infra::storage_class(name, &id), false);
        }
        _ => progress.waiting.push("EFS and its CSI driver"),
    }
    Ok(progress)
}

/// What every stage reads.
pub struct Context<'a> {
    pub name: &'a str,
    pub cluster: &'a EksCluster,
    pub seen: &'a Observed<'a>,
    pub tags: BTreeMap<String, String>,
}

impl Context<'_> {
    /// The provider config every provider-eks MR of the cluster uses: the one `spec.cluster.eks.credentials`
    /// names.
    pub fn resource_spec(&self) -> eks_api::ResourceSpec {
        eks_api::ResourceSpec::with_provider_config(self.provider_config_ref())
    }

    pub fn provider_config_ref(&self) -> eks_api::ProviderConfigReference {
        eks_api::ProviderConfigReference {
            kind: self.cluster.credentials.kind.as_str().into(),
            name: self.cluster.credentials.name.clone(),
        }
    }

    pub fn region(&self) -> String {
        self.cluster.region.clone()
    }
}

/// The ManagedResourceActivationPolicy that activates provider-eks's kinds.
pub fn activation_policy(cluster: &str) -> Fields {
    provision::activation_policy(
        cluster,
        "provider-eks",
        &[
            eks_api::Cluster::crd_name(),
            eks_api::NodePool::crd_name(),
            eks_api::Network::crd_name(),
            eks_api::Role::crd_name(),
            eks_api::Addon::crd_name(),
            eks_api::PodIdentityAssociation::crd_name(),
            eks_api::FileSystem::crd_name(),
        ],
    )
}

/// A typed provider-eks MR as it is composed: in [`CONTROL_NAMESPACE`], without a status. provider-eks' kinds
/// are ours and typed (`modelplane-eks-api`), so they are built as their Rust types and moved into a tree here,
/// where the upjet clouds' untyped kinds are built as trees from the start.
pub fn composed(object: &impl Serialize) -> Result<Fields, ComposeError> {
    let encode_error = |e| ComposeError::caused_by("spec", "cannot encode a provider-eks object", e);
    let mut value = serde_json::to_value(object).map_err(encode_error)?;
    value["metadata"]["namespace"] = Value::from(CONTROL_NAMESPACE);
    let Value::Object(mut map) = value else {
        return Err(ComposeError::new(
            "spec",
            "internal error: a provider-eks object must encode as an object",
        ));
    };
    map.remove("status");
    Ok(Fields::from(map))
}
