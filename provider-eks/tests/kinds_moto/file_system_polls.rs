//! What a FileSystem's poll costs, counted at a fault proxy in front of moto: a steady file system (in sync,
//! Ready, spec unchanged, looked at in full within the window) is one DescribeFileSystems call, which still sees
//! a mount target or the file system itself deleted outside the provider; what it cannot see (a revoked NFS
//! source) waits for the full look (file system, mount targets, security group) after the window or a spec
//! change.

use aws_sdk_ec2::types::{IpPermission, IpRange};
use modelplane_eks_api::*;
use modelplane_provider_eks::eks::file_system::FileSystemConnector;
use modelplane_provider_eks::eks::full_look;
use modelplane_provider_eks::managed::external::ExternalClient;
use modelplane_provider_eks::managed::reconciler::Connector;

use super::file_system::{fs_mr, subnets};
use super::support::proxy::FaultProxy;
use super::{NS, aws, cache_at, moto, steady_status};

const DESCRIBE_FILE_SYSTEMS: &str = "GET /2015-02-01/file-systems";

/// `mr` as the reconciler leaves it after a successful poll.
fn steady(mr: &FileSystem, at: FileSystemObservation) -> FileSystem {
    let mut steady = mr.clone();
    steady.status = Some(steady_status(at));
    steady
}

#[tokio::test]
async fn a_steady_file_system_poll_is_one_call_that_still_sees_deletions() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let proxy = FaultProxy::start(moto.port).await;
    let cache = cache_at(proxy.url()).await;
    let aws = aws(&cache).await;
    let subnet_ids = subnets(&aws.ec2, &["us-east-1a", "us-east-1b"]).await;
    let mr = fs_mr("polled-fs", subnet_ids);
    let owner = format!("{NS}/polled-fs");
    let client = FileSystemConnector { cache: cache.clone() }
        .connect(&mr)
        .await
        .unwrap();
    client.create(&mr).await.unwrap();
    let full = client.observe(&mr).await.unwrap();
    assert!(
        full.up_to_date && full.at_provider.mount_targets.len() == 2,
        "{full:?}"
    );
    let calls_of = |observe_from: usize| proxy.requests()[observe_from..].to_vec();

    let mr = steady(&mr, full.at_provider.clone());
    let before = proxy.requests().len();
    let polled = client.observe(&mr).await.unwrap();
    assert_eq!(calls_of(before), vec![DESCRIBE_FILE_SYSTEMS.to_owned()]);
    assert!(polled.exists && polled.up_to_date);
    assert_eq!(polled.at_provider, full.at_provider);

    // A mount target deleted behind the provider's back shows in the file system's count: the same poll falls
    // back to the full look, and Update makes the mount target again.
    let gone = &full.at_provider.mount_targets[0];
    aws.efs
        .delete_mount_target()
        .mount_target_id(&gone.mount_target_id)
        .send()
        .await
        .unwrap();
    let before = proxy.requests().len();
    let drifted = client.observe(&mr).await.unwrap();
    assert!(!drifted.up_to_date, "{drifted:?}");
    assert_eq!(calls_of(before).len(), 3, "{:?}", calls_of(before));
    client.update(&mr, &drifted.at_provider).await.unwrap();
    // (The one call would pass now: the count is back, the new mount target's ID is what it cannot see.)
    full_look::FILE_SYSTEM.forget(&owner);
    let repaired = client.observe(&mr).await.unwrap();
    assert!(repaired.up_to_date, "{repaired:?}");
    assert_eq!(repaired.at_provider.mount_targets.len(), 2);
    let mr = steady(&mr, repaired.at_provider.clone());

    // The NFS rule revoked outside is what one call cannot see: the steady poll passes, and the full look once
    // the window has passed (or the process restarted) finds it, so Update opens NFS again.
    let group = repaired.at_provider.security_group_id.clone().unwrap();
    let nfs = IpPermission::builder()
        .ip_protocol("tcp")
        .from_port(2049)
        .to_port(2049)
        .ip_ranges(IpRange::builder().cidr_ip("10.1.0.0/16").build())
        .build();
    aws.ec2
        .revoke_security_group_ingress()
        .group_id(&group)
        .ip_permissions(nfs)
        .send()
        .await
        .unwrap();
    let before = proxy.requests().len();
    assert!(client.observe(&mr).await.unwrap().up_to_date);
    assert_eq!(calls_of(before), vec![DESCRIBE_FILE_SYSTEMS.to_owned()]);
    full_look::FILE_SYSTEM.forget(&owner);
    let before = proxy.requests().len();
    let revoked = client.observe(&mr).await.unwrap();
    assert!(!revoked.up_to_date, "{revoked:?}");
    assert_eq!(calls_of(before).len(), 3, "{:?}", calls_of(before));
    client.update(&mr, &revoked.at_provider).await.unwrap();
    full_look::FILE_SYSTEM.forget(&owner);
    assert!(client.observe(&mr).await.unwrap().up_to_date);

    // A file system whose spec changed (a new generation) always gets the full look.
    let mut changed = mr.clone();
    changed.metadata.generation = Some(2);
    let before = proxy.requests().len();
    client.observe(&changed).await.unwrap();
    assert_eq!(calls_of(before).len(), 3, "{:?}", calls_of(before));

    // The file system deleted outside the provider: the one call finds nothing.
    let id = full.at_provider.file_system_id.clone().unwrap();
    for m in aws
        .efs
        .describe_mount_targets()
        .file_system_id(&id)
        .send()
        .await
        .unwrap()
        .mount_targets()
    {
        aws.efs
            .delete_mount_target()
            .mount_target_id(m.mount_target_id())
            .send()
            .await
            .unwrap();
    }
    aws.efs
        .delete_file_system()
        .file_system_id(&id)
        .send()
        .await
        .unwrap();
    let before = proxy.requests().len();
    let missing = client.observe(&mr).await.unwrap();
    assert!(!missing.exists, "{missing:?}");
    assert_eq!(calls_of(before), vec![DESCRIBE_FILE_SYSTEMS.to_owned()]);
}
