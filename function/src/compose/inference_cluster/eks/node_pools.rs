//! The node groups: a system pool for the controllers and one pool per `spec.nodePools` entry, hardware from
//! its InferenceClass and placement from the pool.

use std::collections::BTreeMap;

use modelplane_eks_api as eks_api;

use super::{Context, composed, infra, node_pool_key};
use crate::{
    api::{
        inference_class::InferenceClassSpec,
        inference_cluster::{
            FabricType, GPU_TAINT_KEY, InferenceClusterSpec, NodePool, POOL_LABEL, TaintEffect,
        },
    },
    compose::{ComposeError, Output, inference_class::efa_interfaces, inference_cluster::check::SYSTEM_POOL},
};

pub const SYSTEM: &str = SYSTEM_POOL;

/// The system pool runs the controllers (gateway, schedulers, autoscaler) off the GPU nodes: general-purpose
/// instances on the standard AMI, two for availability, growing to three under load.
const SYSTEM_INSTANCE_TYPE: &str = "m6i.xlarge";
const SYSTEM_AMI_TYPE: &str = "AL2023_x86_64_STANDARD";
const SYSTEM_SCALING: eks_api::Scaling = eks_api::Scaling {
    min_size: 2,
    max_size: 3,
    desired_size: 2,
};
/// AMI for GPU nodes whose class does not say: ships the NVIDIA driver the DRA driver uses.
const GPU_AMI_TYPE: &str = "AL2023_x86_64_NVIDIA";

pub fn compose(
    out: &mut Output,
    ctx: &Context,
    spec: &InferenceClusterSpec,
    classes: &BTreeMap<String, InferenceClassSpec>,
    node_role: &str,
    network: &infra::Network,
) -> Result<(), ComposeError> {
    let base = eks_api::NodePoolParameters {
        region: ctx.region(),
        cluster_ref: eks_api::LocalReference {
            name: ctx.name.into(),
        },
        node_role_arn: node_role.to_owned(),
        tags: ctx.tags.clone(),
        ..Default::default()
    };
    let system = eks_api::NodePoolParameters {
        instance_types: vec![SYSTEM_INSTANCE_TYPE.into()],
        ami_type: Some(SYSTEM_AMI_TYPE.into()),
        scaling: SYSTEM_SCALING,
        labels: BTreeMap::from([(POOL_LABEL.to_owned(), SYSTEM.to_owned())]),
        ..base.clone()
    };
    compose_pool(out, ctx, SYSTEM, system, network)?;

    for pool in &spec.node_pools {
        let Some(class) = classes
            .get(&pool.class_name)
            .and_then(|c| c.provisioning.eks.as_ref())
        else {
            continue; // check::pools_against_classes has already refused this.
        };
        let params = eks_api::NodePoolParameters {
            instance_types: vec![class.instance_type.clone()],
            ami_type: Some(class.ami_type.clone().unwrap_or_else(|| GPU_AMI_TYPE.into())),
            disk_size: Some(class.disk_size_gb),
            scaling: scaling(pool),
            labels: BTreeMap::from([(POOL_LABEL.to_owned(), pool.name.clone())]),
            taints: gpu_taints(spec),
            zones: pool.zones.clone(),
            capacity_type: if pool.capacity_block.is_some() {
                eks_api::CapacityType::CapacityBlock
            } else {
                eks_api::CapacityType::OnDemand
            },
            capacity_reservation_id: pool
                .capacity_block
                .as_ref()
                .map(|b| b.capacity_reservation_id.clone()),
            efa_interfaces: match pool.fabric.type_ {
                FabricType::Efa => efa_interfaces(class).unwrap_or(0),
                FabricType::None | FabricType::InfiniBand => 0,
            },
            ..base.clone()
        };
        compose_pool(out, ctx, &pool.name, params, network)?;
    }
    Ok(())
}

fn compose_pool(
    out: &mut Output,
    ctx: &Context,
    pool: &str,
    mut params: eks_api::NodePoolParameters,
    network: &infra::Network,
) -> Result<(), ComposeError> {
    let key = node_pool_key(pool);
    params.tags.extend(autoscaler_tags(ctx.name, &params.scaling));
    params.security_group_ids = infra::fixed_groups(ctx, &key, "/spec/forProvider/securityGroupIds", network);
    let mut mr = eks_api::NodePool::new(
        &format!("{}-{pool}", ctx.name),
        eks_api::NodePoolSpec {
            for_provider: params,
            ..Default::default()
        },
    );
    mr.spec.resource.provider_config_ref = ctx.provider_config_ref();
    out.compose(key, composed(&mr)?, false);
    Ok(())
}

/// The node group's autoscaling range: `minNodeCount`..`maxNodeCount` around `nodeCount`, which the cluster
/// autoscaler moves within. Without a range a pool stays at its node count.
fn scaling(pool: &NodePool) -> eks_api::Scaling {
    eks_api::Scaling {
        min_size: pool.min_node_count.unwrap_or(pool.node_count),
        max_size: pool.max_node_count.unwrap_or(pool.node_count),
        desired_size: pool.node_count,
    }
}

/// The tags the cluster autoscaler's auto-discovery (`autoDiscovery.clusterName`) looks for, on every pool
/// whose range lets it grow or shrink; a pool of fixed size is left out of its reach.
fn autoscaler_tags(cluster: &str, scaling: &eks_api::Scaling) -> BTreeMap<String, String> {
    if scaling.max_size <= scaling.min_size {
        return BTreeMap::new();
    }
    BTreeMap::from([
        ("k8s.io/cluster-autoscaler/enabled".to_owned(), "true".to_owned()),
        (format!("k8s.io/cluster-autoscaler/{cluster}"), "owned".to_owned()),
    ])
}

/// The GPU taint keeps everything but GPU workloads off GPU nodes; the cluster's own taints apply to every
/// GPU node too, so only deployments that tolerate them land here.
fn gpu_taints(spec: &InferenceClusterSpec) -> Vec<eks_api::Taint> {
    let gpu = eks_api::Taint {
        key: GPU_TAINT_KEY.into(),
        value: "true".into(),
        effect: eks_api::TaintEffect::NoSchedule,
    };
    let mut taints = vec![gpu];
    taints.extend(spec.taints.iter().map(|t| eks_api::Taint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: match t.effect {
            TaintEffect::NoSchedule => eks_api::TaintEffect::NoSchedule,
            TaintEffect::PreferNoSchedule => eks_api::TaintEffect::PreferNoSchedule,
            TaintEffect::NoExecute => eks_api::TaintEffect::NoExecute,
        },
    }));
    taints
}
