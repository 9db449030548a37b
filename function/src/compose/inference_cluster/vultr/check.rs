//! What VKE would refuse only after the VPC or the cluster exists, and the XRD cannot state (VKE's version
//! format, pools without zones, at least one node per pool, GPU plans; the XRD itself refuses EFA and
//! InfiniBand fabrics off their clouds): checked before anything is
//! created, so bad input never composes half a cluster.

use crate::{
    api::{
        inference_class::VultrProvisioning,
        inference_cluster::{InferenceClusterSpec, NodePool, VultrCluster},
    },
    compose::{ComposeError, inference_cluster::check::PoolRefusal},
};

/// Vultr's GPU plans (`vcg-l40s-16c-180g-48vram`, `vcg-a100-1c-6g-4vram`) all start so; VKE pools take no
/// other kind of GPU machine.
pub const GPU_PLAN_PREFIX: &str = "vcg-";

pub fn cluster(cluster: &VultrCluster) -> Result<(), ComposeError> {
    if !vke_version(&cluster.kubernetes_version) {
        return Err(ComposeError::new(
            "spec.cluster.vultr.kubernetesVersion",
            format!(
                "{:?} is not a VKE version: VKE takes the exact version with its build suffix, such as \
                 v1.36.1+3 (list them with vultr-cli kubernetes versions)",
                cluster.kubernetes_version
            ),
        ));
    }
    Ok(())
}

/// `v<major>.<minor>.<patch>+<build>`, the only form VKE accepts.
pub fn vke_version(version: &str) -> bool {
    let Some((release, build)) = version.strip_prefix('v').and_then(|v| v.split_once('+')) else {
        return false;
    };
    let numeric = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let parts: Vec<&str> = release.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| numeric(p)) && numeric(build)
}

/// What a VKE pool cannot be: placed in zones, or empty.
pub fn pools(spec: &InferenceClusterSpec) -> Result<(), ComposeError> {
    for (i, pool) in spec.node_pools.iter().enumerate() {
        if !pool.zones.is_empty() {
            return Err(ComposeError::new(
                format!("spec.nodePools[{i}].zones"),
                "Vultr node pools have no zones: VKE places a pool's nodes in the cluster's region \
                 (spec.cluster.vultr.region); remove zones",
            ));
        }
        // VKE pools always run at least one node, autoscaled or not.
        if pool.node_count == 0 {
            return Err(ComposeError::new(
                format!("spec.nodePools[{i}].nodeCount"),
                "VKE node pools run at least one node; set nodeCount to 1 or more",
            ));
        }
        if pool.min_node_count == Some(0) {
            return Err(ComposeError::new(
                format!("spec.nodePools[{i}].minNodeCount"),
                "VKE's autoscaler keeps at least one node in a pool; set minNodeCount to 1 or more",
            ));
        }
    }
    Ok(())
}

/// Each pool's class must be a GPU plan carrying the accelerator the class names, where the plan's name says
/// which GPU it carries.
pub fn pool(_: &NodePool, vultr: &VultrProvisioning) -> Result<(), PoolRefusal> {
    plan_fits(vultr).map_err(|reason| PoolRefusal::new("className", reason))
}

/// Whether the class's plan is a GPU plan of the GPU model its accelerator names (`nvidia-l40s` on
/// `vcg-l40s-...`); why not otherwise.
pub fn plan_fits(class: &VultrProvisioning) -> Result<(), String> {
    let plan = class.plan.as_str();
    let Some(rest) = plan.strip_prefix(GPU_PLAN_PREFIX) else {
        return Err(format!(
            "has plan {plan:?}, which is not a GPU plan; a GPU class needs a {GPU_PLAN_PREFIX}* plan"
        ));
    };
    let plan_gpu = rest.split('-').next().unwrap_or_default();
    // The accelerator type is `<vendor>-<model>[-<variant>]`; its model is what the plan's name carries.
    let accelerator = class.accelerator.type_.to_ascii_lowercase();
    let model = accelerator
        .split_once('-')
        .map_or(accelerator.as_str(), |(_, model)| model);
    let model_gpu = model.split('-').next().unwrap_or_default();
    if !plan_gpu.is_empty() && !model_gpu.is_empty() && plan_gpu != model_gpu {
        return Err(format!(
            "has plan {plan:?}, which carries {plan_gpu} GPUs, not the {} its accelerator names",
            class.accelerator.type_
        ));
    }
    Ok(())
}
