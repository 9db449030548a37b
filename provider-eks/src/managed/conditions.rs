//! Crossplane's `Ready` and `Synced` conditions with their standard reasons (crossplane `apis/core/v2`).

use k8s_openapi::jiff::Timestamp;
use modelplane_eks_api::{Condition, ConditionStatus};

use super::annotations::timestamp;

pub const READY: &str = "Ready";
pub const SYNCED: &str = "Synced";

/// What the external resource is doing, as far as the `Ready` condition is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Available,
    Creating,
    Deleting,
    /// Deletion was asked for but waits on something (a Cluster on its node groups); the text says what.
    WaitingToDelete(String),
    /// Exists but cannot be used (updating, failed, degraded); the text says why.
    Unavailable(String),
}

impl Readiness {
    fn condition(&self) -> (ConditionStatus, &'static str, Option<String>) {
        match self {
            Readiness::Available => (ConditionStatus::True, "Available", None),
            Readiness::Creating => (ConditionStatus::False, "Creating", None),
            Readiness::Deleting => (ConditionStatus::False, "Deleting", None),
            Readiness::WaitingToDelete(why) => (ConditionStatus::False, "Deleting", Some(why.clone())),
            Readiness::Unavailable(why) => (ConditionStatus::False, "Unavailable", Some(why.clone())),
        }
    }
}

/// The outcome of one reconcile, for the `Synced` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Error(String),
    Paused,
}

impl Outcome {
    fn condition(&self) -> (ConditionStatus, &'static str, Option<String>) {
        match self {
            Outcome::Success => (ConditionStatus::True, "ReconcileSuccess", None),
            Outcome::Error(message) => (ConditionStatus::False, "ReconcileError", Some(message.clone())),
            Outcome::Paused => (ConditionStatus::False, "ReconcilePaused", None),
        }
    }
}

/// Returns `existing` with the condition of `type_` replaced. The transition time only moves when the status
/// changes, so a steady resource writes byte-identical conditions and the status patch is a no-op.
fn set(
    existing: &[Condition],
    type_: &str,
    (status, reason, message): (ConditionStatus, &'static str, Option<String>),
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let previous = existing.iter().find(|c| c.type_ == type_);
    let last_transition_time = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => timestamp(now),
    };
    let updated = Condition {
        type_: type_.to_string(),
        status,
        reason: reason.to_string(),
        message,
        last_transition_time,
        observed_generation: generation,
    };
    let mut out: Vec<Condition> = existing.iter().filter(|c| c.type_ != type_).cloned().collect();
    out.push(updated);
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

pub fn set_ready(
    existing: &[Condition],
    ready: &Readiness,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    set(existing, READY, ready.condition(), generation, now)
}

pub fn set_synced(
    existing: &[Condition],
    outcome: &Outcome,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    set(existing, SYNCED, outcome.condition(), generation, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    #[test]
    fn an_unchanged_status_keeps_its_transition_time() {
        let first = set_ready(&[], &Readiness::Available, Some(1), at(0));
        let again = set_ready(&first, &Readiness::Available, Some(2), at(60));
        assert_eq!(again[0].last_transition_time, first[0].last_transition_time);
        assert_eq!(again[0].observed_generation, Some(2));
    }

    #[test]
    fn a_changed_status_moves_the_transition_time_and_keeps_other_types() {
        let synced = set_synced(&[], &Outcome::Success, None, at(0));
        let creating = set_ready(&synced, &Readiness::Creating, None, at(0));
        let ready = set_ready(&creating, &Readiness::Available, None, at(30));
        assert_eq!(ready.len(), 2);
        let r = ready.iter().find(|c| c.type_ == READY).unwrap();
        assert_eq!(
            (r.status, r.reason.as_str()),
            (ConditionStatus::True, "Available")
        );
        assert_eq!(r.last_transition_time, timestamp(at(30)));
    }

    #[test]
    fn a_reconcile_error_carries_its_message() {
        let c = set_synced(
            &[],
            &Outcome::Error("cannot create EKS cluster".into()),
            None,
            at(0),
        );
        assert_eq!(c[0].reason, "ReconcileError");
        assert_eq!(c[0].message.as_deref(), Some("cannot create EKS cluster"));
    }
}
