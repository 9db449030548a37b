//! What Google Cloud would refuse only once the cluster or a pool is being created, and the XRD cannot state:
//! the cluster's name as GKE names clusters, each pool's zones against the region, and each class's
//! accelerator against its machine type where the machine family fixes the GPU. Checked before anything is
//! composed, each failure naming the field.

use crate::{
    api::{
        inference_class::GkeProvisioning,
        inference_cluster::{GkeCluster, InferenceClusterSpec, NodePool},
    },
    compose::{ComposeError, inference_cluster::check::PoolRefusal},
};

/// GKE cluster names are DNS labels of at most 40 characters that start with a letter; the rest is already
/// held by `check::cluster_name`.
pub fn cluster_name(name: &str) -> Result<(), ComposeError> {
    if name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Ok(());
    }
    Err(ComposeError::new(
        "metadata.name",
        format!("{name:?} must start with a letter to name a GKE cluster"),
    ))
}

pub fn cluster(cluster: &GkeCluster, spec: &InferenceClusterSpec) -> Result<(), ComposeError> {
    for (i, pool) in spec.node_pools.iter().enumerate() {
        for (j, zone) in pool.zones.iter().enumerate() {
            if !zone_in_region(zone, &cluster.region) {
                return Err(ComposeError::new(
                    format!("spec.nodePools[{i}].zones[{j}]"),
                    format!(
                        "{zone:?} is not a zone of region {}: GKE zones are the region and a letter ({}-a)",
                        cluster.region, cluster.region
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A zone of `region`: `us-central1-a` for `us-central1`.
pub fn zone_in_region(zone: &str, region: &str) -> bool {
    zone.strip_prefix(region)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|letter| letter.len() == 1 && letter.chars().all(|c| c.is_ascii_lowercase()))
}

/// The accelerator-optimized machine families, each of which comes with one GPU model attached (so the class
/// must name that one), and, for those whose machine type ends in `-<n>g`, that many GPUs. N1 machines take
/// attachable GPUs of several models and are not checked.
const FIXED_GPU_FAMILIES: &[(&str, &str)] = &[
    ("a2-highgpu-", "nvidia-tesla-a100"),
    ("a2-megagpu-", "nvidia-tesla-a100"),
    ("a2-ultragpu-", "nvidia-a100-80gb"),
    ("a3-highgpu-", "nvidia-h100-80gb"),
    ("a3-edgegpu-", "nvidia-h100-80gb"),
    ("a3-megagpu-", "nvidia-h100-mega-80gb"),
    ("a3-ultragpu-", "nvidia-h200-141gb"),
    ("a4-highgpu-", "nvidia-b200"),
    ("g2-standard-", "nvidia-l4"),
];

/// A pool's class on a fixed-GPU machine family must name the GPU model and count the machine comes with.
pub fn pool(_: &NodePool, gke: &GkeProvisioning) -> Result<(), PoolRefusal> {
    accelerator_fits(gke).map_err(|reason| PoolRefusal::new("className", reason))
}

fn accelerator_fits(gke: &GkeProvisioning) -> Result<(), String> {
    let machine = gke.machine_type.as_str();
    let Some((family, model)) = FIXED_GPU_FAMILIES.iter().find(|(f, _)| machine.starts_with(f)) else {
        return Ok(());
    };
    let accelerator = &gke.accelerator;
    if accelerator.type_ != *model {
        return Err(format!(
            "has provisioning.gke.accelerator.type {:?}, but {machine} machines come with {model}",
            accelerator.type_
        ));
    }
    let count = machine
        .strip_prefix(family)
        .and_then(|rest| rest.strip_suffix('g'))
        .and_then(|n| n.parse::<u32>().ok());
    match count {
        Some(count) if count != accelerator.count => Err(format!(
            "has provisioning.gke.accelerator.count {}, but {machine} comes with {count} GPUs",
            accelerator.count
        )),
        _ => Ok(()),
    }
}
