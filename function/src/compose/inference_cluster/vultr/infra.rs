//! The Vultr side of a stock cluster besides its GPU pools: the VPC and the VKE cluster with its inline system
//! pool.

use super::{Context, KEY_CLUSTER, KEY_VPC, NETWORK_API_VERSION, VKE_API_VERSION, node_pools};
use crate::compose::Output;
use crate::wire::tree::tree;

/// VKE's control plane on several hosts: a single one going down would stop provider-kubernetes and provider-helm
/// from reconciling anything on the cluster until Vultr brought it back.
const HA_CONTROL_PLANES: bool = true;

/// The VPC the cluster's nodes share, in the cluster's region; its ID once Vultr has made it (or, for a cluster
/// that exists, the VPC it was made in). Vultr picks a free private range itself when none is given, so none is.
pub fn vpc(out: &mut Output, ctx: &Context) -> Option<String> {
    let mr = ctx.managed(
        NETWORK_API_VERSION,
        "VPC",
        ctx.name,
        tree!({
            "region": &ctx.cluster.region,
            "description": format!("Modelplane InferenceCluster {}", ctx.name),
        }),
    );
    out.compose(KEY_VPC, mr.build(), false);
    ctx.ready_string(KEY_VPC, "/status/atProvider/id")
        .or_else(|| ctx.spec_string(KEY_CLUSTER, "/spec/forProvider/vpcId"))
}

/// The VKE cluster in `vpc`, with the system pool inline, writing its kubeconfig for the provider configs.
pub fn cluster(out: &mut Output, ctx: &Context, vpc: &str) {
    let mr = ctx.cluster_managed(
        VKE_API_VERSION,
        "Kubernetes",
        tree!({
            "label": ctx.name,
            "region": &ctx.cluster.region,
            "version": &ctx.cluster.kubernetes_version,
            "haControlplanes": HA_CONTROL_PLANES,
            "vpcId": vpc,
            "nodePools": node_pools::system_pool(),
        }),
    );
    out.compose(KEY_CLUSTER, mr.build(), false);
}

/// The VKE cluster's ID, which its node pools attach to, once it is Ready.
pub fn cluster_id(ctx: &Context) -> Option<String> {
    ctx.ready_string(KEY_CLUSTER, "/status/atProvider/id")
}
