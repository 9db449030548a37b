//! Whether a cluster takes replicas, keeps the ones it runs and carries traffic: its `spec.scheduling` (a cordon,
//! the grace period) and its `status.reachability` (whether Modelplane reaches its API server, and since when).
//! Both composers that care read it from here: an InferenceCluster reports it, and a ModelDeployment places, keeps
//! and routes its replicas by it (docs/scheduling.md, "Losing a cluster").

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// The grace period when `spec.scheduling.evacuateAfterSeconds` is not set: Kubernetes' own default for evicting
/// pods from an unreachable node.
pub const DEFAULT_EVACUATE_AFTER_SECONDS: u32 = 300;
/// The shortest grace period the XRD admits: below it a slow poll of the cluster reads as an outage.
pub const MIN_EVACUATE_AFTER_SECONDS: u32 = 30;

/// `spec.scheduling` of an InferenceCluster.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scheduling {
    /// Takes no new replicas, and the replicas it runs move elsewhere make-before-break.
    #[serde(default)]
    pub cordoned: bool,
    /// How long the cluster may be unreachable before its replicas are placed on other clusters.
    #[serde(default = "default_evacuate_after")]
    pub evacuate_after_seconds: u32,
}

impl Default for Scheduling {
    fn default() -> Self {
        Self {
            cordoned: false,
            evacuate_after_seconds: DEFAULT_EVACUATE_AFTER_SECONDS,
        }
    }
}

fn default_evacuate_after() -> u32 {
    DEFAULT_EVACUATE_AFTER_SECONDS
}

impl Scheduling {
    pub fn grace(&self) -> SignedDuration {
        SignedDuration::from_secs(i64::from(self.evacuate_after_seconds))
    }
}

/// `status.reachability`: whether the cluster's API server answered Modelplane's last look.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reachability {
    pub reachable: bool,
    /// When it became unreachable; once reachable again, when it came back. Absent on a cluster never lost, and on
    /// one never reached yet (its credentials wrong from the start, or not ready yet): it has nothing to evacuate,
    /// and its first answer is no return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    /// What the provider said when it could not reach the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What the last look at the cluster found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Nothing has looked yet (the probe is new, or the cluster is not installable yet).
    NotYet,
    Answered,
    Failed(String),
}

impl Reachability {
    /// The reachability after `probe` at `now`, from the one reported before. Times move only on a change, so a
    /// cluster that stays unreachable keeps the time it was lost.
    pub fn next(previous: Option<&Reachability>, probe: Probe, now: Timestamp) -> Option<Reachability> {
        let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
        match (previous, probe) {
            (previous, Probe::NotYet) => previous.cloned(),
            (Some(p), Probe::Answered) if p.reachable => Some(p.clone()),
            (Some(p), Probe::Answered) if p.since.is_some() => Some(Reachability {
                reachable: true,
                since: Some(now),
                message: None,
            }),
            (_, Probe::Answered) => Some(Reachability {
                reachable: true,
                since: None,
                message: None,
            }),
            (Some(p), Probe::Failed(message)) if !p.reachable => Some(Reachability {
                message: Some(message),
                ..p.clone()
            }),
            (Some(_), Probe::Failed(message)) => Some(Reachability {
                reachable: false,
                since: Some(now),
                message: Some(message),
            }),
            (None, Probe::Failed(message)) => Some(Reachability {
                reachable: false,
                since: None,
                message: Some(message),
            }),
        }
    }
}

/// What a cluster does with replicas now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Takes new replicas, keeps its own, carries their traffic.
    Open,
    /// Back from an outage less than a grace period ago: keeps and routes the replicas still there, takes no new
    /// ones until `until`, so a flapping cluster does not draw replicas back and forth.
    Returning { until: Timestamp },
    /// Cordoned by hand: takes no new replicas; its replicas move elsewhere, serving until their successors do.
    Cordoned,
    /// Not reached since `since`: its replicas carry no traffic and stay placed until `evacuate_at`.
    Unreachable {
        since: Timestamp,
        evacuate_at: Timestamp,
    },
    /// Never reached yet: takes nothing, and has nothing to evacuate.
    NeverReached,
    /// Not reached for longer than its grace period: its replicas are placed elsewhere.
    Evacuating {
        since: Timestamp,
        evacuated_at: Timestamp,
    },
}

impl Availability {
    pub fn of(scheduling: &Scheduling, reachability: Option<&Reachability>, now: Timestamp) -> Self {
        let grace = scheduling.grace();
        let after = |since: Timestamp| since.checked_add(grace).unwrap_or(Timestamp::MAX);
        match reachability {
            Some(Reachability {
                reachable: false,
                since: None,
                ..
            }) => Self::NeverReached,
            Some(Reachability {
                reachable: false,
                since: Some(since),
                ..
            }) => {
                let since = *since;
                let evacuate_at = after(since);
                if now < evacuate_at {
                    Self::Unreachable { since, evacuate_at }
                } else {
                    Self::Evacuating {
                        since,
                        evacuated_at: evacuate_at,
                    }
                }
            }
            _ if scheduling.cordoned => Self::Cordoned,
            Some(Reachability {
                since: Some(since), ..
            }) if now < after(*since) => Self::Returning { until: after(*since) },
            _ => Self::Open,
        }
    }

    /// Whether a new replica may be placed here.
    pub fn takes_new(&self) -> bool {
        *self == Self::Open
    }

    /// Whether a replica placed here stays placed here.
    pub fn keeps_replicas(&self) -> bool {
        matches!(
            self,
            Self::Open | Self::Returning { .. } | Self::Unreachable { .. } | Self::NeverReached
        )
    }

    /// Whether callers may be sent to the replicas here.
    pub fn routes(&self) -> bool {
        !matches!(
            self,
            Self::Unreachable { .. } | Self::Evacuating { .. } | Self::NeverReached
        )
    }

    /// When this state ends on its own (a grace period running out), if it does.
    pub fn changes_at(&self) -> Option<Timestamp> {
        match self {
            Self::Returning { until } => Some(*until),
            Self::Unreachable { evacuate_at, .. } => Some(*evacuate_at),
            Self::Open | Self::Cordoned | Self::Evacuating { .. } | Self::NeverReached => None,
        }
    }

    /// Why the cluster takes no new replica, or the state of its replicas, in a user's words; None when Open.
    pub fn describe(&self) -> Option<String> {
        match self {
            Self::Open => None,
            Self::Returning { until } => Some(format!(
                "reachable again; takes new replicas from {until} (one grace period after it came back)"
            )),
            Self::Cordoned => Some("cordoned (spec.scheduling.cordoned)".into()),
            Self::NeverReached => Some("not reached yet through its provider config".into()),
            Self::Unreachable { since, evacuate_at } => Some(format!(
                "unreachable since {since}; its replicas take no traffic, and are placed elsewhere from \
                 {evacuate_at}"
            )),
            Self::Evacuating { since, evacuated_at } => Some(format!(
                "unreachable since {since}; its replicas have been placed elsewhere since {evacuated_at}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn failed() -> Probe {
        Probe::Failed("connection refused".into())
    }

    #[test]
    fn a_cluster_never_reached_is_not_lost_and_its_first_answer_is_no_return() {
        let never = Reachability::next(None, failed(), at(0)).unwrap();
        assert_eq!((never.reachable, never.since), (false, None));
        let state = Availability::of(&Scheduling::default(), Some(&never), at(10_000));
        assert_eq!(
            state,
            Availability::NeverReached,
            "nothing to evacuate, however long"
        );
        assert!(!state.takes_new() && !state.routes());
        let first = Reachability::next(Some(&never), Probe::Answered, at(20)).unwrap();
        assert_eq!((first.reachable, first.since), (true, None));
        assert_eq!(
            Availability::of(&Scheduling::default(), Some(&first), at(21)),
            Availability::Open
        );
    }

    #[test]
    fn a_lost_cluster_keeps_the_time_it_was_lost_and_a_returned_one_the_time_it_came_back() {
        let first = Reachability::next(None, Probe::Answered, at(0)).unwrap();
        assert_eq!(
            (first.reachable, first.since),
            (true, None),
            "never lost: no time"
        );
        let lost = Reachability::next(Some(&first), failed(), at(10)).unwrap();
        assert_eq!((lost.reachable, lost.since), (false, Some(at(10))));
        let still = Reachability::next(Some(&lost), Probe::Failed("timeout".into()), at(70)).unwrap();
        assert_eq!(still.since, Some(at(10)), "the outage keeps its start");
        assert_eq!(
            still.message.as_deref(),
            Some("timeout"),
            "and says what failed last"
        );
        let back = Reachability::next(Some(&still), Probe::Answered, at(90)).unwrap();
        assert_eq!(
            (back.reachable, back.since, back.message.as_deref()),
            (true, Some(at(90)), None)
        );
        assert_eq!(Reachability::next(Some(&back), Probe::NotYet, at(95)), Some(back));
        assert_eq!(Reachability::next(None, Probe::NotYet, at(95)), None);
    }

    #[test]
    fn a_cluster_is_evacuated_only_after_its_grace_period_and_takes_nothing_new_until_one_after_it_returns() {
        let scheduling = Scheduling::default();
        let reached = Reachability::next(None, Probe::Answered, at(-10));
        let lost = Reachability::next(reached.as_ref(), failed(), at(0)).unwrap();
        let state = Availability::of(&scheduling, Some(&lost), at(299));
        assert!(matches!(state, Availability::Unreachable { .. }));
        assert!(state.keeps_replicas() && !state.routes() && !state.takes_new());
        assert_eq!(state.changes_at(), Some(at(300)));
        let state = Availability::of(&scheduling, Some(&lost), at(300));
        assert!(matches!(state, Availability::Evacuating { .. }));
        assert!(!state.keeps_replicas() && !state.routes());
        let back = Reachability::next(Some(&lost), Probe::Answered, at(400)).unwrap();
        let state = Availability::of(&scheduling, Some(&back), at(500));
        assert_eq!(state, Availability::Returning { until: at(700) });
        assert!(state.keeps_replicas() && state.routes() && !state.takes_new());
        assert_eq!(
            Availability::of(&scheduling, Some(&back), at(700)),
            Availability::Open
        );
    }

    #[test]
    fn a_cordon_drains_but_routes_and_an_outage_outranks_it() {
        let cordoned = Scheduling {
            cordoned: true,
            ..Scheduling::default()
        };
        let state = Availability::of(&cordoned, None, at(0));
        assert_eq!(state, Availability::Cordoned);
        assert!(!state.takes_new() && !state.keeps_replicas() && state.routes());
        let reached = Reachability::next(None, Probe::Answered, at(-10));
        let lost = Reachability::next(reached.as_ref(), failed(), at(0)).unwrap();
        assert!(!Availability::of(&cordoned, Some(&lost), at(1)).routes());
    }
}
