//! What the InferenceCluster XRD cannot say (it is enforced before composing, `crate::validate`): the name as a
//! cloud resource name, a CIDR's host bits, zones against the region, and each pool against its class. Every
//! failure names the field.

use std::collections::BTreeMap;

use modelplane_eks_api::names::is_dns_label;

use crate::{
    api::{
        inference_class::InferenceClassSpec,
        inference_cluster::{EksCluster, FabricType, InferenceClusterSpec, Source},
    },
    compose::{ComposeError, inference_class::efa_interfaces},
};

/// Longest cluster name: node pool MRs are named `<cluster>-<pool>` (pools up to 20 characters) and must stay
/// within a 63-character DNS label, as must the EKS cluster name.
pub const MAX_CLUSTER_NAME: usize = 40;
/// Name of the node pool every EKS cluster gets for its controllers.
pub const SYSTEM_POOL: &str = "system";

pub fn cluster(name: &str, spec: &InferenceClusterSpec) -> Result<(), ComposeError> {
    // The API server admits any DNS subdomain as a name; this one also names AWS objects and node pool MRs.
    if name.len() > MAX_CLUSTER_NAME || !is_dns_label(name) {
        return Err(ComposeError::new(
            "metadata.name",
            format!("{name:?} must be a DNS label of at most {MAX_CLUSTER_NAME} characters"),
        ));
    }
    match (&spec.cluster.source, &spec.cluster.eks) {
        (Source::Eks, Some(cluster)) => eks_cluster(cluster, spec),
        _ => Ok(()),
    }
}

/// What EKS would refuse only after the network or the IAM roles exist, and the XRD cannot state (a CIDR's host
/// bits, zones against the region): checked before anything is created.
fn eks_cluster(cluster: &EksCluster, spec: &InferenceClusterSpec) -> Result<(), ComposeError> {
    if let Some(cidr) = &cluster.networking.vpc_cidr
        && let Err(reason) = vpc_cidr(cidr)
    {
        return Err(ComposeError::new(
            "spec.cluster.eks.networking.vpcCidr",
            format!("{cidr:?} {reason}"),
        ));
    }
    for (i, pool) in spec.node_pools.iter().enumerate() {
        for (j, zone) in pool.zones.iter().enumerate() {
            if !zone_in_region(zone, &cluster.region) {
                return Err(ComposeError::new(
                    format!("spec.nodePools[{i}].zones[{j}]"),
                    format!("{zone:?} is not a zone of region {}", cluster.region),
                ));
            }
        }
    }
    Ok(())
}

/// A zone of `region` by name: the region plus one letter (`us-east-1a`), or a Local Zone
/// (`us-west-2-lax-1a`).
pub fn zone_in_region(zone: &str, region: &str) -> bool {
    match zone.strip_prefix(region) {
        Some(rest) if rest.len() == 1 => rest.chars().all(|c| c.is_ascii_lowercase()),
        Some(rest) => rest.starts_with('-') && rest.len() > 1,
        None => false,
    }
}

/// A VPC CIDR AWS accepts: IPv4, prefix /16 to /28, no host bits set.
pub fn vpc_cidr(cidr: &str) -> Result<(std::net::Ipv4Addr, u8), &'static str> {
    let (addr, prefix) = cidr.split_once('/').ok_or("is not a CIDR such as 10.0.0.0/16")?;
    let addr: std::net::Ipv4Addr = addr.parse().map_err(|_| "is not a CIDR such as 10.0.0.0/16")?;
    let prefix: u8 = prefix.parse().map_err(|_| "is not a CIDR such as 10.0.0.0/16")?;
    if !(16..=28).contains(&prefix) {
        return Err("must have a prefix between /16 and /28, as AWS requires of a VPC");
    }
    let host_mask = u32::MAX >> prefix;
    if u32::from(addr) & host_mask != 0 {
        return Err("has host bits set; the network address is what a VPC takes");
    }
    Ok((addr, prefix))
}

/// Checks each pool against the class it names.
pub fn pools_against_classes(
    spec: &InferenceClusterSpec,
    classes: &BTreeMap<String, InferenceClassSpec>,
) -> Result<(), ComposeError> {
    if spec.cluster.source != Source::Eks {
        return Ok(());
    }
    for (i, pool) in spec.node_pools.iter().enumerate() {
        let eks = classes
            .get(&pool.class_name)
            .and_then(|c| c.provisioning.eks.as_ref());
        let Some(eks) = eks else {
            return Err(ComposeError::new(
                format!("spec.nodePools[{i}].className"),
                format!(
                    "InferenceClass {:?} has no provisioning.eks for an EKS pool",
                    pool.class_name
                ),
            ));
        };
        if pool.fabric.type_ == FabricType::Efa && efa_interfaces(eks).is_none() {
            return Err(ComposeError::new(
                format!("spec.nodePools[{i}].fabric.type"),
                format!(
                    "InferenceClass {:?} is {}, which has no EFA interfaces",
                    pool.class_name, eks.instance_type
                ),
            ));
        }
    }
    Ok(())
}
