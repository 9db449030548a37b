//! The GKE half of a cluster, composed through provider-upjet-gcp's namespaced kinds in the order Google Cloud
//! needs them and torn down in reverse.
//!
//! Each stage is composed only once what it needs is observed Ready, reading names and IDs from the observed
//! status of the stage before, so the provider never resolves a reference and never sees a half-known spec:
//!
//! 1. the activation policy that starts the provider's controllers for exactly the kinds below;
//! 2. the project's Compute, Kubernetes Engine, Filestore and IAM APIs (`ProjectService`; a fresh project has
//!    them off, and every later stage fails without them; left enabled on deletion, since other workloads of
//!    the project may use them);
//! 3. the VPC `Network` and two `ServiceAccount`s: one the nodes run as, one provider-kubernetes and
//!    provider-helm authenticate to the cluster as (GKE's kubeconfig carries no credentials of its own);
//! 4. the `Subnetwork` with the pods' and services' secondary ranges, each account's `ProjectIAMMember` role,
//!    and the admin account's key (its connection secret is the identity the provider configs present);
//! 5. the `Cluster` on that subnetwork, default pool removed, Filestore CSI enabled, writing its kubeconfig;
//! 6. once the cluster is Ready: the system `NodePool` and one per `spec.nodePools` entry, and once Filestore's
//!    API is on too, the `modelplane-rwx` StorageClass on the workload cluster (Filestore on the cluster's VPC).
//!
//! Deletion is ordered by Usages ([`Gke::uses`]): what runs on the cluster and its pools first, then the
//! cluster, then its subnetwork, network and node identity; the admin identity outlives everything that
//! reaches the cluster with it.

use std::collections::BTreeMap;

use crate::wire::tree::tree;

use super::observed::Observed;
use super::provision::{self, ClusterInput, Credentials, Progress, Provisioned, Provisioner};
use super::upjet;
use crate::compose::shared::CONTROL_NAMESPACE;
use crate::{
    api::{
        inference_class::InferenceClassSpec,
        inference_cluster::{GkeCluster, InferenceClusterSpec},
    },
    compose::{ComposeError, Output},
    stack::Cloud,
};

mod check;
mod infra;
mod node_pools;

pub const KEY_NETWORK: &str = "gke-network";
pub const KEY_SUBNET: &str = "gke-subnet";
pub const KEY_CLUSTER: &str = "gke-cluster";
pub const KEY_NODE_ACCOUNT: &str = "gke-sa-nodes";
pub const KEY_ADMIN_ACCOUNT: &str = "gke-sa-admin";
pub const KEY_ADMIN_KEY: &str = "gke-sa-admin-key";
pub const KEY_NODE_ROLE: &str = "gke-iam-nodes";
pub const KEY_ADMIN_ROLE: &str = "gke-iam-admin";
pub const KEY_STORAGE_CLASS: &str = "object-storageclass-filestore";
const API_PREFIX: &str = "gke-api-";

/// The ReadWriteMany StorageClass every GKE cluster gets for model caches (upstream Modelplane's name on GKE).
pub const FILESTORE_STORAGE_CLASS: &str = "modelplane-rwx";

/// Where the admin account's key lands, in [`CONTROL_NAMESPACE`], and the key provider-upjet-gcp writes it under.
pub fn admin_key_secret(cluster: &str) -> String {
    format!("{cluster}-gcp-admin-key")
}
const PRIVATE_KEY: &str = "private_key";
/// The identity type provider-kubernetes and provider-helm exchange a service account key for a token with.
const IDENTITY_TYPE: &str = "GoogleApplicationCredentials";

pub fn node_pool_key(pool: &str) -> String {
    format!("gke-nodepool-{pool}")
}

/// A GKE cluster provider-upjet-gcp provisions.
pub struct Gke<'a> {
    cluster: &'a GkeCluster,
}

pub fn provisioner(cluster: &GkeCluster) -> Box<dyn Provisioner + '_> {
    Box::new(Gke { cluster })
}

impl Provisioner for Gke<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Gke
    }

    fn region(&self) -> Option<&str> {
        Some(&self.cluster.region)
    }

    fn credentials(&self) -> Option<Credentials> {
        Some(upjet::credentials(self.cluster))
    }

    fn check(&self, input: &ClusterInput) -> Result<(), ComposeError> {
        check::cluster(self.cluster, input.spec)?;
        super::check::each_pool_class(input, |p| p.gke.as_ref(), check::pool)
    }

    /// GKE's kubeconfig names the cluster and its CA but no user: provider-kubernetes and provider-helm
    /// exchange the admin account's key for a Google token each time they connect.
    fn compose(&self, input: &ClusterInput, out: &mut Output) -> Result<Provisioned, ComposeError> {
        check::cluster_name(input.name)?;
        let seen = Observed::new(input.req);
        let ctx = Context::new(input, self.cluster, &seen);
        let progress = compose(out, &ctx, input.spec, input.classes)?;
        let mut reached = Provisioned::with_kubeconfig(input.name, progress);
        reached.workload_credentials.insert("identity", tree!({
            "type": IDENTITY_TYPE,
            "source": "Secret",
            "secretRef": {"name": admin_key_secret(input.name), "namespace": CONTROL_NAMESPACE, "key": PRIVATE_KEY},
        }));
        Ok(reached)
    }

    fn cache_storage_class(&self, out: &Output) -> Option<String> {
        provision::ready_storage_class(out, KEY_STORAGE_CLASS, FILESTORE_STORAGE_CLASS)
    }

    fn pool_key(&self, pool: &str) -> Option<String> {
        Some(node_pool_key(pool))
    }

    fn uses(&self, kind: &str, key: &str) -> Vec<String> {
        let uses: &[&str] = match kind {
            "Release" | "Object" => &[KEY_CLUSTER],
            "NodePool" => &[KEY_CLUSTER, KEY_NODE_ACCOUNT, KEY_NODE_ROLE],
            // Whatever reaches the cluster through provider-kubernetes or provider-helm does so as the admin
            // account, and goes before the cluster does: the cluster holding on to the admin's key and role keeps
            // them until the last Release and Object are gone, with one Usage each instead of one per Release.
            "Cluster" => &[
                KEY_SUBNET,
                KEY_NETWORK,
                KEY_NODE_ACCOUNT,
                KEY_ADMIN_KEY,
                KEY_ADMIN_ROLE,
            ],
            "Subnetwork" => &[KEY_NETWORK],
            "ServiceAccountKey" => &[KEY_ADMIN_ACCOUNT],
            "ProjectIAMMember" if key == KEY_ADMIN_ROLE => &[KEY_ADMIN_ACCOUNT],
            "ProjectIAMMember" => &[KEY_NODE_ACCOUNT],
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
) -> Result<Progress, ComposeError> {
    let seen = ctx.seen;
    let policy = infra::activation_policy(ctx.name);
    let what = "the provider-upjet-gcp activation policy";
    if let Some(waiting) = provision::activate(out, seen, policy, "gke-", what) {
        return Ok(waiting);
    }
    let mut progress = Progress::default();

    let apis = infra::project_services(out, ctx);
    let past_apis = [KEY_NETWORK, KEY_NODE_ACCOUNT, KEY_ADMIN_ACCOUNT]
        .iter()
        .any(|key| seen.exists(key));
    if !apis.core && !past_apis {
        progress
            .waiting
            .push("the project's Compute Engine, Kubernetes Engine and IAM APIs");
        return Ok(progress);
    }
    infra::network(out, ctx);
    infra::service_account(out, ctx, &infra::NODES);
    infra::service_account(out, ctx, &infra::ADMIN);
    let identities = [
        infra::role_binding(out, ctx, &infra::NODES),
        infra::role_binding(out, ctx, &infra::ADMIN),
        infra::admin_key(out, ctx),
    ];
    if identities.contains(&false) {
        progress.waiting.push("the service accounts");
    }
    let subnet = infra::subnet(out, ctx);
    let cluster_composed = infra::cluster(out, ctx);
    if !(subnet && cluster_composed) {
        progress.waiting.push("the network and subnetwork");
    }

    let cluster = seen.ready(KEY_CLUSTER);
    progress.cluster_ready = cluster && seen.ready(KEY_ADMIN_KEY) && seen.ready(KEY_ADMIN_ROLE);
    if cluster || seen.exists(&node_pool_key(node_pools::SYSTEM)) {
        node_pools::compose(out, ctx, spec, classes)?;
    } else {
        progress.waiting.push("the GKE cluster");
    }

    match infra::network_name(ctx) {
        Some(vpc) if (cluster && apis.filestore) || seen.exists(KEY_STORAGE_CLASS) => {
            out.compose(KEY_STORAGE_CLASS, infra::storage_class(ctx.name, &vpc), false);
        }
        _ => progress.waiting.push("the Filestore API and the cluster's VPC"),
    }
    Ok(progress)
}

/// What every stage reads.
pub type Context<'a> = upjet::Context<'a, GkeCluster>;

#[cfg(test)]
mod tests;
