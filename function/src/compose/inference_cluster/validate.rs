//! What the XRD's CEL rules already reject, checked again here (a composite can reach the function through
//! `render` or an older XRD), plus what needs the classes: every failure names the field.

use std::collections::{BTreeMap, BTreeSet};

use crate::{
    api::{
        inference_class::InferenceClassSpec,
        inference_cluster::{FabricType, InferenceClusterSpec, Source},
    },
    compose::{ComposeError, inference_class::is_dns_label},
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
            if cluster.cluster_role_arn.as_deref().unwrap_or_default().is_empty() {
                return Err(ComposeError::new(
                    "spec.cluster.eks.clusterRoleArn",
                    "EKS needs the IAM role its control plane assumes",
                ));
            }
            if cluster.node_role_arn.as_deref().unwrap_or_default().is_empty() {
                return Err(ComposeError::new(
                    "spec.cluster.eks.nodeRoleArn",
                    "EKS needs the IAM role its nodes assume",
                ));
            }
        }
        Source::Existing if spec.cluster.existing.is_none() => {
            return Err(ComposeError::new(
                "spec.cluster.existing",
                "required when source is Existing",
            ));
        }
        Source::Existing => {}
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
        if pool.fabric.type_ == FabricType::Efa && eks.efa_interfaces == 0 {
            return Err(ComposeError::new(
                format!("spec.nodePools[{i}].fabric.type"),
                format!(
                    "InferenceClass {:?} ({}) has no EFA interfaces",
                    pool.class_name, eks.instance_type
                ),
            ));
        }
    }
    Ok(())
}
