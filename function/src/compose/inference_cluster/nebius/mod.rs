//! The Nebius half of a cluster: a mk8s cluster provider-upjet-nebius provisions, composed in the order Nebius
//! needs it and torn down in reverse.
//!
//! Every MR goes to the project the cluster's provider config names (its `projectID` is the default parent), so
//! the spec block needs no project or region: Nebius projects live in one region. Each stage is composed only
//! once what it needs is observed, reading IDs from the observed status of the stage before, so the provider
//! never resolves a reference and never sees a half-known spec:
//!
//! 1. the activation policy that starts provider-upjet-nebius's controllers for the kinds composed here;
//!    nothing of the provider before it is seen, or Crossplane's first applies fail for want of the kinds;
//! 2. the VPC `Network`, the shared `Filesystem` model caches live on, the cloud-init `Secret` that mounts it on
//!    every node, and one `GpuCluster` per InfiniBand fabric a pool joins;
//! 3. the `Subnet`, once the network has an ID (it takes its addresses from the network's default pools);
//! 4. the mk8s `Cluster` on that subnet with a public endpoint, writing its kubeconfig to
//!    [`provision::kubeconfig_secret`];
//! 5. once the cluster is Ready: the `NodeGroup`s (a system group and one per pool, each attaching the
//!    filesystem, GPU groups on their fabric's GPU cluster) and Nebius's csi-mounted-fs-path driver;
//! 6. once that driver is Ready: the `modelplane-rwx-fs` StorageClass, reported as the cache storage class.
//!
//! No node service account is composed: nothing on the nodes calls a Nebius API (mk8s scales node groups
//! itself, Compute attaches the filesystem, the driver images are public), so no IAM grant is needed there.
//!
//! A resource that exists stays composed even when what it was built from is no longer observed (leaving it
//! out would delete it); its inputs then come from its own observed spec. Deletion runs in reverse, held by
//! Crossplane `Usage`s ([`Nebius::uses`]): what runs on the cluster and the node groups first, then the
//! cluster, its subnet, its network. Node groups hold the filesystem (Nebius will not delete one still
//! attached), their GPU cluster, and the cloud-init Secret the provider reads for as long as a group exists.

use std::collections::BTreeMap;

use super::observed::Observed;
use super::provision::{self, ClusterInput, Credentials, Progress, Provisioned, Provisioner};
use super::upjet;
use crate::wire::tree::Fields;
use crate::{
    api::{
        inference_class::InferenceClassSpec,
        inference_cluster::{InferenceClusterSpec, NebiusCluster},
    },
    compose::{ComposeError, Output},
    stack::Cloud,
};

mod check;
mod credentials;
mod infra;
mod node_pools;

/// Every composed key of provider-upjet-nebius's kinds starts so.
pub const KEY_PREFIX: &str = "nebius-";
pub const KEY_NETWORK: &str = "nebius-network";
pub const KEY_SUBNET: &str = "nebius-subnet";
pub const KEY_CLUSTER: &str = "nebius-cluster";
pub const KEY_FILESYSTEM: &str = "nebius-filesystem";
pub const KEY_CLOUD_INIT: &str = "nebius-cloud-init";
pub const KEY_CSI_DRIVER: &str = "release-csi-mounted-fs-path";
pub const KEY_STORAGE_CLASS: &str = "object-storageclass-fs";

/// The ReadWriteMany StorageClass every Nebius cluster gets for model caches, served from the shared filesystem
/// (upstream Modelplane's name, so manifests written for it keep working).
pub const FS_STORAGE_CLASS: &str = "modelplane-rwx-fs";

const API_VPC: &str = "vpc.nebius.m.upbound.io/v1beta1";
const API_MK8S: &str = "mk8s.nebius.m.upbound.io/v1beta1";
const API_COMPUTE: &str = "compute.nebius.m.upbound.io/v1beta1";

/// The CRDs of every kind composed here, which the activation policy activates.
pub const CRDS: &[&str] = &[
    "networks.vpc.nebius.m.upbound.io",
    "subnets.vpc.nebius.m.upbound.io",
    "clusters.mk8s.nebius.m.upbound.io",
    "nodegroups.mk8s.nebius.m.upbound.io",
    "filesystems.compute.nebius.m.upbound.io",
    "gpuclusters.compute.nebius.m.upbound.io",
];

pub fn node_group_key(pool: &str) -> String {
    format!("{KEY_PREFIX}nodegroup-{pool}")
}

pub fn gpu_cluster_key(fabric: &str) -> String {
    format!("{KEY_PREFIX}gpucluster-{fabric}")
}

pub fn provisioner<'a>(cluster: &'a NebiusCluster, spec: &InferenceClusterSpec) -> Box<dyn Provisioner + 'a> {
    Box::new(Nebius::new(cluster, node_pools::gpu_clusters_of(spec)))
}

/// A mk8s cluster provider-upjet-nebius provisions.
pub struct Nebius<'a> {
    cluster: &'a NebiusCluster,
    /// The GPU cluster each node group joins, by node group key: it must outlive the group.
    gpu_cluster_of: BTreeMap<String, String>,
}

impl<'a> Nebius<'a> {
    pub fn new(cluster: &'a NebiusCluster, gpu_cluster_of: BTreeMap<String, String>) -> Self {
        Self {
            cluster,
            gpu_cluster_of,
        }
    }
}

impl Provisioner for Nebius<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Nebius
    }

    fn credentials(&self) -> Option<Credentials> {
        Some(upjet::credentials(self.cluster))
    }

    // No region: it is the project's, which only the provider config knows.

    fn check(&self, input: &ClusterInput) -> Result<(), ComposeError> {
        check::cluster(self.cluster, input.spec)?;
        super::check::each_pool_class(input, |p| p.nebius.as_ref(), check::pool)
    }

    /// The workload providers reach the cluster through the kubeconfig in its connection secret, which carries
    /// only the endpoint and CA (Nebius authenticates every client through its IAM), plus the provider config's
    /// own service account as the identity, read from the request.
    fn compose(&self, input: &ClusterInput, out: &mut Output) -> Result<Provisioned, ComposeError> {
        let seen = Observed::new(input.req);
        // Read first: a provider config that cannot lend its identity is refused before anything is composed.
        let identity = credentials::identity(input.req, &seen, &self.cluster.credentials)?;
        let ctx = Context::new(input, self.cluster, &seen);
        let progress = compose(out, &ctx, input.spec, input.classes)?;
        let mut reached = Provisioned::with_kubeconfig(input.name, progress);
        if let Some(identity) = identity {
            reached
                .workload_credentials
                .insert("identity", identity.as_identity());
        }
        Ok(reached)
    }

    /// Modelplane's own class, reported only once its StorageClass is observed on the cluster, so no cache
    /// volume waits on a class that does not exist yet.
    fn cache_storage_class(&self, out: &Output) -> Option<String> {
        provision::ready_storage_class(out, KEY_STORAGE_CLASS, FS_STORAGE_CLASS)
    }

    fn pool_key(&self, pool: &str) -> Option<String> {
        Some(node_group_key(pool))
    }

    fn uses(&self, kind: &str, key: &str) -> Vec<String> {
        let uses: &[&str] = match kind {
            "NodeGroup" => &[KEY_CLUSTER, KEY_FILESYSTEM, KEY_CLOUD_INIT],
            "Release" | "Object" => &[KEY_CLUSTER],
            "Cluster" => &[KEY_SUBNET],
            "Subnet" => &[KEY_NETWORK],
            _ => &[],
        };
        let mut used = provision::keys(uses);
        if kind == "NodeGroup"
            && let Some(gpu_cluster) = self.gpu_cluster_of.get(key)
        {
            used.push(gpu_cluster.clone());
        }
        used
    }
}

fn compose(
    out: &mut Output,
    ctx: &Context,
    spec: &InferenceClusterSpec,
    classes: &BTreeMap<String, InferenceClassSpec>,
) -> Result<Progress, ComposeError> {
    let policy = activation_policy(ctx.name);
    let what = "the provider-upjet-nebius activation policy";
    if let Some(waiting) = provision::activate(out, ctx.seen, policy, KEY_PREFIX, what) {
        return Ok(waiting);
    }
    let mut progress = Progress::default();

    infra::network(out, ctx);
    infra::filesystem(out, ctx);
    infra::cloud_init(out, ctx);
    infra::gpu_clusters(out, ctx, spec);
    if !infra::subnet(out, ctx) {
        progress.waiting.push("the Nebius network");
    }
    if !infra::cluster(out, ctx) {
        progress.waiting.push("the Nebius subnet");
    }

    progress.cluster_ready = ctx.seen.ready(KEY_CLUSTER);
    if progress.cluster_ready || ctx.seen.any_with_prefix(&node_group_key("")) {
        progress
            .waiting
            .extend(node_pools::compose(out, ctx, spec, classes));
    } else {
        progress.waiting.push("the mk8s cluster");
    }
    if progress.cluster_ready || ctx.seen.exists(KEY_CSI_DRIVER) {
        out.compose(KEY_CSI_DRIVER, infra::csi_driver(ctx.name), false);
    }
    if ctx.seen.ready(KEY_CSI_DRIVER) || ctx.seen.exists(KEY_STORAGE_CLASS) {
        out.compose(KEY_STORAGE_CLASS, infra::storage_class(ctx.name), false);
    } else {
        progress.waiting.push("the shared filesystem's CSI driver");
    }
    Ok(progress)
}

/// What every stage reads.
pub type Context<'a> = upjet::Context<'a, NebiusCluster>;

/// An ID a resource is built from: read from the resource it comes from (`source`) once that is Ready, else from
/// what the resource that takes it (`taker`) was composed with, so a resource that exists never loses an input
/// because its source is not observed right now.
pub fn id_input(ctx: &Context, source: &str, taker: &str, taker_pointer: &str) -> Option<String> {
    ctx.input((source, "/status/atProvider/id"), (taker, taker_pointer))
}

/// The ManagedResourceActivationPolicy that activates provider-upjet-nebius's kinds.
pub fn activation_policy(cluster: &str) -> Fields {
    provision::activation_policy(cluster, "provider-upjet-nebius", CRDS)
}

#[cfg(test)]
mod tests;
