//! The EKS half of a cluster: provider-eks's `Cluster` and `NodePool`s, built from the
//! typed specs provider-eks itself reconciles (so the two cannot drift), and the activation policy that starts
//! provider-eks's controllers only once some InferenceCluster is on EKS.

use std::collections::BTreeMap;

use kube::CustomResourceExt;
use modelplane_eks_api as eks_api;
use serde::Serialize;
use serde_json::{Value, json};

use super::{CONTROL_NAMESPACE, validate::SYSTEM_POOL};
use crate::{
    api::{
        inference_class::InferenceClassSpec,
        inference_cluster::{
            EksCluster, FabricType, GPU_TAINT_KEY, InferenceClusterSpec, NodePool, POOL_LABEL, TaintEffect,
        },
    },
    compose::{ComposeError, Output, inference_class::efa_interfaces},
    stack::components::EKS_KUBERNETES_VERSION,
};

pub const KEY_CLUSTER: &str = "eks-cluster";
pub const KEY_ACTIVATION_POLICY: &str = "activation-policy";

/// Where provider-eks writes the cluster's kubeconfig, in [`CONTROL_NAMESPACE`].
pub fn kubeconfig_secret(cluster: &str) -> String {
    format!("{cluster}-kubeconfig")
}

/// The key provider-eks writes the kubeconfig under in its connection secret.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

pub fn node_pool_key(pool: &str) -> String {
    format!("eks-nodepool-{pool}")
}

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
/// VPC provider-eks creates when the spec names no subnets.
const DEFAULT_VPC_CIDR: &str = "10.0.0.0/16";

pub fn compose(
    out: &mut Output,
    name: &str,
    cluster: &EksCluster,
    spec: &InferenceClusterSpec,
    classes: &BTreeMap<String, InferenceClassSpec>,
) -> Result<(), ComposeError> {
    let tags = BTreeMap::from([("modelplane.ai/cluster".to_owned(), name.to_owned())]);

    let zones = all_zones(spec);
    let networking = if cluster.networking.subnet_ids.is_empty() {
        eks_api::Networking {
            subnet_ids: Vec::new(),
            vpc: Some(eks_api::VpcNetwork {
                cidr_block: cluster
                    .networking
                    .vpc_cidr
                    .clone()
                    .unwrap_or_else(|| DEFAULT_VPC_CIDR.into()),
                zones,
            }),
        }
    } else {
        eks_api::Networking {
            subnet_ids: cluster.networking.subnet_ids.clone(),
            vpc: None,
        }
    };
    let mr = eks_api::Cluster::new(
        name,
        eks_api::ClusterSpec {
            for_provider: eks_api::ClusterParameters {
                region: cluster.region.clone(),
                version: EKS_KUBERNETES_VERSION.into(),
                role_arn: cluster.cluster_role_arn.clone().unwrap_or_default(),
                networking,
                endpoint_public_access: cluster.networking.endpoint_public_access,
                endpoint_private_access: cluster.networking.endpoint_private_access,
                tags: tags.clone(),
            },
            provider_config_ref: provider_config_ref(cluster),
            management_policies: vec![eks_api::ManagementPolicy::All],
            write_connection_secret_to_ref: Some(eks_api::SecretReference {
                name: kubeconfig_secret(name),
            }),
        },
    );
    out.compose(KEY_CLUSTER, to_value(&mr, Some(CONTROL_NAMESPACE))?, false);

    let node_role = cluster.node_role_arn.clone().unwrap_or_default();
    let system = eks_api::NodePoolParameters {
        region: cluster.region.clone(),
        cluster_ref: eks_api::LocalReference { name: name.into() },
        node_role_arn: node_role.clone(),
        instance_types: vec![SYSTEM_INSTANCE_TYPE.into()],
        ami_type: Some(SYSTEM_AMI_TYPE.into()),
        disk_size: None,
        scaling: SYSTEM_SCALING,
        labels: BTreeMap::from([(POOL_LABEL.to_owned(), SYSTEM_POOL.to_owned())]),
        tags: tags.clone(),
        ..Default::default()
    };
    compose_node_pool(out, name, cluster, SYSTEM_POOL, system)?;

    for pool in &spec.node_pools {
        let Some(class) = classes
            .get(&pool.class_name)
            .and_then(|c| c.provisioning.eks.as_ref())
        else {
            continue; // validate::pools_against_classes has already refused this.
        };
        let params = eks_api::NodePoolParameters {
            region: cluster.region.clone(),
            cluster_ref: eks_api::LocalReference { name: name.into() },
            node_role_arn: node_role.clone(),
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
                FabricType::None => 0,
            },
            tags: tags.clone(),
        };
        compose_node_pool(out, name, cluster, &pool.name, params)?;
    }

    out.compose(KEY_ACTIVATION_POLICY, activation_policy(name), false);
    Ok(())
}

fn compose_node_pool(
    out: &mut Output,
    cluster: &str,
    eks: &EksCluster,
    pool: &str,
    params: eks_api::NodePoolParameters,
) -> Result<(), ComposeError> {
    let mr = eks_api::NodePool::new(
        &format!("{cluster}-{pool}"),
        eks_api::NodePoolSpec {
            for_provider: params,
            provider_config_ref: provider_config_ref(eks),
            management_policies: vec![eks_api::ManagementPolicy::All],
            write_connection_secret_to_ref: None,
        },
    );
    out.compose(
        node_pool_key(pool),
        to_value(&mr, Some(CONTROL_NAMESPACE))?,
        false,
    );
    Ok(())
}

/// The ManagedResourceActivationPolicy that activates provider-eks's kinds. Named per cluster, so clusters never
/// fight over one policy and deleting the last EKS cluster removes the last reason to run the provider.
pub fn activation_policy(cluster: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1alpha1",
        "kind": "ManagedResourceActivationPolicy",
        "metadata": {"name": format!("{cluster}-provider-eks")},
        "spec": {"activate": [eks_api::Cluster::crd_name(), eks_api::NodePool::crd_name()]},
    })
}

/// The provider config every provider-eks MR of the cluster uses: the one `spec.cluster.eks.credentials` names.
fn provider_config_ref(cluster: &EksCluster) -> eks_api::ProviderConfigReference {
    eks_api::ProviderConfigReference {
        kind: cluster.credentials.kind.as_str().into(),
        name: cluster.credentials.name.clone(),
    }
}

/// Without an autoscaling range a pool stays at its node count.
fn scaling(pool: &NodePool) -> eks_api::Scaling {
    eks_api::Scaling {
        min_size: pool.min_node_count.unwrap_or(pool.node_count),
        max_size: pool.max_node_count.unwrap_or(pool.node_count),
        desired_size: pool.node_count,
    }
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

/// Zones the created VPC needs subnets in: every zone a pool names. EKS wants at least two; with none named
/// the provider picks the region's first zones.
fn all_zones(spec: &InferenceClusterSpec) -> Vec<String> {
    let mut zones: Vec<String> = spec
        .node_pools
        .iter()
        .flat_map(|p| p.zones.iter().cloned())
        .collect();
    zones.sort();
    zones.dedup();
    zones
}

/// Serializes a typed MR, placing it in `namespace`.
fn to_value(object: &impl Serialize, namespace: Option<&str>) -> Result<Value, ComposeError> {
    let mut value = serde_json::to_value(object)
        .map_err(|e| ComposeError::new("spec", format!("cannot encode a provider-eks object: {e}")))?;
    if let Some(namespace) = namespace {
        value["metadata"]["namespace"] = json!(namespace);
    }
    if let Some(map) = value.as_object_mut() {
        map.remove("status");
    }
    Ok(value)
}

/// The ReadWriteMany StorageClass every EKS cluster gets for model caches, backed by the cluster's EFS file
/// system (upstream Modelplane's name, so manifests written for it keep working).
pub const EFS_STORAGE_CLASS: &str = "modelplane-rwx-efs";
pub const KEY_STORAGE_CLASS: &str = "object-storageclass-efs";
