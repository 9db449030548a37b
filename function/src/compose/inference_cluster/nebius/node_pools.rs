//! The node groups: a system group for the controllers and one group per `spec.nodePools` entry, hardware from
//! its InferenceClass and size from the pool. Every group attaches the shared filesystem and mounts it, so a
//! cache volume can be served on any node.

use std::collections::BTreeMap;

use crate::wire::tree::{Fields, Tree, fields, tree};

use super::{
    API_MK8S, Context, KEY_CLUSTER, KEY_FILESYSTEM, KEY_SUBNET, gpu_cluster_key, id_input, infra,
    node_group_key,
};
use crate::{
    api::{
        inference_class::InferenceClassSpec,
        inference_cluster::{FabricType, InferenceClusterSpec, NodePool, TaintEffect},
    },
    compose::{
        Output,
        inference_cluster::{check::SYSTEM_POOL, upjet},
    },
};

pub const SYSTEM: &str = SYSTEM_POOL;

/// The system group runs the controllers (gateway, schedulers, monitoring) off the GPU nodes: general-purpose
/// 4 vCPU / 16 GB nodes, two for availability, growing to three under load (as on EKS).
const SYSTEM_PLATFORM: &str = "cpu-d3";
const SYSTEM_PRESET: &str = "4vcpu-16gb";
const SYSTEM_RANGE: (u32, u32) = (2, 3);
const SYSTEM_DISK_GIB: u32 = 100;
/// Network SSD boot disks: every platform takes them, where local disks would tie a group to some presets.
const BOOT_DISK_TYPE: &str = "NETWORK_SSD";

/// Which GPU cluster each node group joins, by composed key.
pub fn gpu_clusters_of(spec: &InferenceClusterSpec) -> BTreeMap<String, String> {
    spec.node_pools
        .iter()
        .filter_map(|p| Some((node_group_key(&p.name), gpu_cluster_key(fabric(p)?))))
        .collect()
}

fn fabric(pool: &NodePool) -> Option<&str> {
    match pool.fabric.type_ {
        FabricType::InfiniBand => pool.fabric.infiniband.as_ref().map(|i| i.fabric.as_str()),
        FabricType::None | FabricType::Efa => None,
    }
}

/// What one group is built from besides its hardware.
struct Placement {
    parent: String,
    subnet: String,
    filesystem: String,
    gpu_cluster: Option<String>,
}

/// Composes every group whose inputs are known; what still waits, for the composite's status.
pub fn compose(
    out: &mut Output,
    ctx: &Context,
    spec: &InferenceClusterSpec,
    classes: &BTreeMap<String, InferenceClassSpec>,
) -> Vec<&'static str> {
    let mut waiting = Vec::new();
    let system = fields!({
        "resources": {"platform": SYSTEM_PLATFORM, "preset": SYSTEM_PRESET},
        "bootDisk": {"sizeGibibytes": SYSTEM_DISK_GIB, "type": BOOT_DISK_TYPE},
        "metadata": {"labels": upjet::pool_labels(SYSTEM, None)},
    });
    match placement(ctx, SYSTEM, None) {
        Some(at) => compose_group(out, ctx, SYSTEM, system, SYSTEM_RANGE, None, &at),
        None => waiting.push("the system node group's subnet, cluster and filesystem IDs"),
    }

    let taints: Vec<Tree> = upjet::gpu_taints(spec)
        .into_iter()
        .map(|t| tree!({"key": t.key, "value": t.value, "effect": effect(t.effect)}))
        .collect();
    for pool in &spec.node_pools {
        let Some(class) = classes
            .get(&pool.class_name)
            .and_then(|c| c.provisioning.nebius.as_ref())
        else {
            continue; // check::pools_against_classes has already refused this.
        };
        let template = fields!({
            "resources": {"platform": &class.platform, "preset": &class.preset},
            "bootDisk": {"sizeGibibytes": class.disk_size_gb, "type": BOOT_DISK_TYPE},
            "gpuSettings": {"driversPreset": &class.drivers_preset},
            "metadata": {"labels": upjet::pool_labels(&pool.name, Some(&class.accelerator.type_))},
            "taints": taints.clone(),
        });
        match placement(ctx, &pool.name, fabric(pool)) {
            Some(at) => compose_group(
                out,
                ctx,
                &pool.name,
                template,
                upjet::node_range(pool),
                Some(pool.node_count),
                &at,
            ),
            None => waiting.push("a GPU node group's subnet, cluster, filesystem and GPU cluster IDs"),
        }
    }
    waiting
}

/// The IDs a group is built from, from the stages before (or the group's own spec once it exists).
fn placement(ctx: &Context, pool: &str, fabric: Option<&str>) -> Option<Placement> {
    let key = node_group_key(pool);
    let gpu_cluster = match fabric {
        Some(fabric) => Some(id_input(
            ctx,
            &gpu_cluster_key(fabric),
            &key,
            "/spec/forProvider/template/gpuCluster/id",
        )?),
        None => None,
    };
    Some(Placement {
        parent: id_input(ctx, KEY_CLUSTER, &key, "/spec/forProvider/parentId")?,
        subnet: id_input(
            ctx,
            KEY_SUBNET,
            &key,
            "/spec/forProvider/template/networkInterfaces/0/subnetId",
        )?,
        filesystem: id_input(
            ctx,
            KEY_FILESYSTEM,
            &key,
            "/spec/forProvider/template/filesystems/0/existingFilesystem/id",
        )?,
        gpu_cluster,
    })
}

fn compose_group(
    out: &mut Output,
    ctx: &Context,
    pool: &str,
    mut template: Fields,
    (min, max): (u32, u32),
    node_count: Option<u32>,
    at: &Placement,
) {
    template.insert("networkInterfaces", tree!([{"subnetId": &at.subnet}]));
    template.insert(
        "filesystems",
        tree!([{"attachMode": "READ_WRITE", "mountTag": infra::FS_MOUNT_TAG,
                "existingFilesystem": {"id": &at.filesystem}}]),
    );
    template.insert(
        "cloudInitUserDataSecretRef",
        tree!({"name": infra::cloud_init_secret(ctx.name), "key": infra::CLOUD_INIT_KEY}),
    );
    if let Some(gpu_cluster) = &at.gpu_cluster {
        template.insert("gpuCluster", tree!({"id": gpu_cluster}));
    }
    let name = format!("{}-{pool}", ctx.name);
    let mut for_provider = fields!({
        "name": &name,
        "parentId": &at.parent,
        "version": &ctx.cluster.kubernetes_version,
        "template": template,
    });
    // mk8s scales a group itself between the bounds of its autoscaling block, and a group is either autoscaled
    // or of fixed size, never both: a pool without a range keeps its node count.
    if max > min {
        for_provider.insert("autoscaling", tree!({"minNodeCount": min, "maxNodeCount": max}));
    } else {
        for_provider.insert("fixedNodeCount", node_count.unwrap_or(min));
    }
    let mr = ctx.managed(API_MK8S, "NodeGroup", &name, for_provider.into());
    out.compose(node_group_key(pool), mr.build(), false);
}

/// Nebius spells taint effects in its API's enum style.
fn effect(effect: TaintEffect) -> &'static str {
    match effect {
        TaintEffect::NoSchedule => "NO_SCHEDULE",
        TaintEffect::PreferNoSchedule => "PREFER_NO_SCHEDULE",
        TaintEffect::NoExecute => "NO_EXECUTE",
    }
}
