//! ExternalClients for Cluster and NodePool against a real moto server (AWS) and kube-fake-client (the
//! ProviderConfig, its credentials Secret and the referenced Cluster).

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use modelplane_eks_api::*;
use modelplane_provider_eks::eks::clients::ClientCache;
use modelplane_provider_eks::eks::cluster::ClusterConnector;
use modelplane_provider_eks::eks::node_pool::NodePoolConnector;
use modelplane_provider_eks::managed::conditions::Readiness;
use modelplane_provider_eks::managed::external::{ExternalClient, ExternalError};
use modelplane_provider_eks::managed::reconciler::Connector;
use support::objects::{cluster_on, pool_on, ready, stored};
use support::{MOTO_CREDENTIALS, Peer};
use tokio::sync::Mutex;

const NS: &str = "team-a";
const REGION: &str = "us-east-1";
const MOTO_CONFIG: &str = "moto";

/// One moto for this test binary; tests take turns and reset it first.
static MOTO: OnceLock<Mutex<Peer>> = OnceLock::new();

fn moto() -> &'static Mutex<Peer> {
    MOTO.get_or_init(|| Mutex::new(support::start_moto()))
}

/// A Cluster on the moto ProviderConfig, tagged, so tags are compared from the first Observe.
fn cluster_mr(name: &str) -> Cluster {
    let mut c = stored(cluster_on(MOTO_CONFIG, NS, name));
    c.spec.for_provider.tags = [("team".to_string(), "a".to_string())].into();
    c
}

fn ready_cluster(name: &str, subnets: Vec<String>) -> Cluster {
    ready(cluster_mr(name), subnets)
}

/// A NodePool on the moto ProviderConfig, tainted, so taints go through EKS's types both ways.
fn pool_mr(name: &str, cluster: &str) -> NodePool {
    let mut p = stored(pool_on(MOTO_CONFIG, NS, name, cluster));
    p.spec.for_provider.taints = vec![Taint {
        key: "nvidia.com/gpu".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    }];
    p
}

async fn kube_with(moto: &Peer, clusters: Vec<Cluster>) -> kube::Client {
    let mut pc = ProviderConfig::new(
        MOTO_CONFIG,
        ProviderConfigSpec {
            credentials: Credentials {
                source: CredentialsSource::Secret,
                secret_ref: Some(SecretKeySelector {
                    name: "aws".into(),
                    namespace: None,
                    key: "credentials".into(),
                }),
                role_arn: None,
            },
            endpoint: Some(moto.url()),
        },
    );
    pc.metadata.namespace = Some(NS.into());
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("aws".into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "credentials".to_string(),
            ByteString(MOTO_CREDENTIALS.into()),
        )])),
        ..Default::default()
    };
    kube_fake_client::ClientBuilder::new()
        .with_resource::<Cluster>()
        .with_resource::<NodePool>()
        .with_resource::<ProviderConfig>()
        .with_object(pc)
        .with_object(secret)
        .with_objects(clusters)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_cluster_is_created_observed_with_a_kubeconfig_and_deleted_in_moto() {
    let moto = moto();
    let moto = moto.lock().await;
    support::reset_moto(&moto);
    let cache = Arc::new(ClientCache::new(kube_with(&moto, vec![]).await));
    let mr = cluster_mr("demo");
    let client = ClusterConnector { cache }.connect(&mr).await.unwrap();

    assert!(!client.observe(&mr).await.unwrap().exists);
    client.create(&mr).await.unwrap();
    // A second Create (a lost answer, a restart) adopts the cluster instead of failing or duplicating it.
    client.create(&mr).await.unwrap();

    let seen = client.observe(&mr).await.unwrap();
    assert!(seen.exists && seen.up_to_date, "{seen:?}");
    assert_eq!(seen.readiness, Readiness::Available);
    assert_eq!(seen.at_provider.version.as_deref(), Some("1.34"));
    assert_eq!(
        seen.at_provider.subnet_ids,
        vec!["subnet-a".to_string(), "subnet-b".to_string()]
    );
    let kubeconfig: serde_json::Value =
        serde_yaml::from_slice(&seen.connection_details["kubeconfig"]).unwrap();
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["server"].as_str(),
        seen.at_provider.endpoint.as_deref()
    );
    let token = kubeconfig["users"][0]["user"]["token"].as_str().unwrap();
    assert!(token.starts_with("k8s-aws-v1."));

    client.delete(&mr).await.unwrap();
    assert!(!client.observe(&mr).await.unwrap().exists);
}

#[tokio::test]
async fn changed_cluster_tags_are_drift_and_update_corrects_them() {
    let moto = moto();
    let moto = moto.lock().await;
    support::reset_moto(&moto);
    let cache = Arc::new(ClientCache::new(kube_with(&moto, vec![]).await));
    let mut mr = cluster_mr("tagged");
    let client = ClusterConnector { cache }.connect(&mr).await.unwrap();
    client.create(&mr).await.unwrap();

    mr.spec
        .for_provider
        .tags
        .insert("cost-center".into(), "42".into());
    let seen = client.observe(&mr).await.unwrap();
    assert!(!seen.up_to_date);
    client.update(&mr, &seen.at_provider).await.unwrap();
    assert!(client.observe(&mr).await.unwrap().up_to_date);
}

#[tokio::test]
async fn a_cluster_without_subnets_is_rejected_naming_the_field() {
    let moto = moto();
    let moto = moto.lock().await;
    support::reset_moto(&moto);
    let cache = Arc::new(ClientCache::new(kube_with(&moto, vec![]).await));
    let mut mr = cluster_mr("novpc");
    mr.spec.for_provider.networking = Networking {
        subnet_ids: vec![],
        ..Default::default()
    };
    let client = ClusterConnector { cache }.connect(&mr).await.unwrap();
    let err = client.create(&mr).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.starts_with("spec.forProvider.networking.subnetIds")),
        "{err}"
    );
}

#[tokio::test]
async fn a_node_pool_is_created_scaled_relabelled_and_deleted_before_its_cluster() {
    let moto = moto();
    let moto = moto.lock().await;
    support::reset_moto(&moto);

    // Real subnets in two zones, so the pool's zone filter goes through EC2.
    let ec2 = {
        let cache = ClientCache::new(kube_with(&moto, vec![]).await);
        let reference = ProviderConfigReference {
            kind: "ProviderConfig".into(),
            name: MOTO_CONFIG.into(),
        };
        cache.clients(&reference, NS, REGION).await.unwrap().ec2
    };
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .unwrap()
        .vpc
        .unwrap()
        .vpc_id
        .unwrap();
    let mut subnets = Vec::new();
    for (i, zone) in ["us-east-1a", "us-east-1b"].iter().enumerate() {
        let s = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.0.{i}.0/24"))
            .availability_zone(*zone)
            .send()
            .await
            .unwrap();
        subnets.push(s.subnet.unwrap().subnet_id.unwrap());
    }

    let cluster = ready_cluster("gpu", subnets.clone());
    let cache = Arc::new(ClientCache::new(kube_with(&moto, vec![cluster.clone()]).await));
    let cluster_client = ClusterConnector { cache: cache.clone() }
        .connect(&cluster)
        .await
        .unwrap();
    cluster_client.create(&cluster).await.unwrap();

    let mut pool = pool_mr("h200", "gpu");
    pool.spec.for_provider.zones = vec!["us-east-1b".into()];
    let client = NodePoolConnector { cache: cache.clone() }
        .connect(&pool)
        .await
        .unwrap();
    assert!(!client.observe(&pool).await.unwrap().exists);
    client.create(&pool).await.unwrap();

    let seen = client.observe(&pool).await.unwrap();
    assert!(seen.exists && seen.up_to_date, "{seen:?}");
    assert_eq!(seen.at_provider.cluster_name.as_deref(), Some("gpu"));
    assert_eq!(seen.at_provider.subnet_ids, vec![subnets[1].clone()]);
    assert_eq!(seen.at_provider.scaling, Some(pool.spec.for_provider.scaling));
    // moto fills in the AMI type and disk size the spec left open: late initialization picks them up.
    assert!(seen.late_initialized.is_some());

    pool.spec.for_provider.scaling.desired_size = 3;
    pool.spec.for_provider.labels.insert("tier".into(), "gold".into());
    let drifted = client.observe(&pool).await.unwrap();
    assert!(!drifted.up_to_date);
    client.update(&pool, &drifted.at_provider).await.unwrap();
    let after = client.observe(&pool).await.unwrap();
    assert!(after.up_to_date, "{after:?}");
    assert_eq!(after.at_provider.scaling.map(|s| s.desired_size), Some(3));

    let waiting = cluster_client.delete(&cluster).await.unwrap_err();
    assert!(matches!(waiting, ExternalError::Waiting(_)), "{waiting}");
    client.delete(&pool).await.unwrap();
    assert!(!client.observe(&pool).await.unwrap().exists);
    cluster_client.delete(&cluster).await.unwrap();
    assert!(!cluster_client.observe(&cluster).await.unwrap().exists);
}

#[tokio::test]
async fn a_node_pool_waits_for_its_cluster_to_be_ready() {
    let moto = moto();
    let moto = moto.lock().await;
    support::reset_moto(&moto);
    let cache = Arc::new(ClientCache::new(kube_with(&moto, vec![cluster_mr("slow")]).await));
    let err = NodePoolConnector { cache }
        .connect(&pool_mr("p", "slow"))
        .await
        .err()
        .unwrap();
    assert_eq!(
        err,
        ExternalError::Waiting("Cluster slow is not Ready yet".into())
    );
}

/// A Ready Cluster `name` (on subnets moto does not check) made in moto, the client cache that knows it, and an
/// EC2 client on the same moto.
async fn made_cluster(moto: &Peer, name: &str) -> (Arc<ClientCache>, aws_sdk_ec2::Client) {
    let cluster = ready_cluster(name, vec!["subnet-a".into(), "subnet-b".into()]);
    let cache = Arc::new(ClientCache::new(kube_with(moto, vec![cluster.clone()]).await));
    ClusterConnector { cache: cache.clone() }
        .connect(&cluster)
        .await
        .unwrap()
        .create(&cluster)
        .await
        .unwrap();
    let ec2 = cache
        .clients(&cluster.spec.resource.provider_config_ref, NS, REGION)
        .await
        .unwrap()
        .ec2;
    (cache, ec2)
}

#[tokio::test]
async fn a_deleted_capacity_block_pool_leaves_no_launch_template() {
    let moto = moto();
    let moto = moto.lock().await;
    support::reset_moto(&moto);
    let (cache, ec2) = made_cluster(&moto, "efa").await;
    let mut pool = pool_mr("block-pool", "efa");
    // moto has no placement groups, so the pool that needs a template here is a capacity block, not EFA.
    pool.spec.for_provider.capacity_type = CapacityType::CapacityBlock;
    pool.spec.for_provider.capacity_reservation_id = Some("cr-0123456789abcdef0".into());
    let client = NodePoolConnector { cache: cache.clone() }
        .connect(&pool)
        .await
        .unwrap();
    client.create(&pool).await.unwrap();
    let templates = ec2.describe_launch_templates().send().await.unwrap();
    assert_eq!(templates.launch_templates().len(), 1);

    pool.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    // The reconciler's rounds: delete while anything is observed, until nothing is.
    let mut rounds = 0;
    while client.observe(&pool).await.unwrap().exists {
        rounds += 1;
        assert!(rounds < 5, "the pool's delete did not finish");
        client.delete(&pool).await.unwrap();
    }
    assert!(rounds >= 2, "the template goes only after the node group");
    let templates = ec2.describe_launch_templates().send().await.unwrap();
    assert!(templates.launch_templates().is_empty(), "{templates:?}");
}

/// Two security groups in a fresh VPC.
async fn two_groups(ec2: &aws_sdk_ec2::Client) -> (String, String) {
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.9.0.0/16")
        .send()
        .await
        .unwrap()
        .vpc
        .unwrap()
        .vpc_id
        .unwrap();
    let mut ids = Vec::new();
    for name in ["nodes-a", "nodes-b"] {
        let out = ec2
            .create_security_group()
            .group_name(name)
            .description("test")
            .vpc_id(&vpc)
            .send()
            .await
            .unwrap();
        ids.push(out.group_id.unwrap());
    }
    (ids[0].clone(), ids[1].clone())
}

#[tokio::test]
async fn changing_a_pools_security_groups_is_refused_by_name_and_the_template_is_left_alone() {
    let moto = moto();
    let moto = moto.lock().await;
    support::reset_moto(&moto);
    let (cache, ec2) = made_cluster(&moto, "sg").await;
    let (first, second) = two_groups(&ec2).await;
    let mut pool = pool_mr("sg-pool", "sg");
    pool.spec.for_provider.security_group_ids = vec![first.clone()];
    let client = NodePoolConnector { cache: cache.clone() }
        .connect(&pool)
        .await
        .unwrap();
    client.create(&pool).await.unwrap();
    let seen = client.observe(&pool).await.unwrap();
    assert!(seen.exists && seen.up_to_date, "{seen:?}");

    let refused =
        "cannot change spec.forProvider.securityGroupIds of existing EKS node group sg-pool in place";
    for groups in [vec![second.clone()], vec![first.clone(), second.clone()], vec![]] {
        let mut changed = pool.clone();
        changed.spec.for_provider.security_group_ids = groups.clone();
        changed.metadata.generation = Some(2);
        let drifted = client.observe(&changed).await.unwrap();
        assert!(!drifted.up_to_date, "{groups:?}: {drifted:?}");
        let err = client.update(&changed, &drifted.at_provider).await.unwrap_err();
        assert!(
            matches!(&err, ExternalError::Rejected(m) if m.starts_with(refused)),
            "{groups:?}: {err}"
        );
    }
    // The template still holds the group the pool was made with.
    let template = seen.at_provider.launch_template_id.clone().unwrap();
    let versions = ec2
        .describe_launch_template_versions()
        .launch_template_id(&template)
        .versions("$Latest")
        .send()
        .await
        .unwrap();
    let data = versions.launch_template_versions()[0]
        .launch_template_data()
        .unwrap();
    assert_eq!(data.security_group_ids(), std::slice::from_ref(&first));

    // A pool made without groups (no launch template) that is given some is refused too.
    let plain = pool_mr("plain-pool", "sg");
    client.create(&plain).await.unwrap();
    assert!(client.observe(&plain).await.unwrap().up_to_date);
    let mut grouped = plain.clone();
    grouped.spec.for_provider.security_group_ids = vec![first];
    grouped.metadata.generation = Some(2);
    let drifted = client.observe(&grouped).await.unwrap();
    let err = client.update(&grouped, &drifted.at_provider).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.contains("spec.forProvider.securityGroupIds")),
        "{err}"
    );
}
