//! What EKS would refuse only after the network or the IAM roles exist, and the XRD cannot state (a CIDR's host
//! bits, zones against the region, EFA against the instance type): checked before anything is created.

use crate::{
    api::{
        inference_class::EksProvisioning,
        inference_cluster::{EksCluster, FabricType, InferenceClusterSpec, NodePool},
    },
    compose::{ComposeError, inference_class::efa_interfaces, inference_cluster::check::PoolRefusal},
};

pub fn cluster(cluster: &EksCluster, spec: &InferenceClusterSpec) -> Result<(), ComposeError> {
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

/// An EFA pool's class must be of an instance type with EFA interfaces.
pub fn pool(pool: &NodePool, eks: &EksProvisioning) -> Result<(), PoolRefusal> {
    if pool.fabric.type_ == FabricType::Efa && efa_interfaces(eks).is_none() {
        let reason = format!("is {}, which has no EFA interfaces", eks.instance_type);
        return Err(PoolRefusal::new("fabric.type", reason));
    }
    Ok(())
}
