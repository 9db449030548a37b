//! What a Network's poll costs, counted at a fault proxy in front of moto: a steady network (in sync, Ready,
//! spec unchanged, described in full within the window) is one EC2 call; a spec change or the end of the window
//! brings the full describe back, which finds a part removed outside the provider so Update makes it again.
//! (moto keeps the tags of deleted resources, so the one call alone cannot notice a deletion here; on EC2 it
//! does.)

use modelplane_eks_api::*;
use modelplane_provider_eks::eks::full_look;
use modelplane_provider_eks::eks::network::NetworkConnector;
use modelplane_provider_eks::managed::external::ExternalClient;
use modelplane_provider_eks::managed::reconciler::Connector;

use super::network::network_mr;
use super::support::proxy::FaultProxy;
use super::{NS, cache_at, moto, steady_status};

/// `mr` as the reconciler leaves it after a successful poll.
fn steady(mr: &Network, at: NetworkObservation) -> Network {
    let mut steady = mr.clone();
    steady.status = Some(steady_status(at));
    steady
}

#[tokio::test]
async fn a_steady_network_poll_is_one_call_and_a_part_removed_outside_is_still_noticed() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let proxy = FaultProxy::start(moto.port).await;
    let cache = cache_at(proxy.url()).await;
    let mr = network_mr("polled", &["us-east-1a", "us-east-1b"]);
    let client = NetworkConnector { cache: cache.clone() }
        .connect(&mr)
        .await
        .unwrap();
    client.create(&mr).await.unwrap();
    let full = client.observe(&mr).await.unwrap();
    assert!(full.up_to_date, "{full:?}");
    let mr = steady(&mr, full.at_provider.clone());

    let before = proxy.requests().len();
    let polled = client.observe(&mr).await.unwrap();
    let calls: Vec<String> = proxy.requests()[before..].to_vec();
    assert_eq!(calls, vec!["EC2 DescribeTags".to_owned()]);
    assert!(polled.up_to_date && polled.exists);
    assert_eq!(polled.at_provider, full.at_provider);

    // The cluster's security group is deleted behind the provider's back; once the window has passed (or the
    // process restarted), the full describe names it missing and Update makes it again.
    let ec2 = super::aws(&cache).await.ec2;
    let group = full.at_provider.security_group_id.clone().unwrap();
    ec2.delete_security_group().group_id(&group).send().await.unwrap();
    full_look::NETWORK.forget(&format!("{NS}/polled"));
    let before = proxy.requests().len();
    let drifted = client.observe(&mr).await.unwrap();
    let calls = proxy.requests().len() - before;
    assert!(!drifted.up_to_date, "{drifted:?}");
    assert_eq!(drifted.at_provider.security_group_id, None);
    assert_eq!(calls, 7, "the seven describes of the full look");
    client.update(&mr, &drifted.at_provider).await.unwrap();
    let repaired = client.observe(&mr).await.unwrap();
    assert!(repaired.up_to_date, "{repaired:?}");
    assert!(repaired.at_provider.security_group_id.is_some());

    // A network that is not steady (its spec changed: a new generation) always gets the full look.
    let mut changed = steady(&mr, repaired.at_provider.clone());
    changed.metadata.generation = Some(2);
    let before = proxy.requests().len();
    client.observe(&changed).await.unwrap();
    assert_eq!(proxy.requests().len() - before, 7);
}

/// CreateVpc takes no idempotency token: when its answer is lost the SDK must not send it again (that made a
/// second VPC on a loaded machine); the reconcile fails, and the next one finds the VPC by its tags.
#[tokio::test]
async fn a_lost_create_vpc_answer_is_not_retried_into_a_second_vpc() {
    use super::support::proxy::Fault;
    use modelplane_provider_eks::managed::external::ExternalError;
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let proxy = FaultProxy::start(moto.port).await;
    let cache = cache_at(proxy.url()).await;
    let mr = network_mr("lost", &["us-east-1a", "us-east-1b"]);
    let client = NetworkConnector { cache: cache.clone() }
        .connect(&mr)
        .await
        .unwrap();
    proxy.inject("CreateVpc", &[Fault::Lost]);
    let err = client.create(&mr).await.unwrap_err();
    assert!(matches!(err, ExternalError::Transient(_)), "{err}");
    assert_eq!(proxy.count("EC2 CreateVpc"), 1);
    let partial = client.observe(&mr).await.unwrap();
    assert!(partial.exists && !partial.up_to_date, "{partial:?}");
    client.update(&mr, &partial.at_provider).await.unwrap();
    assert_eq!(proxy.count("EC2 CreateVpc"), 1);
    let ec2 = super::aws(&cache).await.ec2;
    let vpcs = ec2.describe_vpcs().send().await.unwrap();
    let ours = vpcs
        .vpcs()
        .iter()
        .filter(|v| v.tags().iter().any(|t| t.value() == Some(&format!("{NS}/lost"))))
        .count();
    assert_eq!(ours, 1);
}
