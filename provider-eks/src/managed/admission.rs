//! Admission of reconciles into their work: a token-aware queue in front of the AWS rate limiter.
//!
//! When a fleet activates, every managed resource is reconciled at once. A reconcile in flight holds its whole
//! state (the resource's copies, its Kubernetes requests, its AWS client calls), so thousands in flight together
//! were most of the provider's peak memory. A fixed bound on reconciles in flight fixes the memory but not the
//! order: slots held by reconciles waiting for one API's token (busy polls of node groups being created) leave
//! none for reconciles whose API has room (creates), and convergence slows.
//!
//! Here a reconcile waits, before it builds any state, for one of a few admission slots, and gives its slot
//! back as soon as it hands its first AWS call to the rate limiter ([`leave`], from the throttled connector).
//! So slots only ever cover Kubernetes work, which is fast; a wait for a token costs no slot; and the reconciles
//! waiting for tokens are themselves bounded by the limiter, which defers any call whose turn would come after
//! the attempt timeout. What waits for a slot is a small future: the reconcile's body is allocated once
//! admitted.

use std::cell::RefCell;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

tokio::task_local! {
    /// The admission slot the reconcile running in this task still holds, if any.
    static HELD: RefCell<Option<OwnedSemaphorePermit>>;
}

/// The admission slots of one managed kind.
#[derive(Debug, Clone)]
pub struct Admission {
    slots: Arc<Semaphore>,
}

impl Admission {
    pub fn new(slots: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(slots.max(1))),
        }
    }

    /// Waits for a slot (first come, first served), then runs `work` holding it until the work ends or calls
    /// [`leave`].
    pub async fn run<F: Future>(&self, work: impl FnOnce() -> F) -> F::Output {
        // The semaphore is never closed, so acquiring only waits.
        let permit = self.slots.clone().acquire_owned().await.ok();
        HELD.scope(RefCell::new(permit), work()).await
    }

    /// Slots free now.
    pub fn available(&self) -> usize {
        self.slots.available_permits()
    }
}

/// Gives this task's admission slot back: its reconcile is about to wait for an AWS token. Outside an admitted
/// reconcile (tests, tools, a second AWS call of the same reconcile) it does nothing.
pub fn leave() {
    let _ = HELD.try_with(|held| held.borrow_mut().take());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_slot_is_held_until_the_work_leaves_for_aws() {
        let admission = Admission::new(1);
        let inside = admission.clone();
        admission
            .run(|| async move {
                assert_eq!(inside.available(), 0);
                leave();
                assert_eq!(inside.available(), 1);
                // Leaving twice (a second AWS call) changes nothing.
                leave();
                assert_eq!(inside.available(), 1);
            })
            .await;
        assert_eq!(admission.available(), 1);
    }

    #[tokio::test]
    async fn work_that_never_calls_aws_gives_its_slot_back_when_it_ends() {
        let admission = Admission::new(1);
        assert_eq!(admission.run(|| async { 7 }).await, 7);
        assert_eq!(admission.available(), 1);
    }

    #[tokio::test]
    async fn a_reconcile_waiting_for_a_token_does_not_keep_the_next_one_out() {
        let admission = Admission::new(1);
        let (token_tx, token_rx) = tokio::sync::oneshot::channel::<()>();
        let first = tokio::spawn({
            let admission = admission.clone();
            async move {
                admission
                    .run(|| async move {
                        leave();
                        // Waits for its "token" without a slot.
                        token_rx.await.ok();
                    })
                    .await
            }
        });
        // The second is admitted while the first still waits.
        admission.run(|| async {}).await;
        token_tx.send(()).ok();
        first.await.unwrap();
    }

    #[test]
    fn leaving_outside_an_admitted_reconcile_does_nothing() {
        leave();
    }
}
