//! What AKS would refuse only after the resource group, network or cluster exist, and the cloud-neutral XRD
//! cannot state (agent pool names, Azure's zone numbers, a version's shape, InfiniBand and GPUs against the VM
//! size): checked before anything is created, so bad input never composes half a cluster.

use crate::{
    api::{
        inference_class::AksProvisioning,
        inference_cluster::{AksCluster, FabricType, InferenceClusterSpec, NodePool},
    },
    compose::{ComposeError, inference_cluster::check::PoolRefusal},
};

/// AKS names a Linux agent pool with at most 12 lowercase letters and digits, starting with a letter.
const MAX_POOL_NAME: usize = 12;
/// The availability zones AKS places a pool in, by number; every zonal Azure region has exactly these.
const ZONES: &[&str] = &["1", "2", "3"];

pub fn cluster(cluster: &AksCluster, spec: &InferenceClusterSpec) -> Result<(), ComposeError> {
    if !is_version(&cluster.kubernetes_version) {
        return Err(ComposeError::new(
            "spec.cluster.aks.kubernetesVersion",
            format!(
                "{:?} is not an AKS version; write a minor such as 1.34 (or a patch such as 1.34.1)",
                cluster.kubernetes_version
            ),
        ));
    }
    for (i, pool) in spec.node_pools.iter().enumerate() {
        if !is_agent_pool_name(&pool.name) {
            return Err(ComposeError::new(
                format!("spec.nodePools[{i}].name"),
                format!(
                    "{:?} cannot name an AKS agent pool: use at most {MAX_POOL_NAME} lowercase letters and \
                     digits, starting with a letter (e.g. gpuh100)",
                    pool.name
                ),
            ));
        }
        for (j, zone) in pool.zones.iter().enumerate() {
            if !ZONES.contains(&zone.as_str()) {
                return Err(ComposeError::new(
                    format!("spec.nodePools[{i}].zones[{j}]"),
                    format!(
                        "{zone:?} is not an availability zone of location {}: AKS takes Azure's zone \
                         numbers, 1, 2 or 3",
                        cluster.location
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `1.34` or `1.34.1`.
fn is_version(version: &str) -> bool {
    let parts: Vec<&str> = version.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

fn is_agent_pool_name(name: &str) -> bool {
    name.len() <= MAX_POOL_NAME
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// Each pool's class against its VM size: a GPU only an N-series size carries, the GPU model where the size
/// names one, InfiniBand only on an RDMA-capable ND size.
pub fn pool(pool: &NodePool, aks: &AksProvisioning) -> Result<(), PoolRefusal> {
    let size = VmSize::parse(&aks.vm_size);
    if let Some(reason) = accelerator_mismatch(aks, size.as_ref()) {
        return Err(PoolRefusal::new("className", reason));
    }
    if pool.fabric.type_ == FabricType::InfiniBand && !size.as_ref().is_some_and(VmSize::infiniband) {
        let reason = format!(
            "has vmSize {}, which has no InfiniBand; use an RDMA-capable ND-series size such as \
             Standard_ND96isr_H100_v5, or fabric None",
            aks.vm_size
        );
        return Err(PoolRefusal::new("fabric.type", reason));
    }
    Ok(())
}

/// Why the class's accelerator cannot be on its VM size, where the size's name says so.
fn accelerator_mismatch(aks: &AksProvisioning, size: Option<&VmSize>) -> Option<String> {
    let Some(size) = size.filter(|s| s.family.starts_with('N')) else {
        return Some(format!(
            "has vmSize {}, which is not an N-series (GPU) size, so it carries no {}",
            aks.vm_size, aks.accelerator.type_
        ));
    };
    let model = size.gpu.as_deref()?;
    let wanted = aks.accelerator.type_.to_ascii_lowercase();
    if wanted.contains(&model.to_ascii_lowercase()) {
        return None;
    }
    Some(format!(
        "has vmSize {}, which carries {model} GPUs, not {}; fix provisioning.aks.accelerator.type or the vmSize",
        aks.vm_size, aks.accelerator.type_
    ))
}

/// An Azure VM size by its parts: `Standard_ND96isr_H100_v5` is family `ND`, features `isr`, GPU `H100`.
#[derive(Debug, PartialEq, Eq)]
struct VmSize {
    family: String,
    features: String,
    gpu: Option<String>,
}

impl VmSize {
    fn parse(size: &str) -> Option<Self> {
        let mut parts = size.strip_prefix("Standard_")?.split('_');
        let base = parts.next()?;
        let digits = base.find(|c: char| c.is_ascii_digit())?;
        let (family, rest) = base.split_at(digits);
        let features = rest.trim_start_matches(|c: char| c.is_ascii_digit());
        let rest: Vec<&str> = parts.collect();
        // The last part is the version (`v5`); a part before it, if any, names the GPU.
        let gpu = match rest.as_slice() {
            [gpu, version] if version.starts_with('v') => Some((*gpu).to_owned()),
            _ => None,
        };
        Some(Self {
            family: family.to_owned(),
            features: features.to_owned(),
            gpu,
        })
    }

    /// Azure marks an RDMA (InfiniBand) capable size with `r` among its features; on ND it is the GPU fabric.
    fn infiniband(&self) -> bool {
        self.family == "ND" && self.features.contains('r')
    }
}

#[cfg(test)]
mod sizes {
    use super::*;

    #[test]
    fn vm_sizes_are_read_by_family_features_and_gpu() {
        assert_eq!(
            VmSize::parse("Standard_ND96isr_H100_v5"),
            Some(VmSize {
                family: "ND".into(),
                features: "isr".into(),
                gpu: Some("H100".into())
            })
        );
        let a100 = VmSize::parse("Standard_NC24ads_A100_v4").unwrap();
        assert_eq!((a100.family.as_str(), a100.gpu.as_deref()), ("NC", Some("A100")));
        assert!(!a100.infiniband());
        assert!(VmSize::parse("Standard_ND96asr_v4").unwrap().infiniband());
        assert_eq!(VmSize::parse("Standard_ND96asr_v4").unwrap().gpu, None);
        assert_eq!(VmSize::parse("Basic_A1"), None);
        assert!(is_version("1.34") && is_version("1.34.2"));
        assert!(!is_version("1") && !is_version("v1.34") && !is_version("1..3"));
    }
}
