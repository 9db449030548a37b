//! The fleet's serving figures, as the ModelDeployment composer reads them.
//!
//! A background task ([`poll`]) asks the fleet's Prometheus for every deployment's figures at once, a fixed set of
//! queries per interval however many deployments there are, and publishes the answer here as one [`Snapshot`].
//! A call reads the snapshot and never waits on the network: composing stays a function of the request and of
//! the last sample, and Prometheus sees the same load from a fleet of ten deployments or ten thousand.
//!
//! Why in the function and not beside it (an exporter writing objects the function requires, or an Observe-only
//! HTTP resource per deployment): both would add an object per deployment and the RBAC to write it into every
//! tenant namespace, and the provider variant one query per deployment per poll. The figures need no durability
//! of their own: a restarted function has them again after one interval.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, PoisonError, RwLock},
    time::{Duration, SystemTime},
};

use crate::api::model_deployment::ServingFigures;

pub mod poll;

/// One deployment's figures: for all of it, and per replica index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeploymentFigures {
    pub total: ServingFigures,
    pub replicas: BTreeMap<u32, ServingFigures>,
}

/// What the last poll of the fleet's metrics found.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The Prometheus query API the figures come from.
    pub source: String,
    /// When the last successful sample was taken.
    pub sampled_at: Option<SystemTime>,
    /// Why the last poll failed, if it did (the figures are then the last good sample's).
    pub error: Option<String>,
    /// Figures older than this are not shown: a Prometheus that stopped answering must not leave a deployment
    /// looking healthy on last hour's figures.
    pub stale_after: Duration,
    /// By `(namespace, deployment)`.
    pub deployments: HashMap<(String, String), DeploymentFigures>,
}

/// What the composer learns about one deployment.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// The function reads no fleet metrics.
    Off,
    /// No sample to trust: none yet, or the last one is stale. `why` says which, with the source's error.
    Unavailable { source: String, why: String },
    /// The fleet answers, and nothing of this deployment is in it.
    NotReported { source: String },
    /// The deployment's figures, sampled at `sampled_at` (RFC 3339).
    Found {
        sampled_at: String,
        figures: DeploymentFigures,
    },
}

static CURRENT: RwLock<Option<Arc<Snapshot>>> = RwLock::new(None);

/// Makes `snapshot` what every later call reads.
pub fn publish(snapshot: Snapshot) {
    *CURRENT.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(snapshot));
}

/// What the last snapshot says of `namespace/name` at `now`.
pub fn reading(namespace: &str, name: &str, now: SystemTime) -> Reading {
    let current = CURRENT.read().unwrap_or_else(PoisonError::into_inner).clone();
    match current {
        None => Reading::Off,
        Some(snapshot) => snapshot.reading(namespace, name, now),
    }
}

impl Snapshot {
    pub fn reading(&self, namespace: &str, name: &str, now: SystemTime) -> Reading {
        let source = self.source.clone();
        let failure = self.error.as_deref().unwrap_or("no error");
        let Some(sampled_at) = self.sampled_at else {
            let why = format!("no sample from {source} yet ({failure})");
            return Reading::Unavailable { source, why };
        };
        let age = now.duration_since(sampled_at).unwrap_or_default();
        if age > self.stale_after {
            let why = format!(
                "the last sample from {source} is {}s old ({failure})",
                age.as_secs()
            );
            return Reading::Unavailable { source, why };
        }
        match self.deployments.get(&(namespace.to_owned(), name.to_owned())) {
            None => Reading::NotReported { source },
            Some(figures) => Reading::Found {
                sampled_at: rfc3339(sampled_at),
                figures: figures.clone(),
            },
        }
    }
}

/// `at` to the second, as Kubernetes writes times.
pub fn rfc3339(at: SystemTime) -> String {
    let seconds = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    jiff::Timestamp::from_second(i64::try_from(seconds).unwrap_or(i64::MAX))
        .map(|t| t.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(sampled_at: Option<SystemTime>, error: Option<&str>) -> Snapshot {
        let mut deployments = HashMap::new();
        deployments.insert(("ml".to_owned(), "qwen".to_owned()), DeploymentFigures::default());
        Snapshot {
            source: "http://prom:9090".into(),
            sampled_at,
            error: error.map(str::to_owned),
            stale_after: Duration::from_secs(90),
            deployments,
        }
    }

    #[test]
    fn a_fresh_sample_finds_a_reported_deployment_and_says_when_one_is_not() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_000_000);
        let s = snapshot(Some(at), None);
        let now = at + Duration::from_secs(30);
        assert_eq!(
            s.reading("ml", "qwen", now),
            Reading::Found {
                sampled_at: "2026-05-28T20:26:40Z".into(),
                figures: DeploymentFigures::default()
            }
        );
        assert_eq!(
            s.reading("ml", "other", now),
            Reading::NotReported {
                source: "http://prom:9090".into()
            }
        );
    }

    #[test]
    fn no_sample_or_a_stale_one_is_unavailable_with_the_sources_error() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_000_000);
        let never = snapshot(None, Some("connection refused"));
        let Reading::Unavailable { why, .. } = never.reading("ml", "qwen", at) else {
            panic!("expected unavailable")
        };
        assert_eq!(why, "no sample from http://prom:9090 yet (connection refused)");

        let stale = snapshot(Some(at), Some("timed out"));
        let Reading::Unavailable { why, .. } = stale.reading("ml", "qwen", at + Duration::from_secs(91))
        else {
            panic!("expected unavailable")
        };
        assert_eq!(
            why,
            "the last sample from http://prom:9090 is 91s old (timed out)"
        );
    }
}
