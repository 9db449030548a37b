//! The node pools: a system pool for the controllers and one pool per `spec.nodePools` entry, hardware from its
//! InferenceClass and placement from the pool. GKE's own cluster autoscaler moves each pool within its range.

use std::collections::BTreeMap;

use crate::wire::tree::{Fields, Tree, fields, tree};

use super::{Context, infra, node_pool_key};
use crate::{
    api::{
        inference_class::InferenceClassSpec,
        inference_cluster::{InferenceClusterSpec, TaintEffect},
    },
    compose::{
        ComposeError, Output,
        inference_cluster::{check::SYSTEM_POOL, upjet},
    },
};

pub const SYSTEM: &str = SYSTEM_POOL;
const CONTAINER: &str = "container.gcp.m.upbound.io/v1beta1";

/// The system pool runs the controllers (gateway, schedulers, cert-manager) off the GPU nodes: general-purpose
/// machines, one in each zone GKE spreads a regional pool over, growing to two per zone under load.
const SYSTEM_MACHINE_TYPE: &str = "e2-standard-4";
const SYSTEM_NODES: (u32, u32, u32) = (REGION_ZONES, REGION_ZONES, 2 * REGION_ZONES);
/// The zones GKE spreads a regional pool over when it names none.
const REGION_ZONES: u32 = 3;
/// Container-Optimized OS: the image GKE installs NVIDIA's driver on (at `Cloud::Gke.nvidia_driver_root()`).
const IMAGE_TYPE: &str = "COS_CONTAINERD";
/// Access is governed by the node account's IAM role, not by scopes: the one scope that defers to IAM.
pub const OAUTH_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// GKE installs its default driver version for the node's GPU and keeps it matched to the node image.
const GPU_DRIVER_VERSION: &str = "DEFAULT";
/// Tells GKE's autoscaler that the pool's nodes run NVIDIA's DRA driver, so it models the ResourceSlices a new
/// node would publish: without it a pool at zero nodes never scales up for a pod whose GPUs are claimed by DRA.
const DRA_DRIVER_LABEL: &str = "cloud.google.com/gke-nvidia-gpu-dra-driver";

pub fn compose(
    out: &mut Output,
    ctx: &Context,
    spec: &InferenceClusterSpec,
    classes: &BTreeMap<String, InferenceClassSpec>,
) -> Result<(), ComposeError> {
    let (count, min, max) = SYSTEM_NODES;
    let system = fields!({
        "machineType": SYSTEM_MACHINE_TYPE,
        "imageType": IMAGE_TYPE,
        "labels": upjet::pool_labels(SYSTEM, None),
    });
    compose_pool(out, ctx, SYSTEM, system, (count, min, max), &[]);

    for pool in &spec.node_pools {
        let Some(class) = classes
            .get(&pool.class_name)
            .and_then(|c| c.provisioning.gke.as_ref())
        else {
            continue; // check::pools_against_classes has already refused this.
        };
        let mut labels = upjet::pool_labels(&pool.name, Some(&class.accelerator.type_));
        labels.insert(DRA_DRIVER_LABEL.to_owned(), "true".to_owned());
        let taints: Vec<Tree> = upjet::gpu_taints(spec)
            .into_iter()
            .map(|t| tree!({"key": t.key, "value": t.value, "effect": effect(t.effect)}))
            .collect();
        let node_config = fields!({
            "machineType": &class.machine_type,
            "diskSizeGb": class.disk_size_gb,
            "imageType": IMAGE_TYPE,
            "labels": labels,
            "taint": taints,
            "guestAccelerator": [{
                "type": &class.accelerator.type_,
                "count": class.accelerator.count,
                "gpuDriverInstallationConfig": {"gpuDriverVersion": GPU_DRIVER_VERSION},
            }],
        });
        let (min, max) = upjet::node_range(pool);
        compose_pool(
            out,
            ctx,
            &pool.name,
            node_config,
            (pool.node_count, min, max),
            &pool.zones,
        );
    }
    Ok(())
}

/// One pool, once the cluster's ID and the node account are known (or as it was composed, once it exists).
fn compose_pool(
    out: &mut Output,
    ctx: &Context,
    pool: &str,
    mut node_config: Fields,
    nodes: (u32, u32, u32),
    zones: &[String],
) {
    let key = node_pool_key(pool);
    let own = |pointer| (key.as_str(), pointer);
    let cluster = infra::cluster_id(ctx, &key);
    let email = infra::account_email(
        ctx,
        &infra::NODES,
        own("/spec/forProvider/nodeConfig/serviceAccount"),
    );
    let (Some(cluster), Some(email)) = (cluster, email) else {
        return;
    };
    node_config.insert("serviceAccount", email);
    node_config.insert("oauthScopes", tree!([OAUTH_SCOPE]));
    let (count, min, max) = nodes;
    // The pool's own counts are totals; GKE's initial count is per zone. A regional pool without zones spreads
    // over the region's zones (three for every GPU region), so its total is split the same way.
    let spread = if zones.is_empty() {
        REGION_ZONES
    } else {
        zones.len() as u32
    };
    let mut for_provider = fields!({
        "location": &ctx.cluster.region,
        "cluster": cluster,
        "initialNodeCount": count.div_ceil(spread),
        "autoscaling": {"totalMinNodeCount": min, "totalMaxNodeCount": max, "locationPolicy": "ANY"},
        "management": {"autoRepair": true, "autoUpgrade": true},
        "nodeConfig": node_config,
    });
    if !zones.is_empty() {
        for_provider.insert("nodeLocations", zones.to_vec());
    }
    let mr = ctx
        .managed(
            CONTAINER,
            "NodePool",
            &format!("{}-{pool}", ctx.name),
            for_provider.into(),
        )
        // The provider creates the pool under its own name: GKE allows 40 characters, which `<cluster>-<pool>`
        // may exceed, and pool names are unique within their cluster.
        .external_name(pool);
    out.compose(key, mr.build(), false);
}

/// The Compute Engine spelling of a taint's effect.
fn effect(effect: TaintEffect) -> &'static str {
    match effect {
        TaintEffect::NoSchedule => "NO_SCHEDULE",
        TaintEffect::PreferNoSchedule => "PREFER_NO_SCHEDULE",
        TaintEffect::NoExecute => "NO_EXECUTE",
    }
}
