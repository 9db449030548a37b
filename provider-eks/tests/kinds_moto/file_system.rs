//! FileSystem against moto's EFS and EC2.

use modelplane_eks_api::*;
use modelplane_provider_eks::eks::file_system::FileSystemConnector;
use modelplane_provider_eks::managed::conditions::Readiness;
use modelplane_provider_eks::managed::external::{ExternalClient, ExternalError};
use modelplane_provider_eks::managed::reconciler::Connector;

use super::{aws, cache, lose_external_name, moto, resource_spec, stamp};

/// A VPC with one subnet in each of `zones`.
pub async fn subnets(ec2: &aws_sdk_ec2::Client, zones: &[&str]) -> Vec<String> {
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.1.0.0/16")
        .send()
        .await
        .unwrap()
        .vpc
        .unwrap()
        .vpc_id
        .unwrap();
    let mut ids = Vec::new();
    for (i, zone) in zones.iter().enumerate() {
        let s = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.1.{i}.0/24"))
            .availability_zone(*zone)
            .send()
            .await
            .unwrap();
        ids.push(s.subnet.unwrap().subnet_id.unwrap());
    }
    ids
}

pub fn fs_mr(name: &str, subnet_ids: Vec<String>) -> FileSystem {
    stamp(
        FileSystem::new(
            name,
            FileSystemSpec {
                for_provider: FileSystemParameters {
                    region: super::REGION.into(),
                    subnet_ids,
                    throughput_mode: ThroughputMode::Elastic,
                    nfs_security_group_ids: Vec::new(),
                    tags: [("team".to_string(), "a".to_string())].into(),
                },
                resource: resource_spec(),
            },
        ),
        name,
    )
}

async fn file_systems(efs: &aws_sdk_efs::Client) -> usize {
    efs.describe_file_systems()
        .send()
        .await
        .unwrap()
        .file_systems()
        .len()
}

pub async fn modelplane_groups(ec2: &aws_sdk_ec2::Client) -> usize {
    let out = ec2.describe_security_groups().send().await.unwrap();
    out.security_groups()
        .iter()
        .filter(|g| g.group_name().is_some_and(|n| n.starts_with("modelplane-")))
        .count()
}

#[tokio::test]
async fn a_file_system_gets_a_mount_target_per_subnet_is_adopted_after_a_crash_and_deleted_in_order() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let cache = cache(&moto).await;
    let aws = aws(&cache).await;
    let subnet_ids = subnets(&aws.ec2, &["us-east-1a", "us-east-1b"]).await;
    let mr = fs_mr("demo", subnet_ids.clone());
    let client = FileSystemConnector { cache: cache.clone() }
        .connect(&mr)
        .await
        .unwrap();

    assert!(!client.observe(&mr).await.unwrap().exists);
    client.create(&mr).await.unwrap();
    let seen = client.observe(&mr).await.unwrap();
    assert!(seen.exists && seen.up_to_date, "{seen:?}");
    assert_eq!(seen.readiness, Readiness::Available);
    let id = seen.at_provider.file_system_id.clone().unwrap();
    let mut mounted: Vec<String> = seen
        .at_provider
        .mount_targets
        .iter()
        .map(|m| m.subnet_id.clone())
        .collect();
    mounted.sort();
    let mut expected = subnet_ids.clone();
    expected.sort();
    assert_eq!(mounted, expected);
    assert!(seen.at_provider.security_group_id.is_some());
    let described = aws
        .efs
        .describe_file_systems()
        .file_system_id(&id)
        .send()
        .await
        .unwrap();
    let fs = &described.file_systems()[0];
    assert_eq!(fs.encrypted(), Some(true));
    assert_eq!(fs.throughput_mode().map(|t| t.as_str()), Some("elastic"));

    // The answer and the external name were lost: the next reconcile finds the same file system by its
    // creation token, and a repeated Create makes nothing new.
    let restarted = lose_external_name(&mr);
    let again = client.observe(&restarted).await.unwrap();
    assert_eq!(again.at_provider.file_system_id.as_deref(), Some(id.as_str()));
    client.create(&restarted).await.unwrap();
    assert_eq!(file_systems(&aws.efs).await, 1);
    assert_eq!(modelplane_groups(&aws.ec2).await, 1);

    // Dropping a subnet is drift; Update removes its mount target.
    let mut fewer = mr.clone();
    fewer.spec.for_provider.subnet_ids = vec![subnet_ids[0].clone()];
    let drifted = client.observe(&fewer).await.unwrap();
    assert!(!drifted.up_to_date);
    client.update(&fewer, &drifted.at_provider).await.unwrap();
    assert_eq!(
        client
            .observe(&fewer)
            .await
            .unwrap()
            .at_provider
            .mount_targets
            .len(),
        1
    );

    // Delete: mount targets first (the file system waits for them), then the file system, then its group.
    let mut deleting = fewer.clone();
    deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    let mut rounds = 0;
    while client.observe(&deleting).await.unwrap().exists {
        rounds += 1;
        assert!(rounds < 10, "delete did not finish");
        match client.delete(&deleting).await {
            Ok(()) | Err(ExternalError::Waiting(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        rounds >= 2,
        "mount targets, file system and group go in separate steps"
    );
    assert_eq!(file_systems(&aws.efs).await, 0);
    assert_eq!(modelplane_groups(&aws.ec2).await, 0);
}

#[tokio::test]
async fn two_subnets_in_one_zone_are_refused_naming_the_field_before_anything_is_made() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let cache = cache(&moto).await;
    let aws = aws(&cache).await;
    let subnet_ids = subnets(&aws.ec2, &["us-east-1a", "us-east-1a"]).await;
    let mr = fs_mr("clash", subnet_ids);
    let client = FileSystemConnector { cache: cache.clone() }
        .connect(&mr)
        .await
        .unwrap();
    let err = client.create(&mr).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.starts_with("spec.forProvider.subnetIds")),
        "{err}"
    );
    let missing = fs_mr("missing", vec!["subnet-0000000000000000f".into()]);
    let err = client.create(&missing).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.starts_with("spec.forProvider.subnetIds")),
        "{err}"
    );
    assert_eq!(file_systems(&aws.efs).await, 0);
    assert_eq!(modelplane_groups(&aws.ec2).await, 0);
}
