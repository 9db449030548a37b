//! The security groups a stock cluster needs, against moto's EC2 and EFS: the Network's group, which the
//! nodes share, as the only source the FileSystem's group admits on NFS; a source revoked outside the provider
//! put back; a changed spec followed; nothing left after both are deleted.

use aws_sdk_ec2::types::{IpPermission, UserIdGroupPair};
use modelplane_provider_eks::eks::file_system::FileSystemConnector;
use modelplane_provider_eks::eks::network::NetworkConnector;
use modelplane_provider_eks::managed::external::{ExternalClient, ExternalError};
use modelplane_provider_eks::managed::reconciler::Connector;

use super::file_system::{fs_mr, modelplane_groups};
use super::network::network_mr;
use super::{aws, cache, moto};

/// (CIDRs, groups) the group admits on TCP 2049.
async fn nfs_sources(ec2: &aws_sdk_ec2::Client, group: &str) -> (Vec<String>, Vec<String>) {
    let out = ec2
        .describe_security_groups()
        .group_ids(group)
        .send()
        .await
        .unwrap();
    let nfs: Vec<&IpPermission> = out.security_groups()[0]
        .ip_permissions()
        .iter()
        .filter(|p| p.from_port() == Some(2049))
        .collect();
    let cidrs = nfs
        .iter()
        .flat_map(|p| {
            p.ip_ranges()
                .iter()
                .filter_map(|r| r.cidr_ip().map(str::to_owned))
        })
        .collect();
    let groups = nfs
        .iter()
        .flat_map(|p| {
            p.user_id_group_pairs()
                .iter()
                .filter_map(|g| g.group_id().map(str::to_owned))
        })
        .collect();
    (cidrs, groups)
}

async fn deleted<M: Clone + kube::Resource, C: ExternalClient<M>>(client: &C, mr: &M) {
    let mut deleting = mr.clone();
    deleting.meta_mut().deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    for _ in 0..10 {
        let seen = client.observe(&deleting).await.unwrap();
        if !seen.exists {
            return;
        }
        if !seen.busy {
            match client.delete(&deleting).await {
                Ok(()) | Err(ExternalError::Waiting(_)) => {}
                Err(e) => panic!("{e}"),
            }
        }
    }
    panic!("delete did not finish");
}

#[tokio::test]
async fn the_file_system_admits_nfs_only_from_the_network_group_and_keeps_it_that_way() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let cache = cache(&moto).await;
    let ec2 = aws(&cache).await.ec2;
    let net = network_mr("demo", &["us-east-1a", "us-east-1b"]);
    let network = NetworkConnector { cache: cache.clone() }
        .connect(&net)
        .await
        .unwrap();
    network.create(&net).await.unwrap();
    let at = network.observe(&net).await.unwrap().at_provider;
    let nodes = at.security_group_id.clone().unwrap();
    let private: Vec<String> = at.private_subnets.iter().map(|s| s.id.clone()).collect();

    let mut mr = fs_mr("demo", private);
    mr.spec.for_provider.nfs_security_group_ids = vec![nodes.clone()];
    let fs = FileSystemConnector { cache: cache.clone() }
        .connect(&mr)
        .await
        .unwrap();
    fs.create(&mr).await.unwrap();
    let seen = fs.observe(&mr).await.unwrap();
    assert!(seen.up_to_date, "{seen:?}");
    let group = seen.at_provider.security_group_id.clone().unwrap();
    assert_eq!(nfs_sources(&ec2, &group).await, (vec![], vec![nodes.clone()]));

    // Someone revokes the nodes' access: Observe sees it, Update puts it back.
    ec2.revoke_security_group_ingress()
        .group_id(&group)
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(2049)
                .to_port(2049)
                .user_id_group_pairs(UserIdGroupPair::builder().group_id(&nodes).build())
                .build(),
        )
        .send()
        .await
        .unwrap();
    let drifted = fs.observe(&mr).await.unwrap();
    assert!(!drifted.up_to_date);
    fs.update(&mr, &drifted.at_provider).await.unwrap();
    assert!(fs.observe(&mr).await.unwrap().up_to_date);
    assert_eq!(nfs_sources(&ec2, &group).await, (vec![], vec![nodes.clone()]));

    // A spec naming no group falls back to the VPC's CIDR, and the group source is revoked.
    let mut open = mr.clone();
    open.spec.for_provider.nfs_security_group_ids.clear();
    let drifted = fs.observe(&open).await.unwrap();
    assert!(!drifted.up_to_date);
    fs.update(&open, &drifted.at_provider).await.unwrap();
    assert!(fs.observe(&open).await.unwrap().up_to_date);
    assert_eq!(
        nfs_sources(&ec2, &group).await,
        (vec!["10.0.0.0/16".to_owned()], vec![])
    );

    // A group that does not exist is refused naming the field.
    let mut bad = mr.clone();
    bad.spec.for_provider.nfs_security_group_ids = vec!["sg-0000000000000000f".into()];
    let drifted = fs.observe(&bad).await.unwrap();
    let err = fs.update(&bad, &drifted.at_provider).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.starts_with("spec.forProvider.nfsSecurityGroupIds")),
        "{err}"
    );

    // The file system first (its rule refers to the nodes' group), then the network: no group is left.
    deleted(&fs, &mr).await;
    deleted(&network, &net).await;
    assert_eq!(modelplane_groups(&ec2).await, 0);
    let left = ec2.describe_security_groups().send().await.unwrap();
    assert!(
        left.security_groups()
            .iter()
            .all(|g| g.group_name() == Some("default")),
        "{:?}",
        left.security_groups()
    );
}
