//! Leader election on a `coordination.k8s.io/v1` Lease, so two replicas never both act on AWS. Every write
//! carries the resourceVersion it read: of two replicas racing for an expired lease, one gets 409 and stays a
//! follower. A leader that cannot renew in time exits, and its successor waits a full lease duration first.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

pub const LEASE_NAME: &str = "modelplane-provider-eks";
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
pub const RENEW_EVERY: Duration = Duration::from_secs(5);

/// Whether `me` may hold the lease now: it is free, ours, or its holder stopped renewing.
pub fn may_hold(spec: Option<&LeaseSpec>, me: &str, now: Timestamp) -> bool {
    let Some(spec) = spec else { return true };
    match spec.holder_identity.as_deref() {
        None | Some("") => true,
        Some(holder) if holder == me => true,
        Some(_) => {
            let seconds = i64::from(spec.lease_duration_seconds.unwrap_or(15));
            let expiry = spec
                .renew_time
                .as_ref()
                .and_then(|t| t.0.checked_add(SignedDuration::from_secs(seconds)).ok());
            expiry.is_none_or(|expiry| expiry < now)
        }
    }
}

pub struct Elector {
    api: Api<Lease>,
    identity: String,
}

impl Elector {
    pub fn new(kube: kube::Client, namespace: &str, identity: &str) -> Self {
        Self {
            api: Api::namespaced(kube, namespace),
            identity: identity.to_string(),
        }
    }

    /// One attempt to take or renew the lease; true when we hold it afterwards.
    pub async fn try_hold(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let seconds = i32::try_from(LEASE_DURATION.as_secs()).unwrap_or(15);
        let Some(lease) = self.api.get_opt(LEASE_NAME).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(LEASE_NAME.into()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        if !may_hold(lease.spec.as_ref(), &self.identity, now) {
            return Ok(false);
        }
        let ours =
            lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(self.identity.as_str());
        let acquired = if ours {
            lease.spec.as_ref().and_then(|s| s.acquire_time.clone())
        } else {
            Some(MicroTime(now))
        };
        let patch = json!({
            "metadata": { "resourceVersion": lease.metadata.resource_version },
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": seconds,
                "acquireTime": acquired,
                "renewTime": MicroTime(now),
            },
        });
        match self
            .api
            .patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Waits until this replica leads.
    pub async fn acquire(&self) {
        loop {
            match self.try_hold().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "cannot read or write the leader Lease"),
            }
            tokio::time::sleep(RENEW_EVERY).await;
        }
    }

    /// Renews until a renewal fails for a whole lease duration; returns then, and the caller must stop acting.
    pub async fn keep(&self) {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(RENEW_EVERY).await;
            match self.try_hold().await {
                Ok(true) => last_renewed = tokio::time::Instant::now(),
                Ok(false) => return,
                Err(e) => tracing::warn!(error = %e, "cannot renew the leader Lease"),
            }
            if last_renewed.elapsed() >= LEASE_DURATION {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn held_by(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(at(renewed))),
            ..Default::default()
        }
    }

    #[test]
    fn a_missing_or_free_lease_may_be_taken() {
        assert!(may_hold(None, "a", at(0)));
        assert!(may_hold(Some(&LeaseSpec::default()), "a", at(0)));
    }

    #[test]
    fn a_live_lease_of_another_replica_is_respected() {
        assert!(!may_hold(Some(&held_by("b", 0)), "a", at(10)));
    }

    #[test]
    fn an_expired_lease_of_another_replica_may_be_taken() {
        assert!(may_hold(Some(&held_by("b", 0)), "a", at(16)));
    }

    #[test]
    fn the_holder_may_always_renew() {
        assert!(may_hold(Some(&held_by("a", 0)), "a", at(100)));
    }
}
