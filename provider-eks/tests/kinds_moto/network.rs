//! Network against moto's EC2.

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use modelplane_eks_api::*;
use modelplane_provider_eks::eks::network::NetworkConnector;
use modelplane_provider_eks::eks::owned::OWNER_TAG;
use modelplane_provider_eks::managed::conditions::Readiness;
use modelplane_provider_eks::managed::external::{ExternalClient, ExternalError};
use modelplane_provider_eks::managed::reconciler::Connector;

use super::{NS, REGION, aws, cache, lose_external_name, moto, resource_spec, stamp};

pub fn network_mr(name: &str, zones: &[&str]) -> Network {
    stamp(
        Network::new(
            name,
            NetworkSpec {
                for_provider: NetworkParameters {
                    region: REGION.into(),
                    cidr_block: "10.0.0.0/16".into(),
                    zones: zones.iter().map(|z| z.to_string()).collect(),
                    cluster_name: Some(name.into()),
                    tags: [("team".to_string(), "a".to_string())].into(),
                },
                resource: resource_spec(),
            },
        ),
        name,
    )
}

fn mine(name: &str) -> Filter {
    Filter::builder()
        .name(format!("tag:{OWNER_TAG}"))
        .values(format!("{NS}/{name}"))
        .build()
}

/// Everything of the network left in EC2, by kind.
async fn left(ec2: &aws_sdk_ec2::Client, name: &str) -> Vec<(&'static str, usize)> {
    let vpcs = ec2
        .describe_vpcs()
        .filters(mine(name))
        .send()
        .await
        .unwrap()
        .vpcs()
        .len();
    let subnets = ec2
        .describe_subnets()
        .filters(mine(name))
        .send()
        .await
        .unwrap()
        .subnets()
        .len();
    let gateways = ec2
        .describe_internet_gateways()
        .filters(mine(name))
        .send()
        .await
        .unwrap()
        .internet_gateways()
        .len();
    let ips = ec2
        .describe_addresses()
        .filters(mine(name))
        .send()
        .await
        .unwrap()
        .addresses()
        .len();
    let tables = ec2
        .describe_route_tables()
        .filters(mine(name))
        .send()
        .await
        .unwrap()
        .route_tables()
        .len();
    let nats = ec2
        .describe_nat_gateways()
        .send()
        .await
        .unwrap()
        .nat_gateways()
        .iter()
        .filter(|n| n.state().map(|s| s.as_str()) != Some("deleted"))
        .count();
    let groups = ec2
        .describe_security_groups()
        .filters(mine(name))
        .send()
        .await
        .unwrap()
        .security_groups()
        .len();
    vec![
        ("vpc", vpcs),
        ("subnet", subnets),
        ("internet gateway", gateways),
        ("elastic ip", ips),
        ("route table", tables),
        ("nat gateway", nats),
        ("security group", groups),
    ]
}

#[tokio::test]
async fn a_network_is_created_whole_adopted_after_a_crash_and_deleted_leaving_nothing() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let cache = cache(&moto).await;
    let ec2 = aws(&cache).await.ec2;
    let mr = network_mr("demo", &["us-east-1a", "us-east-1b"]);
    let client = NetworkConnector { cache: cache.clone() }
        .connect(&mr)
        .await
        .unwrap();

    // A crash right after CreateVpc: the tagged VPC is there and nothing else.
    let tags = vec![
        Tag::builder().key(OWNER_TAG).value(format!("{NS}/demo")).build(),
        Tag::builder()
            .key("modelplane.ai/network-part")
            .value("vpc")
            .build(),
    ];
    ec2.create_vpc()
        .cidr_block("10.0.0.0/16")
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Vpc)
                .set_tags(Some(tags))
                .build(),
        )
        .send()
        .await
        .unwrap();
    let partial = client.observe(&mr).await.unwrap();
    assert!(partial.exists && !partial.up_to_date, "{partial:?}");
    client.update(&mr, &partial.at_provider).await.unwrap();

    let seen = client.observe(&mr).await.unwrap();
    assert!(seen.exists && seen.up_to_date, "{seen:?}");
    assert_eq!(seen.readiness, Readiness::Available);
    let at = &seen.at_provider;
    assert_eq!(at.public_subnets.len(), 2);
    assert_eq!(at.private_subnets.len(), 2);
    assert_eq!(at.private_subnets[0].zone, "us-east-1a");
    assert_eq!(at.private_subnets[1].cidr_block, "10.0.192.0/18");
    assert!(at.nat_gateway_id.is_some() && at.internet_gateway_id.is_some());
    assert_eq!(at.route_table_ids.len(), 2);
    assert_eq!(
        left(&ec2, "demo").await,
        vec![
            ("vpc", 1),
            ("subnet", 4),
            ("internet gateway", 1),
            ("elastic ip", 1),
            ("route table", 2),
            ("nat gateway", 1),
            ("security group", 1)
        ]
    );
    // The cluster's group admits its own members on every protocol.
    let group = ec2
        .describe_security_groups()
        .group_ids(at.security_group_id.clone().unwrap())
        .send()
        .await
        .unwrap();
    let group = &group.security_groups()[0];
    assert_eq!(group.vpc_id(), at.vpc_id.as_deref());
    assert!(
        group
            .ip_permissions()
            .iter()
            .any(|p| p.ip_protocol() == Some("-1")
                && p.user_id_group_pairs()[0].group_id() == group.group_id()),
        "{group:?}"
    );
    // The private subnets carry the tags Kubernetes load balancers look for.
    let private = ec2
        .describe_subnets()
        .subnet_ids(&at.private_subnets[0].id)
        .send()
        .await
        .unwrap();
    let keys: Vec<&str> = private.subnets()[0]
        .tags()
        .iter()
        .filter_map(|t| t.key())
        .collect();
    assert!(
        keys.contains(&"kubernetes.io/role/internal-elb") && keys.contains(&"kubernetes.io/cluster/demo"),
        "{keys:?}"
    );

    // Lost answer and lost external name: the same network is found, and Create again makes nothing new.
    let restarted = lose_external_name(&mr);
    let again = client.observe(&restarted).await.unwrap();
    assert_eq!(again.at_provider.vpc_id, at.vpc_id);
    client.create(&restarted).await.unwrap();
    assert_eq!(left(&ec2, "demo").await, left(&ec2, "demo").await);
    assert_eq!(left(&ec2, "demo").await[0], ("vpc", 1));
    assert_eq!(left(&ec2, "demo").await[1], ("subnet", 4));

    // A zone list that would re-carve the VPC is refused by name.
    let moved = network_mr("demo", &["us-east-1a", "us-east-1c"]);
    let drifted = client.observe(&moved).await.unwrap();
    assert!(!drifted.up_to_date);
    let err = client.update(&moved, &drifted.at_provider).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.contains("spec.forProvider.zones")),
        "{err}"
    );

    let mut deleting = mr.clone();
    deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    let mut rounds = 0;
    loop {
        let seen = client.observe(&deleting).await.unwrap();
        if !seen.exists {
            break;
        }
        rounds += 1;
        assert!(rounds < 10, "delete did not finish");
        if !seen.busy {
            client.delete(&deleting).await.unwrap();
        }
    }
    assert!(rounds >= 2, "the NAT gateway goes first, the rest after it");
    assert!(
        left(&ec2, "demo").await.iter().all(|(_, n)| *n == 0),
        "{:?}",
        left(&ec2, "demo").await
    );
}

#[tokio::test]
async fn a_zone_outside_the_region_is_refused_naming_the_field_before_anything_is_made() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let cache = cache(&moto).await;
    let ec2 = aws(&cache).await.ec2;
    let mr = network_mr("bad", &["us-east-1a", "eu-west-1b"]);
    let client = NetworkConnector { cache: cache.clone() }
        .connect(&mr)
        .await
        .unwrap();
    let err = client.create(&mr).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.starts_with("spec.forProvider.zones[1]")),
        "{err}"
    );
    assert!(left(&ec2, "bad").await.iter().all(|(_, n)| *n == 0));
}
