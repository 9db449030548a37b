//! What the XRD's CEL rules already reject, checked again here (a composite can reach the function through
//! `render` or an older XRD), plus what needs the classes: every failure names the field.

use std::collections::{BTreeMap, BTreeSet};

use crate::{
    api::{
        inference_class::InferenceClassSpec,
        inference_cluster::{EksCluster, FabricType, InferenceClusterSpec, Source},
    },
    compose::{
        ComposeError,
        inference_class::{efa_interfaces, is_dns_label},
    },
};

/// Longest cluster name: node pool MRs are named `<cluster>-<pool>` (pools up to 20 characters) and must stay
/// within a 63-character DNS label, as must the EKS cluster name.
pub const MAX_CLUSTER_NAME: usize = 40;
/// Name of the node pool every EKS cluster gets for its controllers.
pub const SYSTEM_POOL: &str = "system";

pub fn cluster(name: &str, spec: &InferenceClusterSpec) -> Result<(), ComposeError> {
    if name.is_empty() || name.len() > MAX_CLUSTER_NAME || !is_dns_label(name) {
        return Err(ComposeError::new(
            "metadata.name",
            format!("{name:?} must be a DNS label of at most {MAX_CLUSTER_NAME} characters"),
        ));
    }
    let eks = spec.cluster.source == Source::Eks;
    match spec.cluster.source {
        Source::Eks => {
            let Some(cluster) = &spec.cluster.eks else {
                return Err(ComposeError::new(
                    "spec.cluster.eks",
                    "required when source is EKS",
                ));
            };
            eks_cluster(cluster, spec)?;
        }
        Source::Existing if spec.cluster.existing.is_none() => {
            return Err(ComposeError::new(
                "spec.cluster.existing",
                "required when source is Existing",
            ));
        }
        Source::Existing => {
            if let Some(existing) = &spec.cluster.existing
                && existing.secret_ref.name.is_empty()
            {
                return Err(ComposeError::new(
                    "spec.cluster.existing.secretRef.name",
                    "must name the Secret holding the cluster's kubeconfig",
                ));
            }
        }
    }
    let mut names = BTreeSet::new();
    for (i, pool) in spec.node_pools.iter().enumerate() {
        let at = |field: &str| format!("spec.nodePools[{i}].{field}");
        if !is_dns_label(&pool.name) || pool.name.len() > 20 {
            return Err(ComposeError::new(
                at("name"),
                "must be a DNS label of at most 20 characters",
            ));
        }
        if pool.name == SYSTEM_POOL {
            return Err(ComposeError::new(
                at("name"),
                "system is reserved for the cluster's own system pool",
            ));
        }
        if !names.insert(pool.name.as_str()) {
            return Err(ComposeError::new(
                at("name"),
                format!("duplicate node pool {:?}", pool.name),
            ));
        }
        if pool.min_node_count.is_some_and(|min| min > pool.node_count) {
            return Err(ComposeError::new(at("minNodeCount"), "must not exceed nodeCount"));
        }
        if pool.max_node_count.is_some_and(|max| max < pool.node_count) {
            return Err(ComposeError::new(
                at("maxNodeCount"),
                "must not be below nodeCount",
            ));
        }
        if pool.fabric.type_ == FabricType::Efa && !eks {
            return Err(ComposeError::new(
                at("fabric.type"),
                "EFA needs cluster.source EKS",
            ));
        }
        if pool.capacity_block.is_some() {
            if !eks {
                return Err(ComposeError::new(
                    at("capacityBlock"),
                    "capacity blocks need cluster.source EKS",
                ));
            }
            if pool.zones.len() != 1 {
                return Err(ComposeError::new(
                    at("zones"),
                    "a capacity block needs exactly one zone, the capacity reservation's",
                ));
            }
        }
    }
    Ok(())
}

/// What EKS would refuse only after the network or the IAM roles exist: checked before anything is created.
fn eks_cluster(cluster: &EksCluster, spec: &InferenceClusterSpec) -> Result<(), ComposeError> {
    if !is_region(&cluster.region) {
        return Err(ComposeError::new(
            "spec.cluster.eks.region",
            format!("{:?} is not an AWS region such as us-east-1", cluster.region),
        ));
    }
    for (field, arn) in [
        ("clusterRoleArn", &cluster.cluster_role_arn),
        ("nodeRoleArn", &cluster.node_role_arn),
    ] {
        if let Some(arn) = arn
            && !is_role_arn(arn)
        {
            return Err(ComposeError::new(
                format!("spec.cluster.eks.{field}"),
                format!("{arn:?} is not an IAM role ARN"),
            ));
        }
    }
    let networking = &cluster.networking;
    if !networking.subnet_ids.is_empty() && networking.vpc_cidr.is_some() {
        return Err(ComposeError::new(
            "spec.cluster.eks.networking",
            "set subnetIds or vpcCidr, not both",
        ));
    }
    for (i, subnet) in networking.subnet_ids.iter().enumerate() {
        let hex = subnet.strip_prefix("subnet-").unwrap_or_default();
        if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(ComposeError::new(
                format!("spec.cluster.eks.networking.subnetIds[{i}]"),
                format!("{subnet:?} is not a subnet ID such as subnet-0123abcd"),
            ));
        }
    }
    if let Some(cidr) = &networking.vpc_cidr
        && let Err(reason) = vpc_cidr(cidr)
    {
        return Err(ComposeError::new(
            "spec.cluster.eks.networking.vpcCidr",
            format!("{cidr:?} {reason}"),
        ));
    }
    if !networking.endpoint_public_access && !networking.endpoint_private_access {
        return Err(ComposeError::new(
            "spec.cluster.eks.networking",
            "endpointPublicAccess and endpointPrivateAccess cannot both be false: nothing could reach the API",
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

/// `us-east-1`, `ap-southeast-2`, `us-gov-west-1`.
fn is_region(region: &str) -> bool {
    let mut parts = region.split('-').peekable();
    let mut words = 0;
    let mut last = "";
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            last = part;
        } else if part.is_empty() || !part.chars().all(|c| c.is_ascii_lowercase()) {
            return false;
        } else {
            words += 1;
        }
    }
    words >= 2 && !last.is_empty() && last.chars().all(|c| c.is_ascii_digit())
}

fn is_role_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    matches!(parts.as_slice(), ["arn", partition, "iam", "", account, resource]
        if partition.starts_with("aws")
            && account.len() == 12
            && account.chars().all(|c| c.is_ascii_digit())
            && resource.strip_prefix("role/").is_some_and(|r| !r.is_empty()))
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
