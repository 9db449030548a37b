//! The AWS side of a stock cluster besides its node groups: the network, the IAM roles, the EKS cluster, its
//! add-ons and pod identities, EFS, and the StorageClass that puts EFS to use.

use std::collections::BTreeMap;

use modelplane_eks_api as eks_api;
use serde_json::json;

use super::{Context, KEY_CLUSTER, KEY_FILE_SYSTEM, KEY_NETWORK, composed};
use crate::compose::inference_cluster::provision::kubeconfig_secret;
use crate::wire::tree::{Fields, tree};
use crate::{
    api::inference_cluster::InferenceClusterSpec,
    compose::{
        ComposeError, Output,
        inference_cluster::{observed::strings, provision},
    },
    stack::components::{CLUSTER_AUTOSCALER_SERVICE_ACCOUNT, EKS_KUBERNETES_VERSION},
};

/// VPC Modelplane composes when the spec names no CIDR.
pub const DEFAULT_VPC_CIDR: &str = "10.0.0.0/16";
/// EKS places its control plane in at least two zones.
const MIN_ZONES: usize = 2;

pub const EFS_CSI_ADDON: &str = "aws-efs-csi-driver";
/// The add-ons every stock cluster runs: pod networking, service proxying, DNS, the Pod Identity agent the
/// autoscaler and the EFS driver get their credentials through, and the EFS CSI driver.
pub const ADDONS: &[&str] = &[
    "vpc-cni",
    "kube-proxy",
    "coredns",
    "eks-pod-identity-agent",
    EFS_CSI_ADDON,
];

pub fn addon_key(addon: &str) -> String {
    format!("eks-addon-{addon}")
}

/// An IAM role the cluster needs: who assumes it, what it may do, and who uses it.
struct RoleDef {
    part: &'static str,
    assumed_by: &'static str,
    policies: &'static [&'static str],
    /// The role's inline policy, given the EKS cluster's name.
    inline: Option<fn(&str) -> String>,
}

const CLUSTER_ROLE: RoleDef = RoleDef {
    part: "cluster",
    assumed_by: "eks.amazonaws.com",
    policies: &["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"],
    inline: None,
};
const NODE_ROLE: RoleDef = RoleDef {
    part: "node",
    assumed_by: "ec2.amazonaws.com",
    policies: &[
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    ],
    inline: None,
};
const EFS_CSI_ROLE: RoleDef = RoleDef {
    part: "efs-csi",
    assumed_by: "pods.eks.amazonaws.com",
    policies: &["arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"],
    inline: None,
};
/// The cluster autoscaler's role; AWS publishes no managed policy for it.
const AUTOSCALER_ROLE: RoleDef = RoleDef {
    part: "autoscaler",
    assumed_by: "pods.eks.amazonaws.com",
    policies: &[],
    inline: Some(autoscaler_policy),
};

/// What the cluster autoscaler does: it reads every Auto Scaling group, instance type and launch template (these
/// reads take no narrower resource), and resizes or shrinks only the groups of this cluster, which EKS tags
/// `k8s.io/cluster-autoscaler/<cluster>: owned` on every managed node group it makes. Another cluster's groups in
/// the same account are out of its reach.
fn autoscaler_policy(cluster: &str) -> String {
    json!({
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DiscoverNodeGroups",
                "Effect": "Allow",
                "Action": [
                    "autoscaling:DescribeAutoScalingGroups",
                    "autoscaling:DescribeAutoScalingInstances",
                    "autoscaling:DescribeLaunchConfigurations",
                    "autoscaling:DescribeScalingActivities",
                    "autoscaling:DescribeTags",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplateVersions",
                    "ec2:GetInstanceTypesFromInstanceRequirements",
                    "eks:DescribeNodegroup"
                ],
                "Resource": "*"
            },
            {
                "Sid": "ResizeOnlyThisClustersGroups",
                "Effect": "Allow",
                "Action": [
                    "autoscaling:SetDesiredCapacity",
                    "autoscaling:TerminateInstanceInAutoScalingGroup"
                ],
                "Resource": "*",
                "Condition": {
                    "StringEquals": { format!("aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster}"): "owned" }
                }
            }
        ]
    })
    .to_string()
}

pub const ROLE_PREFIX: &str = "eks-role-";
pub const POD_IDENTITY_PREFIX: &str = "eks-podidentity-";
/// The composed node and cluster roles (absent when the spec brings its own ARNs).
pub const KEY_NODE_ROLE: &str = "eks-role-node";
pub const KEY_CLUSTER_ROLE: &str = "eks-role-cluster";

fn role_key(part: &str) -> String {
    format!("{ROLE_PREFIX}{part}")
}

/// The network's subnets for the cluster, and the security group its control plane, nodes and NFS rule share,
/// once known.
pub struct Network {
    pub private_subnets: Option<Vec<String>>,
    pub security_group: Option<String>,
}

/// Role ARNs, once known.
pub struct Roles {
    pub cluster: Option<String>,
    pub node: Option<String>,
    pub efs_csi: Option<String>,
    pub autoscaler: Option<String>,
}

/// The spec's own subnets, or a composed `Network` in the pools' zones (at least two).
pub fn network(
    out: &mut Output,
    ctx: &Context,
    spec: &InferenceClusterSpec,
) -> Result<Network, ComposeError> {
    let byo = &ctx.cluster.networking.subnet_ids;
    if !byo.is_empty() {
        return Ok(Network {
            private_subnets: Some(byo.clone()),
            security_group: None,
        });
    }
    let mr = eks_api::Network::new(
        ctx.name,
        eks_api::NetworkSpec {
            for_provider: eks_api::NetworkParameters {
                region: ctx.region(),
                cidr_block: ctx
                    .cluster
                    .networking
                    .vpc_cidr
                    .clone()
                    .unwrap_or_else(|| DEFAULT_VPC_CIDR.into()),
                zones: zones(&ctx.cluster.region, spec),
                cluster_name: Some(ctx.name.to_owned()),
                tags: ctx.tags.clone(),
            },
            resource: ctx.resource_spec(),
        },
    );
    out.compose(KEY_NETWORK, composed(&mr)?, false);
    let from_network = ctx
        .seen
        .ready_field(KEY_NETWORK, "/status/atProvider/privateSubnets")
        .and_then(|subnets| {
            subnets
                .as_array()?
                .iter()
                .map(|s| s["id"].as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .filter(|ids| !ids.is_empty());
    let from_cluster = || {
        ctx.seen
            .spec_field(KEY_CLUSTER, "/spec/forProvider/networking/subnetIds")
            .and_then(|v| strings(&v))
    };
    Ok(Network {
        private_subnets: from_network.or_else(from_cluster),
        security_group: ctx
            .seen
            .ready_field(KEY_NETWORK, "/status/atProvider/securityGroupId")
            .and_then(|v| v.as_str().map(str::to_owned)),
    })
}

/// The security groups a resource fixed at creation (`key`) keeps: what it was composed with once it exists
/// (so a resource made before the network had a group is never asked to change), else the network's.
pub fn fixed_groups(ctx: &Context, key: &str, pointer: &str, network: &Network) -> Vec<String> {
    if ctx.seen.exists(key) {
        return ctx
            .seen
            .spec_field(key, pointer)
            .and_then(|v| strings(&v))
            .unwrap_or_default();
    }
    network.security_group.iter().cloned().collect()
}

/// Every zone a pool names, then the region's first zones until there are two.
pub fn zones(region: &str, spec: &InferenceClusterSpec) -> Vec<String> {
    let mut zones: Vec<String> = spec
        .node_pools
        .iter()
        .flat_map(|p| p.zones.iter().cloned())
        .collect();
    zones.sort();
    zones.dedup();
    for letter in ['a', 'b', 'c'] {
        if zones.len() >= MIN_ZONES {
            break;
        }
        let zone = format!("{region}{letter}");
        if !zones.contains(&zone) {
            zones.push(zone);
        }
    }
    zones.sort();
    zones
}

/// The roles the spec does not bring, and the two pod-identity roles every stock cluster gets.
pub fn roles(out: &mut Output, ctx: &Context) -> Result<Roles, ComposeError> {
    let cluster = match &ctx.cluster.cluster_role_arn {
        Some(arn) => Some(arn.clone()),
        None => role(out, ctx, &CLUSTER_ROLE)?
            .or_else(|| spec_string(ctx, KEY_CLUSTER, "/spec/forProvider/roleArn")),
    };
    let node = match &ctx.cluster.node_role_arn {
        Some(arn) => Some(arn.clone()),
        None => role(out, ctx, &NODE_ROLE)?.or_else(|| {
            spec_string(
                ctx,
                &super::node_pool_key(super::node_pools::SYSTEM),
                "/spec/forProvider/nodeRoleArn",
            )
        }),
    };
    Ok(Roles {
        cluster,
        node,
        efs_csi: role(out, ctx, &EFS_CSI_ROLE)?
            .or_else(|| spec_string(ctx, &pod_identity_key("efs-csi"), "/spec/forProvider/roleArn")),
        autoscaler: role(out, ctx, &AUTOSCALER_ROLE)?
            .or_else(|| spec_string(ctx, &pod_identity_key("autoscaler"), "/spec/forProvider/roleArn")),
    })
}

fn spec_string(ctx: &Context, key: &str, pointer: &str) -> Option<String> {
    ctx.seen
        .spec_field(key, pointer)
        .and_then(|v| v.as_str().map(str::to_owned))
        .filter(|s| !s.is_empty())
}

/// Composes one role; its ARN once it is Ready.
fn role(out: &mut Output, ctx: &Context, def: &RoleDef) -> Result<Option<String>, ComposeError> {
    let key = role_key(def.part);
    let mr = eks_api::Role::new(
        &format!("{}-{}", ctx.name, def.part),
        eks_api::RoleSpec {
            for_provider: eks_api::RoleParameters {
                assumed_by: def.assumed_by.into(),
                policy_arns: def.policies.iter().map(|p| (*p).to_owned()).collect(),
                inline_policy: def.inline.map(|policy| policy(ctx.name)),
                tags: ctx.tags.clone(),
            },
            resource: ctx.resource_spec(),
        },
    );
    out.compose(&key, composed(&mr)?, false);
    Ok(ctx
        .seen
        .ready_field(&key, "/status/atProvider/arn")
        .and_then(|v| v.as_str().map(str::to_owned)))
}

/// The EKS control plane, on `subnets`, assuming `role`, in the network's security group; it writes its
/// kubeconfig for the provider configs.
pub fn cluster(
    out: &mut Output,
    ctx: &Context,
    subnets: &[String],
    role: &str,
    network: &Network,
) -> Result<(), ComposeError> {
    let security_group_ids = fixed_groups(
        ctx,
        KEY_CLUSTER,
        "/spec/forProvider/networking/securityGroupIds",
        network,
    );
    let networking = &ctx.cluster.networking;
    let mut mr = eks_api::Cluster::new(
        ctx.name,
        eks_api::ClusterSpec {
            for_provider: eks_api::ClusterParameters {
                region: ctx.region(),
                version: ctx
                    .cluster
                    .kubernetes_version
                    .clone()
                    .unwrap_or_else(|| EKS_KUBERNETES_VERSION.into()),
                role_arn: role.to_owned(),
                networking: eks_api::Networking {
                    subnet_ids: subnets.to_vec(),
                    security_group_ids,
                },
                endpoint_public_access: networking.endpoint_public_access,
                endpoint_private_access: networking.endpoint_private_access,
                tags: ctx.tags.clone(),
            },
            ..Default::default()
        },
    );
    mr.spec.resource.provider_config_ref = ctx.provider_config_ref();
    mr.spec.resource.write_connection_secret_to_ref = Some(eks_api::SecretReference {
        name: kubeconfig_secret(ctx.name),
    });
    out.compose(KEY_CLUSTER, composed(&mr)?, false);
    Ok(())
}

/// EFS with a mount target in each of `subnets`, reached on NFS from the network's security group (the nodes);
/// its file system ID once it is Ready (or as the StorageClass already carries it).
pub fn file_system(
    out: &mut Output,
    ctx: &Context,
    subnets: &[String],
    network: &Network,
) -> Result<Option<String>, ComposeError> {
    // The rule follows the network's group; while the network is not observed it keeps what it has.
    let nfs_security_group_ids = match &network.security_group {
        Some(group) => vec![group.clone()],
        None => ctx
            .seen
            .spec_field(KEY_FILE_SYSTEM, "/spec/forProvider/nfsSecurityGroupIds")
            .and_then(|v| strings(&v))
            .unwrap_or_default(),
    };
    let mr = eks_api::FileSystem::new(
        ctx.name,
        eks_api::FileSystemSpec {
            for_provider: eks_api::FileSystemParameters {
                region: ctx.region(),
                subnet_ids: subnets.to_vec(),
                throughput_mode: eks_api::ThroughputMode::Elastic,
                nfs_security_group_ids,
                tags: ctx.tags.clone(),
            },
            resource: ctx.resource_spec(),
        },
    );
    out.compose(KEY_FILE_SYSTEM, composed(&mr)?, false);
    let from_fs = ctx
        .seen
        .ready_field(KEY_FILE_SYSTEM, "/status/atProvider/fileSystemId")
        .and_then(|v| v.as_str().map(str::to_owned));
    let from_class = || {
        spec_string(
            ctx,
            super::KEY_STORAGE_CLASS,
            "/spec/forProvider/manifest/parameters/fileSystemId",
        )
    };
    Ok(from_fs.or_else(from_class))
}

pub fn addons(out: &mut Output, ctx: &Context) -> Result<(), ComposeError> {
    for addon in ADDONS {
        let mr = eks_api::Addon::new(
            &format!("{}-{addon}", ctx.name),
            eks_api::AddonSpec {
                for_provider: eks_api::AddonParameters {
                    region: ctx.region(),
                    cluster_name: ctx.name.to_owned(),
                    addon_name: (*addon).to_owned(),
                    tags: ctx.tags.clone(),
                    ..Default::default()
                },
                resource: ctx.resource_spec(),
            },
        );
        out.compose(addon_key(addon), composed(&mr)?, false);
    }
    Ok(())
}

pub fn pod_identity_key(part: &str) -> String {
    format!("{POD_IDENTITY_PREFIX}{part}")
}

/// Pod identity for the EFS CSI controller and the cluster autoscaler, once their roles have ARNs.
pub fn pod_identities(out: &mut Output, ctx: &Context, roles: &Roles) -> Result<(), ComposeError> {
    let wanted = [
        ("efs-csi", "efs-csi-controller-sa", &roles.efs_csi),
        (
            "autoscaler",
            CLUSTER_AUTOSCALER_SERVICE_ACCOUNT,
            &roles.autoscaler,
        ),
    ];
    for (part, service_account, role) in wanted {
        let Some(role) = role else { continue };
        let mr = eks_api::PodIdentityAssociation::new(
            &format!("{}-{part}", ctx.name),
            eks_api::PodIdentityAssociationSpec {
                for_provider: eks_api::PodIdentityAssociationParameters {
                    region: ctx.region(),
                    cluster_name: ctx.name.to_owned(),
                    namespace: "kube-system".into(),
                    service_account: service_account.into(),
                    role_arn: role.clone(),
                },
                resource: ctx.resource_spec(),
            },
        );
        out.compose(pod_identity_key(part), composed(&mr)?, false);
    }
    Ok(())
}

/// The StorageClass ModelCaches stage on: EFS access points carved from `file_system`, one directory per
/// volume, through the EFS CSI driver.
pub fn storage_class(cluster: &str, file_system: &str) -> Fields {
    let manifest = tree!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": super::EFS_STORAGE_CLASS},
        "provisioner": "efs.csi.aws.com",
        "parameters": BTreeMap::from([
            ("provisioningMode", "efs-ap"),
            ("fileSystemId", file_system),
            ("directoryPerms", "700"),
            ("basePath", "/modelplane"),
        ]),
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    });
    provision::storage_class_object(cluster, "storageclass-efs", manifest)
}
