//! The node pools: the system pool, which is the cluster's default pool (AKS creates no cluster without one),
//! and one User pool per `spec.nodePools` entry, hardware from its InferenceClass and placement from the pool.

use std::collections::BTreeMap;

use crate::wire::tree::{Tree, fields, tree};

use super::{Context, KEY_CLUSTER, infra::CONTAINER_SERVICE_API, node_pool_key, tags};
use crate::{
    api::{inference_class::InferenceClassSpec, inference_cluster::InferenceClusterSpec},
    compose::{
        Output,
        inference_cluster::{check::SYSTEM_POOL, upjet},
    },
};

pub const SYSTEM: &str = SYSTEM_POOL;

/// The system pool runs the controllers (gateway, schedulers, cert-manager, CoreDNS) off the GPU nodes:
/// general-purpose 4-vCPU VMs, two so a node upgrade or loss leaves CoreDNS and the gateway running, growing to
/// three under load (AKS's own autoscaler moves it in that range).
const SYSTEM_VM_SIZE: &str = "Standard_D4s_v5";
const SYSTEM_MIN_NODES: u32 = 2;
const SYSTEM_MAX_NODES: u32 = 3;
/// Upstream Modelplane's system disk: room for the controllers' images.
const SYSTEM_DISK_SIZE_GB: u32 = 100;
/// AKS rotates the default pool through a temporary pool when a change (VM size, disk) needs new nodes; the
/// name only has to differ from the pool's own and fit AKS's 12 characters.
const SYSTEM_ROTATION_NAME: &str = "systemtmp";

/// AKS installs the NVIDIA driver on a GPU pool's nodes; the device plugin it would pair with stays off our
/// path, since the serving stack's DRA driver binds GPUs to pods.
const GPU_DRIVER: &str = "Install";

/// Every action but LateInitialize: the node count a pool starts with is given once (`initProvider`) and then
/// belongs to AKS's autoscaler, which late initialization would copy back into the spec and so fight.
pub const MANAGEMENT_POLICIES: [&str; 4] = ["Observe", "Create", "Update", "Delete"];

/// The cluster's default pool, on `subnet`.
pub fn system_pool(subnet: &str) -> Tree {
    tree!({
        "name": SYSTEM,
        "vmSize": SYSTEM_VM_SIZE,
        "autoScalingEnabled": true,
        "minCount": SYSTEM_MIN_NODES,
        "maxCount": SYSTEM_MAX_NODES,
        "osDiskSizeGb": SYSTEM_DISK_SIZE_GB,
        "temporaryNameForRotation": SYSTEM_ROTATION_NAME,
        "nodeLabels": upjet::pool_labels(SYSTEM, None),
        "vnetSubnetId": subnet,
    })
}

/// One User pool per `spec.nodePools` entry whose cluster and subnet are known: from the Ready cluster and
/// subnet, or, for a pool that exists, from what it was composed with.
pub fn compose(
    out: &mut Output,
    ctx: &Context,
    spec: &InferenceClusterSpec,
    classes: &BTreeMap<String, InferenceClassSpec>,
    subnet: Option<&str>,
) {
    let cluster_id = ctx.ready_string(KEY_CLUSTER, "/status/atProvider/id");
    let taints: Vec<String> = upjet::gpu_taints(spec)
        .iter()
        .map(|t| format!("{}={}:{}", t.key, t.value, t.effect.as_str()))
        .collect();
    for pool in &spec.node_pools {
        let Some(class) = classes
            .get(&pool.class_name)
            .and_then(|c| c.provisioning.aks.as_ref())
        else {
            continue; // The composer has refused a class without provisioning.aks by name.
        };
        let key = node_pool_key(&pool.name);
        let cluster_id = cluster_id
            .clone()
            .or_else(|| ctx.spec_string(&key, "/spec/forProvider/kubernetesClusterId"));
        let subnet = subnet
            .map(str::to_owned)
            .or_else(|| ctx.spec_string(&key, "/spec/forProvider/vnetSubnetId"));
        let (Some(cluster_id), Some(subnet)) = (cluster_id, subnet) else {
            continue;
        };
        let mut for_provider = fields!({
            "kubernetesClusterId": cluster_id,
            // Every pool of a cluster on its own network must be in that network; the one subnet serves all.
            "vnetSubnetId": subnet,
            "mode": "User",
            "vmSize": &class.vm_size,
            "osDiskSizeGb": class.disk_size_gb,
            "gpuDriver": GPU_DRIVER,
            "nodeLabels": upjet::pool_labels(&pool.name, Some(&class.accelerator.type_)),
            "nodeTaints": taints.clone(),
            "tags": tags(ctx.name),
        });
        if !pool.zones.is_empty() {
            for_provider.insert("zones", pool.zones.clone());
        }
        let (min, max) = upjet::node_range(pool);
        let scaling = if max > min {
            // AKS's autoscaler moves the pool within the range; the count is only where it starts.
            for_provider.insert("autoScalingEnabled", true);
            for_provider.insert("minCount", min);
            for_provider.insert("maxCount", max);
            Some(tree!({"nodeCount": pool.node_count}))
        } else {
            for_provider.insert("autoScalingEnabled", false);
            for_provider.insert("nodeCount", pool.node_count);
            None
        };
        let mut mr = ctx
            .managed(
                CONTAINER_SERVICE_API,
                "KubernetesClusterNodePool",
                &format!("{}-{}", ctx.name, pool.name),
                for_provider.into(),
            )
            .management_policies(tree!(MANAGEMENT_POLICIES))
            // The agent pool's name in Azure is the pool's own (check::cluster holds it to AKS's 12 characters);
            // the MR's name, `<cluster>-<pool>`, would not fit.
            .external_name(&pool.name);
        if let Some(initial) = scaling {
            mr = mr.init_provider(initial);
        }
        out.compose(key, mr.build(), false);
    }
}
