//! What the kinds share: connecting with the spec's ProviderConfig, what the last Observe saw, and the tag that marks an AWS object as made for one managed resource. AWS objects whose IDs AWS picks (VPCs, subnets, gateways, file systems)
//! are found again by that tag, so a crash between Create and the next Observe adopts what was made instead of
//! making a second one.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use kube::{Resource, ResourceExt};
use modelplane_eks_api::ResourceSpec;

use super::clients::{AwsClients, ClientCache};
use super::errors::{DEPENDENCY_VIOLATION, gone_unless_held};
use super::external_name;
use crate::managed::external::ExternalError;

/// Tag key carrying `<namespace>/<external name>` of the managed resource an AWS object belongs to.
pub const OWNER_TAG: &str = "modelplane.ai/managed-resource";
/// Tag key carrying the managed resource's uid, for people reading the AWS console.
pub const UID_TAG: &str = "modelplane.ai/managed-resource-uid";
/// IAM is global; its SDK still wants a region to sign for.
pub const IAM_REGION: &str = "us-east-1";

/// The value of [`OWNER_TAG`] for `mr`: stable across restarts and lost answers, unique per namespace.
pub fn owner<M: Resource>(mr: &M) -> String {
    format!("{}/{}", mr.namespace().unwrap_or_default(), external_name(mr))
}

/// The EC2 filter for objects carrying `owner`'s ownership tag.
pub fn owned_by(owner: &str) -> aws_sdk_ec2::types::Filter {
    aws_sdk_ec2::types::Filter::builder()
        .name(format!("tag:{OWNER_TAG}"))
        .values(owner)
        .build()
}

/// The ownership tags (plus the spec's own) as (key, value) pairs.
pub fn owner_tags<M: Resource>(mr: &M, spec_tags: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut tags: Vec<(String, String)> = spec_tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    tags.push((OWNER_TAG.into(), owner(mr)));
    tags.push((UID_TAG.into(), mr.uid().unwrap_or_default()));
    tags
}

/// AWS clients for `mr`, through its ProviderConfig, in `region`.
pub async fn connect<M: Resource>(
    cache: &ClientCache,
    mr: &M,
    resource: &ResourceSpec,
    region: &str,
) -> Result<AwsClients, ExternalError> {
    if region.is_empty() {
        return Err(ExternalError::Rejected(
            "spec.forProvider.region: required".into(),
        ));
    }
    clients(cache, mr, resource, region).await
}

/// The same without checking the region first (a Cluster or NodePool leaves that to AWS, as it always has).
pub async fn clients<M: Resource>(
    cache: &ClientCache,
    mr: &M,
    resource: &ResourceSpec,
    region: &str,
) -> Result<AwsClients, ExternalError> {
    let namespace = mr.namespace().unwrap_or_default();
    cache
        .clients(&resource.provider_config_ref, &namespace, region)
        .await
}

/// An idempotency token for one part of `mr` (EC2 accepts at most 64 characters).
pub fn token<M: Resource>(mr: &M, part: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{}:{part}", mr.uid().unwrap_or_default()).as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The connector of a kind whose spec embeds [`ResourceSpec`]: AWS clients through the resource's
/// ProviderConfig, in the region `$region` names (with `$mr` bound to the resource), handed to `$client::new`.
/// A new kind is its `ExternalClient` and one line of this.
macro_rules! connector {
    ($name:ident, $kind:ty, $client:ty, $observation:ty, $mr:ident => $region:expr) => {
        pub struct $name {
            pub cache: std::sync::Arc<$crate::eks::clients::ClientCache>,
        }

        #[async_trait::async_trait]
        impl $crate::managed::reconciler::Connector<$kind> for $name {
            type Client = $client;
            type AtProvider = $observation;

            async fn connect(
                &self,
                $mr: &$kind,
            ) -> Result<$client, $crate::managed::external::ExternalError> {
                let region: &str = $region;
                let clients =
                    $crate::eks::owned::connect(&self.cache, $mr, &$mr.spec.resource, region).await?;
                Ok(<$client>::new(clients))
            }
        }
    };
}
pub(crate) use connector;

/// What the last Observe saw, kept for the Update that follows it in the same reconcile, so Update needs no
/// second round of reads.
pub struct LastSeen<T>(Mutex<Option<T>>);

impl<T> Default for LastSeen<T> {
    fn default() -> Self {
        Self(Mutex::new(None))
    }
}

impl<T: Clone> LastSeen<T> {
    pub fn keep(&self, seen: T) {
        *self.lock() = Some(seen);
    }

    /// What was kept, or None before the first Observe.
    pub fn get(&self) -> Option<T> {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, Option<T>> {
        // A panic elsewhere while holding the lock leaves a whole value behind: keep using it.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Deletes security group `group` (a network's or a file system's); Waiting, saying `held`, while something
/// still refers to it.
pub async fn delete_security_group(
    ec2: &aws_sdk_ec2::Client,
    group: &str,
    held: String,
) -> Result<(), ExternalError> {
    let deleted = ec2.delete_security_group().group_id(group).send().await;
    let codes = ["InvalidGroup.NotFound", DEPENDENCY_VIOLATION];
    gone_unless_held(
        deleted,
        codes,
        held,
        &format!("cannot delete security group {group}"),
    )
}
