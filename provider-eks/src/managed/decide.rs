//! The reconciler's decisions, without I/O, in two phases that mirror crossplane-runtime's loop:
//! [`before_observe`] looks only at the managed resource (pause, policies, orphaning); [`after_observe`] takes
//! what Observe found and picks the one step that comes next. Each phase returns its own type, so a step that
//! only makes sense before observing can never come out after it (and the reconciler needs no "impossible" arm).
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::annotations::CreationMarks;
use super::external::Observation;
use super::policy::Policies;

/// How long a freshly created resource may be missing from Describe before we create it again. AWS APIs are
/// eventually consistent; crossplane-runtime uses the same grace period.
pub const CREATION_GRACE: SignedDuration = SignedDuration::from_secs(30);

/// Shown on Synced when an Observe-only resource is missing.
pub const MISSING_AND_CREATE_FORBIDDEN: &str =
    "external resource does not exist and the management policies forbid creating it";

/// What the managed resource says about itself (metadata, spec policies, annotations).
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub paused: bool,
    pub policies: Result<Policies, &'static str>,
    pub deleting: bool,
    /// A Create whose result was lost (pending, never marked succeeded or failed) is not refused: every kind's
    /// external name is known before Create (EKS names are chosen by the caller), so observing that name finds
    /// the resource if the lost Create made it.
    pub creation: CreationMarks,
    pub now: Timestamp,
}

/// The observed facts that matter to the decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub exists: bool,
    pub up_to_date: bool,
    pub busy: bool,
    pub late_initialized: Option<serde_json::Value>,
}

impl<O> From<&Observation<O>> for Observed {
    fn from(o: &Observation<O>) -> Self {
        Self {
            exists: o.exists,
            up_to_date: o.up_to_date,
            busy: o.busy,
            late_initialized: o.late_initialized.clone(),
        }
    }
}

/// Policies that passed validation. Only [`before_observe`] makes one, so [`after_observe`] cannot be reached
/// with a paused, invalid or orphaning resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed(Policies);

impl Allowed {
    pub fn policies(self) -> Policies {
        self.0
    }
}

/// The decision that needs no external state.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeObserve {
    /// Paused by annotation or an empty policy list: Synced=False/ReconcilePaused, touch nothing.
    Pause,
    /// The resource itself is invalid; report it and wait for a spec change.
    Reject(String),
    /// Deleted without the Delete policy: leave the external resource, unpublish, drop the finalizer.
    Orphan,
    /// Connect and Observe, then ask [`after_observe`].
    Observe(Allowed),
}

/// The one step after Observe.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Deleted and the external resource exists: ask AWS to delete it.
    Delete,
    /// Deleted and AWS is already deleting: wait.
    WaitForDeletion,
    /// Deleted and the external resource is gone: unpublish, drop the finalizer.
    Finalize,
    /// Missing shortly after a successful Create: give AWS time to show it.
    WaitForCreationGrace,
    Create,
    /// Missing, and the policies allow no Create (Observe-only): report it, look again after the poll interval.
    MissingAndCreateForbidden,
    /// Write what AWS chose into the spec (a merge patch for `spec.forProvider`).
    LateInitialize(serde_json::Value),
    /// AWS is still creating or updating: no change may be sent now.
    WaitWhileBusy,
    Update,
    /// Up to date (or updates not allowed): check again after the poll interval.
    Idle,
}

pub fn before_observe(facts: &Facts) -> BeforeObserve {
    if facts.paused {
        return BeforeObserve::Pause;
    }
    let policies = match facts.policies {
        Ok(p) => p,
        Err(why) => return BeforeObserve::Reject(why.to_string()),
    };
    if facts.deleting && !policies.delete {
        return BeforeObserve::Orphan;
    }
    BeforeObserve::Observe(Allowed(policies))
}

pub fn after_observe(facts: &Facts, allowed: Allowed, observed: &Observed) -> Step {
    let policies = allowed.policies();
    if facts.deleting {
        return match (observed.exists, observed.busy) {
            (false, _) => Step::Finalize,
            (true, true) => Step::WaitForDeletion,
            (true, false) => Step::Delete,
        };
    }
    if !observed.exists {
        if !policies.create {
            return Step::MissingAndCreateForbidden;
        }
        let recently_created = facts
            .creation
            .succeeded
            .is_some_and(|t| facts.now.duration_since(t) < CREATION_GRACE);
        return if recently_created {
            Step::WaitForCreationGrace
        } else {
            Step::Create
        };
    }
    if let (Some(patch), true) = (&observed.late_initialized, policies.late_initialize) {
        return Step::LateInitialize(patch.clone());
    }
    if observed.up_to_date || !policies.update {
        return Step::Idle;
    }
    if observed.busy {
        return Step::WaitWhileBusy;
    }
    Step::Update
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
