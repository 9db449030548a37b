//! The managed resources the tests create, and the checks they wait for.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use kube::Resource;
use modelplane_eks_api::*;

use super::world::{CONVERGE, REGION, World};

pub async fn wait_for<F, Fut>(what: &str, world: &World, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + CONVERGE;
    // A check that hangs (a stand-in that stopped answering) counts as "not yet", so the deadline still holds.
    while !tokio::time::timeout(Duration::from_secs(10), check())
        .await
        .unwrap_or(false)
    {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\nprovider log:\n{}",
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == ConditionStatus::True)
}

/// A Cluster `name` in `ns` on ProviderConfig `default`, on two subnets, its kubeconfig written to
/// `<name>-kubeconfig`.
pub fn cluster_in(ns: &str, name: &str) -> Cluster {
    cluster_on("default", ns, name)
}

/// The same on ProviderConfig `config`.
pub fn cluster_on(config: &str, ns: &str, name: &str) -> Cluster {
    let mut c = Cluster::new(
        name,
        ClusterSpec {
            for_provider: ClusterParameters {
                region: REGION.into(),
                version: "1.34".into(),
                role_arn: "arn:aws:iam::123456789012:role/eks-cluster".into(),
                networking: Networking {
                    subnet_ids: vec!["subnet-a".into(), "subnet-b".into()],
                    ..Default::default()
                },
                endpoint_public_access: true,
                ..Default::default()
            },
            resource: ResourceSpec {
                provider_config_ref: ProviderConfigReference {
                    kind: "ProviderConfig".into(),
                    name: config.into(),
                },
                management_policies: vec![ManagementPolicy::All],
                write_connection_secret_to_ref: Some(SecretReference {
                    name: format!("{name}-kubeconfig"),
                }),
            },
        },
    );
    c.metadata.namespace = Some(ns.into());
    c
}

/// A NodePool `name` in `ns` of Cluster `cluster`, on ProviderConfig `default`: 1 to 4 nodes, 2 wanted,
/// labelled with its name.
pub fn pool_in(ns: &str, name: &str, cluster: &str) -> NodePool {
    pool_on("default", ns, name, cluster)
}

/// The same on ProviderConfig `config`.
pub fn pool_on(config: &str, ns: &str, name: &str, cluster: &str) -> NodePool {
    let mut p = NodePool::new(
        name,
        NodePoolSpec {
            for_provider: NodePoolParameters {
                region: REGION.into(),
                cluster_ref: LocalReference { name: cluster.into() },
                node_role_arn: "arn:aws:iam::123456789012:role/eks-node".into(),
                instance_types: vec!["p5.48xlarge".into()],
                scaling: Scaling {
                    min_size: 1,
                    max_size: 4,
                    desired_size: 2,
                },
                labels: [("modelplane.ai/pool".to_string(), name.to_string())].into(),
                ..Default::default()
            },
            resource: ResourceSpec {
                provider_config_ref: ProviderConfigReference {
                    kind: "ProviderConfig".into(),
                    name: config.into(),
                },
                management_policies: vec![ManagementPolicy::All],
                write_connection_secret_to_ref: None,
            },
        },
    );
    p.metadata.namespace = Some(ns.into());
    p
}

/// `mr` as the API server hands it to a client: with a uid and at generation 1.
pub fn stored<M: Resource>(mut mr: M) -> M {
    let name = mr.meta().name.clone().unwrap_or_default();
    mr.meta_mut().uid = Some(format!("uid-{name}"));
    mr.meta_mut().generation = Some(1);
    mr
}

/// `cluster` as a NodePool's connector wants it: Ready, its `subnets` recorded.
pub fn ready(mut cluster: Cluster, subnets: Vec<String>) -> Cluster {
    cluster.status = Some(ClusterStatus {
        at_provider: ClusterObservation {
            subnet_ids: subnets,
            ..Default::default()
        },
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: ConditionStatus::True,
            reason: "Available".into(),
            message: None,
            last_transition_time: "2026-01-01T00:00:00Z".into(),
            observed_generation: None,
        }],
        observed_generation: None,
    });
    cluster
}

pub fn condition(conditions: Option<&Vec<Condition>>, type_: &str) -> Option<Condition> {
    conditions?.iter().find(|c| c.type_ == type_).cloned()
}

pub async fn cluster_condition(world: &World, name: &str, type_: &str) -> Option<Condition> {
    let c = world.clusters().get(name).await.ok()?;
    condition(c.status.as_ref().map(|s| &s.conditions), type_)
}

pub async fn pool_condition(world: &World, name: &str, type_: &str) -> Option<Condition> {
    let p = world.pools().get(name).await.ok()?;
    condition(p.status.as_ref().map(|s| &s.conditions), type_)
}

/// The condition has this status and its message contains `text`.
pub fn says(condition: Option<Condition>, status: ConditionStatus, text: &str) -> bool {
    condition.is_some_and(|c| c.status == status && c.message.unwrap_or_default().contains(text))
}

pub async fn cluster_ready(world: &World, name: &str) -> bool {
    let Ok(c) = world.clusters().get(name).await else {
        return false;
    };
    let conditions = c.status.map(|s| s.conditions).unwrap_or_default();
    is_true(&conditions, "Ready") && is_true(&conditions, "Synced")
}

pub async fn pool_ready(world: &World, name: &str) -> bool {
    let Ok(p) = world.pools().get(name).await else {
        return false;
    };
    let conditions = p.status.map(|s| s.conditions).unwrap_or_default();
    is_true(&conditions, "Ready") && is_true(&conditions, "Synced")
}
