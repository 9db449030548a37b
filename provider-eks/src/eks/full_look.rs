//! "Steady or full look": a kind whose full Observe costs several AWS calls (a Network's seven describes, a
//! FileSystem's three, a node pool's launch template) may stand a cheaper check in for it while the resource is
//! steady: in sync, Ready, its spec unchanged since, and looked at in full by this process within
//! [`FULL_LOOK_EVERY`]. Anything else (a spec change, a restart, an error, the window passing) brings the full
//! look back, so what the cheap check cannot see is corrected within the window.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::managed::pacing::in_steady_state;
use crate::managed::resource::Managed;

/// How long a steady resource goes on the cheap check before it is looked at in full again: long enough that
/// polls cost about one call each, short enough that a change the cheap check cannot see is corrected within it.
pub const FULL_LOOK_EVERY: Duration = Duration::from_secs(30 * 60);

/// When each resource of one kind (by owner, `<namespace>/<external name>`) was last looked at in full by this
/// process. One per kind: owners of two kinds may be equal.
pub struct FullLooks {
    last: Mutex<BTreeMap<String, Instant>>,
}

pub static NETWORK: FullLooks = FullLooks::new();
pub static FILE_SYSTEM: FullLooks = FullLooks::new();
pub static NODE_POOL_TEMPLATE: FullLooks = FullLooks::new();

impl FullLooks {
    pub const fn new() -> Self {
        Self {
            last: Mutex::new(BTreeMap::new()),
        }
    }

    fn last(&self) -> MutexGuard<'_, BTreeMap<String, Instant>> {
        self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes a full look at `owner`'s resource now.
    pub fn looked(&self, owner: &str) {
        self.last().insert(owner.to_owned(), Instant::now());
    }

    /// Forgets `owner`'s last full look (its resource is gone, or a test stands for the window passing), so
    /// the next Observe looks in full.
    pub fn forget(&self, owner: &str) {
        self.last().remove(owner);
    }

    /// Whether `mr` (whose owner is `owner`) may be checked cheaply instead of looked at in full: steady (see
    /// [`in_steady_state`]) as its status records, and looked at in full within [`FULL_LOOK_EVERY`].
    pub fn may_skip<M: Managed>(&self, mr: &M, owner: &str) -> bool {
        in_steady_state(mr, mr.conditions(), mr.observed_generation())
            && self
                .last()
                .get(owner)
                .is_some_and(|at| at.elapsed() < FULL_LOOK_EVERY)
    }
}

impl Default for FullLooks {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use modelplane_eks_api::{Condition, ConditionStatus, Network, ResourceStatus};

    use super::*;

    /// A Network at `generation` whose status says Ready and Synced at generation 1.
    fn network(generation: i64) -> Network {
        let mut mr = Network::new("n", Default::default());
        mr.metadata.generation = Some(generation);
        let condition = |type_: &str| Condition {
            type_: type_.into(),
            status: ConditionStatus::True,
            reason: "Available".into(),
            message: None,
            last_transition_time: Timestamp::now().to_string(),
            observed_generation: Some(1),
        };
        mr.status = Some(ResourceStatus {
            at_provider: Default::default(),
            conditions: vec![condition("Ready"), condition("Synced")],
            observed_generation: Some(1),
        });
        mr
    }

    #[test]
    fn only_a_steady_resource_looked_at_recently_may_skip_the_full_look() {
        let looks = FullLooks::new();
        let mr = network(1);
        assert!(!looks.may_skip(&mr, "ns/n"), "never looked at");
        looks.looked("ns/n");
        assert!(looks.may_skip(&mr, "ns/n"));
        assert!(!looks.may_skip(&network(2), "ns/n"), "spec changed since");
        let mut unstatused = mr.clone();
        unstatused.status = None;
        assert!(!looks.may_skip(&unstatused, "ns/n"), "no status");
        assert!(!looks.may_skip(&mr, "ns/other"), "another resource");
        looks.forget("ns/n");
        assert!(!looks.may_skip(&mr, "ns/n"), "forgotten");
    }
}
