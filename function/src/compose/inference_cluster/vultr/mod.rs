//! The Vultr half of a cluster: a VKE cluster through provider-upjet-vultr, composed in the order Vultr needs
//! it and torn down in reverse.
//!
//! Each stage is composed only once what it needs is observed, reading IDs from the observed status of the stage
//! before, so the provider never resolves a reference and never sees a half-known spec:
//!
//! 1. the activation policy that starts provider-upjet-vultr's controllers for the kinds composed here; nothing
//!    of the provider before it is seen, or Crossplane's first applies fail for want of the kinds;
//! 2. the `VPC` the cluster's nodes share (Vultr has no node identity or role bindings to compose: the API key
//!    of the provider config is the only credential, and nodes need none);
//! 3. the `Kubernetes` cluster in that VPC, with the system pool inline (VKE creates no cluster without a pool)
//!    and its kubeconfig written to the connection secret provider-kubernetes and provider-helm read;
//! 4. once the cluster is Ready: one `KubernetesNodePool` per `spec.nodePools` entry, and the in-cluster NFS
//!    server model caches stage on (see [`storage`]);
//! 5. once the NFS server and its CSI driver are Ready: the `modelplane-rwx-fs` StorageClass, which is what the
//!    InferenceCluster reports as its cache storage class.
//!
//! A resource that exists stays composed even if what it was built from is no longer observed (leaving it out
//! would delete it); its inputs then come from its own observed spec. Deletion runs in reverse, held in order by
//! Crossplane `Usage`s ([`Vultr::uses`]): the GPU pools and everything on the cluster first, then the cluster,
//! then its VPC.

use std::collections::BTreeMap;

use super::observed::Observed;
use super::provision::{self, ClusterInput, Credentials, Progress, Provisioned, Provisioner};
use super::upjet;
use crate::{
    api::{
        inference_class::InferenceClassSpec,
        inference_cluster::{InferenceClusterSpec, VultrCluster},
    },
    compose::{ComposeError, Output},
    stack::Cloud,
};

mod check;
mod infra;
mod node_pools;
mod storage;

/// Every composed resource of provider-upjet-vultr or of the NFS stack is keyed `vultr-...`, so one observed
/// key of the prefix says the activation policy has done its work.
const KEY_PREFIX: &str = "vultr-";
pub const KEY_VPC: &str = "vultr-vpc";
pub const KEY_CLUSTER: &str = "vultr-cluster";

/// The upjet groups and the name of the provider package the policy activates.
pub const PROVIDER: &str = "provider-upjet-vultr";
pub const VKE_API_VERSION: &str = "vke.vultr.m.upbound.io/v1beta1";
pub const NETWORK_API_VERSION: &str = "network.vultr.m.upbound.io/v1beta1";
/// The CRDs of every provider-upjet-vultr kind composed here, as the activation policy names them.
pub const CRDS: &[&str] = &[
    "vpcs.network.vultr.m.upbound.io",
    "kubernetes.vke.vultr.m.upbound.io",
    "kubernetesnodepools.vke.vultr.m.upbound.io",
];

pub fn node_pool_key(pool: &str) -> String {
    format!("{KEY_PREFIX}nodepool-{pool}")
}

pub fn provisioner(cluster: &VultrCluster) -> Box<dyn Provisioner + '_> {
    Box::new(Vultr { cluster })
}

/// A VKE cluster provider-upjet-vultr provisions.
pub struct Vultr<'a> {
    cluster: &'a VultrCluster,
}

impl Provisioner for Vultr<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Vultr
    }

    fn credentials(&self) -> Option<Credentials> {
        Some(upjet::credentials(self.cluster))
    }

    fn region(&self) -> Option<&str> {
        Some(&self.cluster.region)
    }

    fn check(&self, input: &ClusterInput) -> Result<(), ComposeError> {
        check::cluster(self.cluster)?;
        check::pools(input.spec)?;
        super::check::each_pool_class(input, |p| p.vultr.as_ref(), check::pool)
    }

    /// The VKE kubeconfig authenticates with the client certificate it embeds.
    fn compose(&self, input: &ClusterInput, out: &mut Output) -> Result<Provisioned, ComposeError> {
        let seen = Observed::new(input.req);
        let ctx = Context::new(input, self.cluster, &seen);
        let progress = compose(out, &ctx, input.spec, input.classes);
        Ok(Provisioned::with_kubeconfig(input.name, progress))
    }

    /// Modelplane's NFS class, once its StorageClass is observed on the cluster.
    fn cache_storage_class(&self, out: &Output) -> Option<String> {
        provision::ready_storage_class(out, storage::KEY_STORAGE_CLASS, storage::STORAGE_CLASS)
    }

    /// The system pool is the cluster's inline pool, so the cluster gates it; every other pool has its own MR.
    fn pool_key(&self, pool: &str) -> Option<String> {
        if pool == node_pools::SYSTEM {
            return Some(KEY_CLUSTER.to_owned());
        }
        Some(node_pool_key(pool))
    }

    fn uses(&self, kind: &str, _key: &str) -> Vec<String> {
        let uses: &[&str] = match kind {
            // What runs on the cluster or hangs off it goes first, while the API server still answers.
            "KubernetesNodePool" | "Release" | "Object" => &[KEY_CLUSTER],
            // The cluster's nodes sit in the VPC: it goes only once they are gone.
            "Kubernetes" => &[KEY_VPC],
            _ => &[],
        };
        provision::keys(uses)
    }
}

fn compose(
    out: &mut Output,
    ctx: &Context,
    spec: &InferenceClusterSpec,
    classes: &BTreeMap<String, InferenceClassSpec>,
) -> Progress {
    let policy = provision::activation_policy(ctx.name, PROVIDER, CRDS);
    let what = "the provider-upjet-vultr activation policy";
    if let Some(waiting) = provision::activate(out, ctx.seen, policy, KEY_PREFIX, what) {
        return waiting;
    }
    let mut progress = Progress::default();

    match infra::vpc(out, ctx) {
        Some(vpc) => infra::cluster(out, ctx, &vpc),
        None => progress.waiting.push("the VPC"),
    }

    progress.cluster_ready = ctx.seen.ready(KEY_CLUSTER);
    let pools_composed = spec
        .node_pools
        .iter()
        .any(|p| ctx.seen.exists(&node_pool_key(&p.name)));
    if !(progress.cluster_ready || pools_composed || storage::any_composed(ctx)) {
        progress.waiting.push("the VKE cluster");
        return progress;
    }
    node_pools::compose(out, ctx, spec, classes, infra::cluster_id(ctx).as_deref());
    if !storage::compose(out, ctx) {
        progress.waiting.push("the NFS server for model caches");
    }
    progress
}

/// What every stage reads.
pub type Context<'a> = upjet::Context<'a, VultrCluster>;

#[cfg(test)]
mod tests;
