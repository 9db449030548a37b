//! Rate-limit buckets are per AWS account: ProviderConfigs of one account (resolved through STS, served by moto)
//! share them, and a role ARN names its account without a call.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use modelplane_eks_api::*;
use modelplane_provider_eks::eks::clients::ClientCache;

const NS: &str = "team-a";
const REGION: &str = "us-east-1";
/// moto's account for any credentials.
const MOTO_ACCOUNT: &str = "123456789012";

fn config(name: &str, credentials: Credentials, endpoint: &str) -> ProviderConfig {
    let mut pc = ProviderConfig::new(
        name,
        ProviderConfigSpec {
            credentials,
            endpoint: Some(endpoint.to_string()),
        },
    );
    pc.metadata.namespace = Some(NS.into());
    pc
}

fn reference(name: &str) -> ProviderConfigReference {
    ProviderConfigReference {
        kind: "ProviderConfig".into(),
        name: name.into(),
    }
}

#[tokio::test]
async fn provider_configs_of_one_account_share_its_buckets() {
    let moto = support::start_moto();
    let secret = support::credentials_secret(NS);
    let web_identity = Credentials {
        source: CredentialsSource::WebIdentity,
        secret_ref: None,
        role_arn: Some("arn:aws:iam::210987654321:role/provider".into()),
    };
    let kube = kube_fake_client::ClientBuilder::new()
        .with_resource::<ProviderConfig>()
        .with_object(config("team-one", support::secret_credentials(), &moto.url()))
        .with_object(config("team-two", support::secret_credentials(), &moto.url()))
        .with_object(config("other-account", web_identity, &moto.url()))
        .with_object(secret)
        .build()
        .await
        .unwrap();
    let cache = ClientCache::new(kube);

    let one = cache.clients(&reference("team-one"), NS, REGION).await.unwrap();
    let two = cache.clients(&reference("team-two"), NS, REGION).await.unwrap();
    let other = cache
        .clients(&reference("other-account"), NS, REGION)
        .await
        .unwrap();
    assert_eq!(one.account, MOTO_ACCOUNT);
    assert_eq!(two.account, MOTO_ACCOUNT);
    assert_eq!(other.account, "210987654321");

    one.eks.list_clusters().send().await.unwrap();
    two.eks.list_clusters().send().await.unwrap();
    let keys = cache.throttle().keys();
    assert_eq!(
        keys,
        vec![(
            MOTO_ACCOUNT.to_string(),
            REGION.to_string(),
            "EKS:ListClusters".to_string()
        )],
        "both ProviderConfigs' calls went through one bucket"
    );
}

/// A call whose turn at the rate limit would come after the attempt timeout is not queued: it fails at once as
/// Deferred (so the reconciler requeues the resource for later), and nothing reaches AWS. The bucket refills one
/// token in 1,000 s, so the second call's turn is far past the timeout however long the first call took on a
/// loaded machine (at one token in 10 s, a first call slower than 2 s left a turn inside the timeout and the
/// second call was queued instead: the test failed in a cold CI run). A queued call would wait out its operation
/// timeout and fail as a timeout, not as Deferred, so the variant alone shows it was not queued.
#[tokio::test]
async fn a_call_that_would_wait_past_the_attempt_timeout_is_deferred_not_queued() {
    use modelplane_provider_eks::eks::errors::classify;
    use modelplane_provider_eks::eks::throttle::{Limits, Rate};
    use modelplane_provider_eks::managed::external::ExternalError;
    let moto = support::start_moto();
    let slow = Rate {
        per_second: 0.001,
        burst: 1.0,
    };
    let limits = Limits {
        ec2_read: slow,
        ..Limits::default()
    };
    let kube = kube_fake_client::ClientBuilder::new()
        .with_resource::<ProviderConfig>()
        .with_object(config("slow", support::secret_credentials(), &moto.url()))
        .with_object(support::credentials_secret(NS))
        .build()
        .await
        .unwrap();
    let cache = ClientCache::with_limits(kube, limits);
    let ec2 = cache.clients(&reference("slow"), NS, REGION).await.unwrap().ec2;
    ec2.describe_vpcs().send().await.unwrap();
    let err = ec2.describe_vpcs().send().await.unwrap_err();
    let classified = classify("cannot describe VPCs", &err);
    assert!(
        matches!(classified, ExternalError::Deferred(wait) if wait > std::time::Duration::from_secs(8)),
        "{classified:?}"
    );
}
