//! How often a resource is looked at, for a fleet: a resource that stays in sync is described less and less
//! often (the poll interval doubling per calm poll, up to a bound), and again at the normal rate as soon as
//! anything happens (a new generation, drift, an error); every requeue is jittered so resources observed
//! together drift apart; after a restart, resources whose status already says they are in sync are spread
//! over one poll interval instead of all being described in the same second.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

use kube::Resource;
use modelplane_eks_api::{Condition, ConditionStatus};

use super::conditions::{READY, SYNCED};

/// What the pacer remembers about one resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calm {
    /// Polls in a row that found nothing to do.
    pub idle_polls: u32,
    /// The generation those polls saw: a new one starts over.
    pub generation: Option<i64>,
}

/// The wait before the next poll of a resource that was just found in sync (`idle`) or not.
pub fn next_poll(
    calm: &mut Calm,
    generation: Option<i64>,
    idle: bool,
    poll: Duration,
    max: Duration,
) -> Duration {
    if !idle || calm.generation != generation {
        *calm = Calm {
            idle_polls: 0,
            generation,
        };
        return poll;
    }
    calm.idle_polls = calm.idle_polls.saturating_add(1);
    let factor = 2u32.saturating_pow(calm.idle_polls.min(16));
    poll.saturating_mul(factor).min(max.max(poll))
}

/// The shortest interval at which `resources` steady-state polls fit in `rate` describes a second: polling a
/// fleet faster than its account's describe rate allows would only queue calls until they time out. Zero when
/// `rate` is not a positive number (no bound).
pub fn capacity_floor(resources: usize, rate: f64) -> Duration {
    if rate.is_finite() && rate > 0.0 {
        Duration::from_secs_f64(resources as f64 / rate)
    } else {
        Duration::ZERO
    }
}

/// A random number in [0, 1) without a random-number crate: std seeds every `RandomState` afresh.
fn unit_random() -> f64 {
    let bits = RandomState::new().hash_one(std::time::Instant::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// `d` moved by up to `fraction` either way.
pub fn jitter(d: Duration, fraction: f64) -> Duration {
    let factor = 1.0 + fraction * (2.0 * unit_random() - 1.0);
    d.mul_f64(factor.max(0.0))
}

/// Somewhere in [0, `d`).
pub fn spread(d: Duration) -> Duration {
    d.mul_f64(unit_random())
}

fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == ConditionStatus::True)
}

/// The status says the resource was in sync at its current generation and nothing is asked of it: it can
/// wait its turn. Anything else is urgent: creates, deletes, spec changes, errors.
pub fn in_steady_state<M: Resource>(
    mr: &M,
    conditions: &[Condition],
    observed_generation: Option<i64>,
) -> bool {
    mr.meta().deletion_timestamp.is_none()
        && observed_generation.is_some()
        && observed_generation == mr.meta().generation
        && is_true(conditions, READY)
        && is_true(conditions, SYNCED)
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLL: Duration = Duration::from_secs(60);
    const MAX: Duration = Duration::from_secs(600);

    #[test]
    fn a_calm_resource_is_polled_less_often_up_to_the_bound() {
        let mut calm = Calm::default();
        assert_eq!(next_poll(&mut calm, Some(1), true, POLL, MAX), POLL);
        let waits: Vec<u64> = (0..6)
            .map(|_| next_poll(&mut calm, Some(1), true, POLL, MAX).as_secs())
            .collect();
        assert_eq!(waits, vec![120, 240, 480, 600, 600, 600]);
    }

    #[test]
    fn a_spec_change_or_anything_to_do_polls_at_the_normal_rate_again() {
        let mut calm = Calm::default();
        for _ in 0..5 {
            next_poll(&mut calm, Some(1), true, POLL, MAX);
        }
        assert_eq!(next_poll(&mut calm, Some(2), true, POLL, MAX), POLL);
        for _ in 0..5 {
            next_poll(&mut calm, Some(2), true, POLL, MAX);
        }
        assert_eq!(next_poll(&mut calm, Some(2), false, POLL, MAX), POLL);
        assert_eq!(next_poll(&mut calm, Some(2), true, POLL, MAX), 2 * POLL);
    }

    #[test]
    fn a_fleet_too_big_for_the_describe_rate_is_polled_as_often_as_the_rate_allows() {
        assert_eq!(capacity_floor(7_200, 8.0), Duration::from_secs(900));
        assert_eq!(capacity_floor(100, 8.0), Duration::from_millis(12_500));
        assert_eq!(capacity_floor(100, 0.0), Duration::ZERO);
        assert_eq!(capacity_floor(100, f64::NAN), Duration::ZERO);
    }

    #[test]
    fn jitter_and_spread_stay_in_bounds() {
        for _ in 0..1000 {
            let j = jitter(POLL, 0.1);
            assert!(
                j >= Duration::from_secs(54) && j <= Duration::from_secs(66),
                "{j:?}"
            );
            assert!(spread(POLL) < POLL);
        }
    }
}
