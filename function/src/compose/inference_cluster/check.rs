//! What the InferenceCluster XRD cannot say (it is enforced before composing, `crate::validate`) and holds on
//! every cloud: the name as a cloud resource name, and each pool's class against the cluster's cloud. What
//! only one cloud checks is that cloud's `Provisioner::check`. Every failure names the field.

use modelplane_eks_api::names::is_dns_label;

use super::provision::{ClusterInput, Provisioner};
use crate::{
    api::{
        inference_class::{Provider, Provisioning},
        inference_cluster::NodePool,
    },
    compose::ComposeError,
};

/// Longest cluster name: node pool MRs are named `<cluster>-<pool>` (pools up to 20 characters) and must stay
/// within a 63-character DNS label, as must the cloud's cluster name.
pub const MAX_CLUSTER_NAME: usize = 40;
/// Name of the node pool every provisioned cluster gets for its controllers.
pub const SYSTEM_POOL: &str = "system";

pub fn cluster_name(name: &str) -> Result<(), ComposeError> {
    // The API server admits any DNS subdomain as a name; this one also names cloud objects and node pool MRs.
    if name.len() > MAX_CLUSTER_NAME || !is_dns_label(name) {
        return Err(ComposeError::new(
            "metadata.name",
            format!("{name:?} must be a DNS label of at most {MAX_CLUSTER_NAME} characters"),
        ));
    }
    Ok(())
}

/// Each pool of a provisioned cluster names a class of its cloud, with that cloud's provisioning block; then
/// the cloud's own checks.
pub fn pools_against_classes(input: &ClusterInput, cloud: &dyn Provisioner) -> Result<(), ComposeError> {
    let Some(provider) = cloud.provider() else {
        return Ok(());
    };
    for (i, pool) in input.spec.node_pools.iter().enumerate() {
        let Some(class) = input.classes.get(&pool.class_name) else {
            continue; // Every class is fetched before this runs; a missing one was refused by name.
        };
        let provisioning = &class.provisioning;
        let (field, has_block) = match provider {
            Provider::Eks => ("eks", provisioning.eks.is_some()),
            Provider::Gke => ("gke", provisioning.gke.is_some()),
            Provider::Aks => ("aks", provisioning.aks.is_some()),
            Provider::Nebius => ("nebius", provisioning.nebius.is_some()),
            Provider::Vultr => ("vultr", provisioning.vultr.is_some()),
        };
        let other_cloud = provisioning.provider.is_some_and(|p| p != provider);
        if other_cloud || !has_block {
            return Err(ComposeError::new(
                format!("spec.nodePools[{i}].className"),
                format!(
                    "InferenceClass {:?} has no provisioning.{field} for {} {} pool",
                    pool.class_name,
                    if matches!(provider, Provider::Eks | Provider::Aks) {
                        "an"
                    } else {
                        "a"
                    },
                    provider.as_str()
                ),
            ));
        }
    }
    cloud.check(input)
}

/// Why a pool cannot be of its class on a cloud: the field under `spec.nodePools[i]` to fix, and the reason, which
/// reads on from the class's name (`InferenceClass "h100" <reason>`).
pub struct PoolRefusal {
    pub field: &'static str,
    pub reason: String,
}

impl PoolRefusal {
    pub fn new(field: &'static str, reason: String) -> Self {
        Self { field, reason }
    }
}

/// A cloud's check of each pool against its class's provisioning `block` for that cloud (the class and block are
/// there: [`pools_against_classes`] refused the pool by name otherwise); the first refusal is the error.
pub fn each_pool_class<P>(
    input: &ClusterInput,
    block: fn(&Provisioning) -> Option<&P>,
    check: impl Fn(&NodePool, &P) -> Result<(), PoolRefusal>,
) -> Result<(), ComposeError> {
    for (i, pool) in input.spec.node_pools.iter().enumerate() {
        let Some(provisioning) = input
            .classes
            .get(&pool.class_name)
            .and_then(|c| block(&c.provisioning))
        else {
            continue;
        };
        if let Err(PoolRefusal { field, reason }) = check(pool, provisioning) {
            return Err(ComposeError::new(
                format!("spec.nodePools[{i}].{field}"),
                format!("InferenceClass {:?} {reason}", pool.class_name),
            ));
        }
    }
    Ok(())
}
