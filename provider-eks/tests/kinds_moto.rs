//! ExternalClients for the kinds a stock cluster needs (Role, FileSystem, Addon, PodIdentityAssociation,
//! Network) against a real moto server, with kube-fake-client holding the ProviderConfig and its credentials.
//! moto has no EKS add-on or pod-identity API; for those the same process serves a small stand-in
//! (`tests/eks_standin.py`, written from the AWS API reference) in front of moto.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

#[path = "kinds_moto/addon.rs"]
mod addon;
#[path = "kinds_moto/events.rs"]
mod events;
#[path = "kinds_moto/file_system.rs"]
mod file_system;
#[path = "kinds_moto/file_system_polls.rs"]
mod file_system_polls;
#[path = "kinds_moto/network.rs"]
mod network;
#[path = "kinds_moto/network_polls.rs"]
mod network_polls;
#[path = "kinds_moto/role.rs"]
mod role;
#[path = "kinds_moto/security_groups.rs"]
mod security_groups;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Resource;
use kube::api::ObjectMeta;
use modelplane_eks_api::*;
use modelplane_provider_eks::eks::clients::{AwsClients, ClientCache};
use modelplane_provider_eks::managed::annotations::EXTERNAL_NAME;
use support::{MOTO_CREDENTIALS, Peer};
use tokio::sync::Mutex;

pub const NS: &str = "team-a";
pub const REGION: &str = "us-east-1";

/// One moto (with the EKS stand-in) for this test binary; tests take turns and reset it first.
static MOTO: OnceLock<Mutex<Peer>> = OnceLock::new();

pub fn moto() -> &'static Mutex<Peer> {
    MOTO.get_or_init(|| Mutex::new(support::standin::start_moto_with_eks_standin()))
}

pub fn provider_config_ref() -> ProviderConfigReference {
    ProviderConfigReference {
        kind: "ProviderConfig".into(),
        name: "moto".into(),
    }
}

pub fn resource_spec() -> ResourceSpec {
    ResourceSpec::with_provider_config(provider_config_ref())
}

/// A managed resource as the API server would hand it to the reconciler: namespaced, with a uid and the
/// external name the reconciler records before Create.
pub fn stamp<M: Resource>(mut mr: M, name: &str) -> M {
    let meta = mr.meta_mut();
    meta.namespace = Some(NS.into());
    meta.uid = Some(format!("uid-{name}"));
    meta.generation = Some(1);
    meta.annotations = Some([(EXTERNAL_NAME.to_string(), name.to_string())].into());
    mr
}

/// A restart that lost the external-name annotation: the reconciler writes the default (the object's name)
/// again before it observes.
pub fn lose_external_name<M: Resource + Clone>(mr: &M) -> M {
    let mut copy = mr.clone();
    copy.meta_mut().annotations = None;
    copy
}

/// The ProviderConfig `moto` and its credentials Secret, in [`NS`].
pub fn provider_config(moto: &Peer) -> (ProviderConfig, Secret) {
    provider_config_at(moto.url())
}

/// The same, reaching AWS at `endpoint` (a fault proxy in front of moto, say).
pub fn provider_config_at(endpoint: String) -> (ProviderConfig, Secret) {
    let mut pc = ProviderConfig::new(
        "moto",
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
            endpoint: Some(endpoint),
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
    (pc, secret)
}

pub async fn cache(moto: &Peer) -> Arc<ClientCache> {
    cache_at(moto.url()).await
}

pub async fn cache_at(endpoint: String) -> Arc<ClientCache> {
    let (pc, secret) = provider_config_at(endpoint);
    let kube = kube_fake_client::ClientBuilder::new()
        .with_resource::<ProviderConfig>()
        .with_object(pc)
        .with_object(secret)
        .build()
        .await
        .unwrap();
    Arc::new(ClientCache::new(kube))
}

/// Raw AWS clients on the same moto, for arranging and checking what the clients under test did.
pub async fn aws(cache: &ClientCache) -> AwsClients {
    cache.clients(&provider_config_ref(), NS, REGION).await.unwrap()
}

/// The status the reconciler leaves after a successful poll at generation 1: `at` recorded, Ready and Synced.
pub fn steady_status<O: Default>(at: O) -> ResourceStatus<O> {
    let condition = |type_: &str| Condition {
        type_: type_.into(),
        status: ConditionStatus::True,
        reason: "Available".into(),
        message: None,
        last_transition_time: k8s_openapi::jiff::Timestamp::now().to_string(),
        observed_generation: Some(1),
    };
    ResourceStatus {
        at_provider: at,
        conditions: vec![condition("Ready"), condition("Synced")],
        observed_generation: Some(1),
    }
}
