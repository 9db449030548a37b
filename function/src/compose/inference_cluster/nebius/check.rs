//! What Nebius would refuse only after the network or the cluster exists, and the XRD cannot state: zones (a
//! project is in one region and mk8s places node groups itself), the Kubernetes version's form, a class's
//! preset against its accelerator, and InfiniBand pools against their platform. Checked before anything is
//! created.

use modelplane_eks_api::names::is_dns_label;

use crate::{
    api::{
        inference_class::NebiusProvisioning,
        inference_cluster::{FabricType, InferenceClusterSpec, NebiusCluster, NodePool},
    },
    compose::{ComposeError, inference_cluster::check::PoolRefusal},
};

/// Nebius GPU clusters (InfiniBand) take whole 8-GPU hosts of the SXM platforms.
const INFINIBAND_GPUS: u32 = 8;

pub fn cluster(cluster: &NebiusCluster, spec: &InferenceClusterSpec) -> Result<(), ComposeError> {
    if !minor_version(&cluster.kubernetes_version) {
        return Err(ComposeError::new(
            "spec.cluster.nebius.kubernetesVersion",
            format!(
                "{:?} is not a version mk8s takes: <major>.<minor>, such as 1.34",
                cluster.kubernetes_version
            ),
        ));
    }
    for (i, pool) in spec.node_pools.iter().enumerate() {
        if !pool.zones.is_empty() {
            return Err(ComposeError::new(
                format!("spec.nodePools[{i}].zones"),
                "a Nebius project is in one region and mk8s places node groups itself; remove zones",
            ));
        }
        if pool.fabric.type_ != FabricType::InfiniBand {
            continue;
        }
        let field = format!("spec.nodePools[{i}].fabric.infiniband.fabric");
        match &pool.fabric.infiniband {
            None => {
                return Err(ComposeError::new(
                    field,
                    "is required for an InfiniBand pool: the physical fabric its GPU cluster joins (e.g. fabric-2)",
                ));
            }
            Some(ib) if !is_dns_label(&ib.fabric) => {
                return Err(ComposeError::new(
                    field,
                    format!(
                        "{:?} is not a Nebius fabric name (lowercase letters, digits and '-')",
                        ib.fabric
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// `<major>.<minor>`, both numbers.
fn minor_version(version: &str) -> bool {
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    version
        .split_once('.')
        .is_some_and(|(major, minor)| number(major) && number(minor))
}

/// Each pool's class against what Nebius's platform and preset names say of the hardware.
pub fn pool(pool: &NodePool, nebius: &NebiusProvisioning) -> Result<(), PoolRefusal> {
    hardware(nebius).map_err(|reason| PoolRefusal::new("className", reason))?;
    if pool.fabric.type_ == FabricType::InfiniBand
        && (gpus(&nebius.preset) != Some(INFINIBAND_GPUS) || !nebius.platform.contains("sxm"))
    {
        let reason = format!(
            "is {} {}; InfiniBand GPU clusters take the {INFINIBAND_GPUS}-GPU presets of the SXM platforms",
            nebius.platform, nebius.preset
        );
        return Err(PoolRefusal::new("fabric.type", reason));
    }
    Ok(())
}

/// A GPU platform (`gpu-<model>-...`) whose model is the class's accelerator, with a preset of as many GPUs as
/// the accelerator counts (`<n>gpu-<m>vcpu-<k>gb`).
fn hardware(nebius: &NebiusProvisioning) -> Result<(), String> {
    let accelerator = &nebius.accelerator;
    let Some(model) = nebius
        .platform
        .strip_prefix("gpu-")
        .and_then(|rest| rest.split('-').next())
        .filter(|m| !m.is_empty())
    else {
        return Err(format!(
            "has provisioning.nebius.platform {}, which carries no GPU; its accelerator is {}",
            nebius.platform, accelerator.type_
        ));
    };
    if !accelerator.type_.to_ascii_lowercase().contains(model) {
        return Err(format!(
            "has provisioning.nebius.accelerator.type {}, but platform {} carries {model} GPUs",
            accelerator.type_, nebius.platform
        ));
    }
    match gpus(&nebius.preset) {
        Some(n) if n == accelerator.count => Ok(()),
        Some(n) => Err(format!(
            "has provisioning.nebius.accelerator.count {}, but preset {} has {n} GPUs",
            accelerator.count, nebius.preset
        )),
        None => Err(format!(
            "has provisioning.nebius.preset {}, which is not a GPU preset (<n>gpu-<m>vcpu-<k>gb)",
            nebius.preset
        )),
    }
}

/// The GPU count a preset's name leads with.
fn gpus(preset: &str) -> Option<u32> {
    preset.split_once("gpu-")?.0.parse().ok()
}
