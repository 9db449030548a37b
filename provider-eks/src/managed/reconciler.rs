//! Carries out the step `decide` chose: the crossplane-runtime managed reconciler loop, for any kind that has a
//! [`Connector`]. Every failure ends in [`Reconciler::fail`]: Synced=False/ReconcileError with the message, and a
//! requeue with backoff. Kubernetes write errors go to the controller's error policy instead.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use serde::Serialize;
use serde_json::json;

use super::admission::Admission;
use super::annotations::{
    CREATE_FAILED, CREATE_PENDING, CREATE_SUCCEEDED, CreationMarks, EXTERNAL_NAME, is_paused, timestamp,
};
use super::conditions::{Outcome, Readiness, set_ready, set_synced};
use super::decide::{
    BeforeObserve, Facts, MISSING_AND_CREATE_FORBIDDEN, Observed, Step, after_observe, before_observe,
};
use super::external::{ExternalClient, ExternalError, Observation};
use super::pacing::{Calm, capacity_floor, in_steady_state, jitter, next_poll, spread};
use super::policy::Policies;
use super::recorder::{Events, Reason};
use super::resource::Managed;
use super::urgency::with_urgency;
use super::usage::Tracker;
use super::writes;
use crate::metrics::Metrics;

/// Builds an [`ExternalClient`] for one managed resource from its ProviderConfig.
#[async_trait]
pub trait Connector<M>: Send + Sync + 'static {
    type Client: ExternalClient<M, AtProvider = Self::AtProvider>;
    type AtProvider: Serialize + Send + Sync;
    async fn connect(&self, mr: &M) -> Result<Self::Client, ExternalError>;
}

#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How often an up-to-date resource is observed again: nothing else tells us about drift in AWS.
    pub poll: Duration,
    /// How soon to look again while AWS is creating, updating or deleting.
    pub busy: Duration,
    /// First retry after an error; doubles per consecutive failure up to `max_backoff`.
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// Longest wait between polls of a resource that stays in sync (see `pacing`).
    pub max_poll: Duration,
    /// Every requeue moves by up to this fraction either way, so resources observed together drift apart.
    pub jitter: f64,
    /// Describes a second this kind may spend on steady-state polls (0: no bound): with more resources than
    /// `max_poll` x this, calm polls and the first look after a restart are spread wider instead of queueing.
    pub steady_rate: f64,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            poll: Duration::from_secs(60),
            busy: Duration::from_secs(15),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(120),
            max_poll: Duration::from_secs(600),
            jitter: 0.1,
            steady_rate: 8.0,
        }
    }
}

pub struct Reconciler<C> {
    pub client: kube::Client,
    pub connector: C,
    pub timing: Timing,
    pub metrics: Arc<Metrics>,
    pub kind: &'static str,
    pub clock: fn() -> Timestamp,
    failures: Mutex<HashMap<String, u32>>,
    calm: Mutex<HashMap<String, Calm>>,
    /// Resources reconciled since this process started: the first look at a steady one is spread out.
    seen: Mutex<HashSet<String>>,
    /// Kubernetes Events for creates, updates, deletes and their failures; none in tests that do not ask.
    events: Option<Events>,
    /// ProviderConfigUsages of the resources; none in tests that do not ask.
    usages: Option<Tracker>,
    /// Reconciles wait here before they start; none in tests that do not ask.
    admission: Option<Admission>,
}

impl<C> Reconciler<C> {
    pub fn new(
        client: kube::Client,
        connector: C,
        timing: Timing,
        metrics: Arc<Metrics>,
        kind: &'static str,
    ) -> Self {
        Self {
            client,
            connector,
            timing,
            metrics,
            kind,
            clock: Timestamp::now,
            failures: Mutex::default(),
            calm: Mutex::default(),
            seen: Mutex::default(),
            events: None,
            usages: None,
            admission: None,
        }
    }

    /// At most `slots` reconciles of this kind do Kubernetes work at once (see `managed::admission`).
    pub fn with_admission(mut self, slots: usize) -> Self {
        self.admission = Some(Admission::new(slots));
        self
    }

    /// Records a ProviderConfigUsage for each resource, so its config cannot be deleted under it.
    pub fn with_usages(mut self) -> Self {
        self.usages = Some(Tracker::default());
        self
    }

    async fn untrack<M: Managed>(&self, mr: &M) -> Result<(), kube::Error> {
        match &self.usages {
            Some(usages) => usages.untrack(&self.client, mr).await,
            None => Ok(()),
        }
    }

    /// Records Kubernetes Events on the managed resources.
    pub fn with_events(mut self, events: Events) -> Self {
        self.events = Some(events);
        self
    }

    async fn event_ok<M: Managed>(&self, mr: &M, reason: Reason, note: &str) {
        if let Some(events) = &self.events {
            events.success(mr, reason, note.to_owned()).await;
        }
    }

    async fn event_error<M: Managed>(&self, mr: &M, reason: Reason, err: &ExternalError) {
        if matches!(err, ExternalError::Deferred(_)) {
            return;
        }
        if let Some(events) = &self.events {
            events.error(mr, reason, err).await;
        }
    }

    fn next_backoff(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = failures.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        let factor = 2u32.saturating_pow(n.saturating_sub(1).min(16));
        self.timing
            .backoff
            .saturating_mul(factor)
            .min(self.timing.max_backoff)
    }

    /// The longest backoff, at once: the error will not go away by itself.
    fn permanent_backoff(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures.insert(key.to_string(), u32::MAX);
        self.timing.max_backoff
    }

    /// The next poll of a resource that was just found `idle` (in sync, nothing busy) or not, jittered.
    fn next_poll(&self, key: &str, generation: Option<i64>, idle: bool) -> Duration {
        let mut calm = self.calm.lock().unwrap_or_else(|p| p.into_inner());
        let entry = calm.entry(key.to_string()).or_default();
        let wait = next_poll(entry, generation, idle, self.timing.poll, self.timing.max_poll);
        let wait = match idle {
            true => wait.max(capacity_floor(calm.len(), self.timing.steady_rate)),
            false => wait,
        };
        jitter(wait, self.timing.jitter)
    }

    /// True the first time a key is seen by this process.
    fn first_sight(&self, key: &str) -> bool {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_string())
    }

    /// The shortest interval at which every resource of this kind can be described within the steady rate.
    fn capacity(&self) -> Duration {
        let known = self.calm.lock().unwrap_or_else(|p| p.into_inner()).len();
        capacity_floor(known, self.timing.steady_rate)
    }

    /// The window a restarted process spreads its first looks at steady resources over.
    fn restart_window(&self) -> Duration {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner()).len();
        self.timing
            .poll
            .max(capacity_floor(seen, self.timing.steady_rate))
    }

    fn unsettle(&self, key: &str) {
        self.calm.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }

    fn forget(&self, key: &str) {
        self.calm.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

fn key<M: Managed>(mr: &M) -> String {
    format!("{}/{}", mr.namespace().unwrap_or_default(), mr.name_any())
}

fn facts_of<M: Managed>(mr: &M, now: Timestamp) -> Facts {
    let policies = mr.management_policies();
    let parsed = Policies::from_spec(policies);
    Facts {
        paused: is_paused(mr.annotations()) || Policies::pauses(policies),
        policies: parsed.validate().map(|()| parsed),
        deleting: mr.meta().deletion_timestamp.is_some(),
        creation: CreationMarks::read(mr.annotations()),
        now,
    }
}

impl<C> Reconciler<C> {
    async fn status<M: Managed, O: Serialize>(
        &self,
        mr: &M,
        ready: Option<&Readiness>,
        outcome: &Outcome,
        at_provider: Option<&O>,
    ) -> Result<(), kube::Error> {
        let now = (self.clock)();
        let generation = writes::generation(mr);
        let mut conditions = set_synced(mr.conditions(), outcome, generation, now);
        if let Some(ready) = ready {
            conditions = set_ready(&conditions, ready, generation, now);
        }
        let mut status = json!({ "conditions": conditions });
        if let Some(generation) = generation {
            status["observedGeneration"] = generation.into();
        }
        if let Some(at) = at_provider.and_then(|a| serde_json::to_value(a).ok()) {
            status["atProvider"] = at;
        }
        writes::write_status(&self.client, mr, status).await
    }

    /// The one failure epilogue: report the error on Synced and retry with backoff. A rejection (AWS said the
    /// request itself is wrong: validation, unsupported version, quota) cannot succeed by retrying soon, so it
    /// waits the longest backoff at once; a spec change wakes the resource earlier through its watch.
    async fn fail<M: Managed>(&self, mr: &M, err: ExternalError) -> Result<Action, kube::Error> {
        self.fail_with(mr, None, err).await
    }

    async fn fail_with<M: Managed>(
        &self,
        mr: &M,
        ready: Option<&Readiness>,
        err: ExternalError,
    ) -> Result<Action, kube::Error> {
        if let ExternalError::Deferred(wait) = err {
            // Not a failure: no condition, no backoff step, just come back when the rate limit has room.
            tracing::debug!(kind = self.kind, name = %key(mr), ?wait, "deferred by the rate limit");
            self.metrics.reconcile_error(self.kind, err.metric_label());
            return Ok(Action::requeue(jitter(wait, self.timing.jitter)));
        }
        tracing::info!(kind = self.kind, name = %key(mr), error = %err, "reconcile failed");
        self.unsettle(&key(mr));
        self.metrics.reconcile_error(self.kind, err.metric_label());
        let (delay, message) = match &err {
            ExternalError::Rejected(_) => {
                let delay = self.permanent_backoff(&key(mr));
                let message = format!(
                    "{err} (permanent error: retrying in {} s or when the spec changes)",
                    delay.as_secs()
                );
                (delay, message)
            }
            // Waiting resources back off too: what they wait for (their Cluster) wakes them through a watch.
            ExternalError::Transient(_) | ExternalError::Waiting(_) | ExternalError::Deferred(_) => {
                (self.next_backoff(&key(mr)), err.to_string())
            }
        };
        self.status::<M, ()>(mr, ready, &Outcome::Error(message), None)
            .await?;
        Ok(Action::requeue(delay))
    }

    async fn done<M: Managed, O: Serialize>(
        &self,
        mr: &M,
        observation: &Observation<O>,
        ready: &Readiness,
        requeue: Duration,
    ) -> Result<Action, kube::Error> {
        self.succeeded(&key(mr));
        self.status(mr, Some(ready), &Outcome::Success, Some(&observation.at_provider))
            .await?;
        Ok(Action::requeue(requeue))
    }
}

pub async fn reconcile<M, C>(mr: Arc<M>, r: Arc<Reconciler<C>>) -> Result<Action, kube::Error>
where
    M: Managed,
    C: Connector<M>,
{
    let steady = in_steady_state(mr.as_ref(), mr.conditions(), mr.observed_generation());
    // After a restart every resource is listed at once; those already in sync wait a random part of one poll
    // interval, so the fleet is not described in the same second.
    if r.first_sight(&key(mr.as_ref())) && steady && r.timing.poll > Duration::ZERO {
        return Ok(Action::requeue(spread(r.restart_window())));
    }
    // Boxed: a reconcile waiting for admission holds only this small future, not the body's state.
    let admission = r.admission.clone();
    let work = move || Box::pin(admitted(mr, r, steady));
    match admission {
        Some(admission) => admission.run(work).await,
        None => work().await,
    }
}

async fn admitted<M, C>(mr: Arc<M>, r: Arc<Reconciler<C>>, steady: bool) -> Result<Action, kube::Error>
where
    M: Managed,
    C: Connector<M>,
{
    // Steady-state polls yield AWS capacity to everything else (creates, deletes, spec changes).
    match with_urgency(!steady, reconcile_now(mr.clone(), r.clone())).await {
        // The cached copy was behind the API server: under load a watch can lag by minutes, and every retry from
        // the same stale resourceVersion would fail again. Read the object itself and go on with that once.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            tracing::info!(kind = r.kind, name = %key(mr.as_ref()), code = e.code, error = %e,
                "kubernetes write failed with a conflict: re-reading the object and reconciling it once more");
            match writes::fetch(&r.client, mr.as_ref()).await? {
                Some(fresh) => with_urgency(!steady, reconcile_now(Arc::new(fresh), r)).await,
                None => Ok(Action::await_change()),
            }
        }
        other => other,
    }
}

async fn reconcile_now<M, C>(mr: Arc<M>, r: Arc<Reconciler<C>>) -> Result<Action, kube::Error>
where
    M: Managed,
    C: Connector<M>,
{
    let now = (r.clock)();
    let facts = facts_of(mr.as_ref(), now);
    r.metrics.reconcile(r.kind);
    let allowed = match before_observe(&facts) {
        BeforeObserve::Pause => {
            r.status::<M, ()>(&mr, None, &Outcome::Paused, None).await?;
            return Ok(Action::await_change());
        }
        BeforeObserve::Reject(why) => return r.fail(mr.as_ref(), ExternalError::Rejected(why)).await,
        BeforeObserve::Orphan => {
            writes::unpublish(&r.client, mr.as_ref()).await?;
            r.untrack(mr.as_ref()).await?;
            writes::remove_finalizer(&r.client, mr.as_ref()).await?;
            return Ok(Action::await_change());
        }
        BeforeObserve::Observe(allowed) => allowed,
    };
    // Initialize: the external name defaults to the object's name, recorded before anything is created.
    let mut mr = (*mr).clone();
    if !facts.deleting && !mr.annotations().contains_key(EXTERNAL_NAME) {
        mr = writes::set_annotations(&r.client, &mr, &[(EXTERNAL_NAME, mr.name_any())]).await?;
    }
    // The config is in use from before the first call made with its credentials.
    if let (false, Some(usages)) = (facts.deleting, &r.usages) {
        usages.track(&r.client, &mr).await?;
    }
    let external = match r.connector.connect(&mr).await {
        Ok(c) => c,
        Err(e) => {
            r.event_error(&mr, Reason::CannotConnectToProvider, &e).await;
            return r.fail(&mr, e).await;
        }
    };
    let observation = match external.observe(&mr).await {
        Ok(o) => o,
        Err(e) => {
            r.event_error(&mr, Reason::CannotObserveExternalResource, &e)
                .await;
            return r.fail(&mr, e).await;
        }
    };
    let step = after_observe(&facts, allowed, &Observed::from(&observation));
    if step != Step::Idle {
        // Something is happening: the next calm stretch starts from the normal poll interval.
        r.unsettle(&key(&mr));
    }
    tracing::debug!(kind = r.kind, name = %key(&mr), ?step, "decided");
    let busy = r.timing.busy;
    match step {
        Step::Finalize => {
            writes::unpublish(&r.client, &mr).await?;
            r.untrack(&mr).await?;
            writes::remove_finalizer(&r.client, &mr).await?;
            r.forget(&key(&mr));
            Ok(Action::await_change())
        }
        Step::Delete => match external.delete(&mr).await {
            Ok(()) => {
                r.event_ok(
                    &mr,
                    Reason::DeletedExternalResource,
                    "Successfully requested deletion of external resource",
                )
                .await;
                r.done(&mr, &observation, &Readiness::Deleting, busy).await
            }
            // Still Ready=True would claim the resource is in use; it is being deleted, and this is why not yet.
            Err(ExternalError::Waiting(why)) => {
                let err = ExternalError::Waiting(why.clone());
                r.event_error(&mr, Reason::CannotDeleteExternalResource, &err)
                    .await;
                let ready = Readiness::WaitingToDelete(why);
                r.fail_with(&mr, Some(&ready), err).await
            }
            Err(e) => {
                r.event_error(&mr, Reason::CannotDeleteExternalResource, &e).await;
                r.fail_with(&mr, Some(&Readiness::Deleting), e).await
            }
        },
        Step::WaitForDeletion => r.done(&mr, &observation, &Readiness::Deleting, busy).await,
        Step::WaitForCreationGrace => r.done(&mr, &observation, &Readiness::Creating, busy).await,
        Step::MissingAndCreateForbidden => {
            r.metrics.reconcile_error(r.kind, "rejected");
            r.status(
                &mr,
                Some(&observation.readiness),
                &Outcome::Error(MISSING_AND_CREATE_FORBIDDEN.into()),
                Some(&observation.at_provider),
            )
            .await?;
            // Observe-only resources are usually made elsewhere: keep looking at the normal poll rate.
            Ok(Action::requeue(r.timing.poll))
        }
        Step::Create => {
            let mr = writes::add_finalizer(&r.client, &mr).await?;
            // Fails with 409 when another reconcile got here first, so only one Create is ever in flight.
            let mr = writes::set_annotations(&r.client, &mr, &[(CREATE_PENDING, timestamp(now))]).await?;
            match external.create(&mr).await {
                Err(e) => {
                    r.event_error(&mr, Reason::CannotCreateExternalResource, &e).await;
                    let mr =
                        writes::set_annotations(&r.client, &mr, &[(CREATE_FAILED, timestamp((r.clock)()))])
                            .await?;
                    r.fail_with(&mr, Some(&Readiness::Creating), e).await
                }
                Ok(details) => {
                    r.event_ok(
                        &mr,
                        Reason::CreatedExternalResource,
                        "Successfully requested creation of external resource",
                    )
                    .await;
                    let mr = writes::set_annotations(
                        &r.client,
                        &mr,
                        &[(CREATE_SUCCEEDED, timestamp((r.clock)()))],
                    )
                    .await?;
                    writes::publish(&r.client, &mr, &details).await?;
                    r.done(&mr, &observation, &Readiness::Creating, busy).await
                }
            }
        }
        Step::LateInitialize(patch) => {
            let mr = writes::add_finalizer(&r.client, &mr).await?;
            let mr = writes::patch_for_provider(&r.client, &mr, &patch).await?;
            r.done(&mr, &observation, &observation.readiness, busy).await
        }
        Step::Update => {
            let mr = writes::add_finalizer(&r.client, &mr).await?;
            writes::publish(&r.client, &mr, &observation.connection_details).await?;
            if let Err(e) = external.update(&mr, &observation.at_provider).await {
                r.event_error(&mr, Reason::CannotUpdateExternalResource, &e).await;
                return r.fail_with(&mr, Some(&observation.readiness), e).await;
            }
            r.event_ok(
                &mr,
                Reason::UpdatedExternalResource,
                "Successfully requested update of external resource",
            )
            .await;
            r.done(&mr, &observation, &observation.readiness, busy).await
        }
        Step::WaitWhileBusy | Step::Idle => {
            let mr = writes::add_finalizer(&r.client, &mr).await?;
            writes::publish(&r.client, &mr, &observation.connection_details).await?;
            let idle =
                step == Step::Idle && !observation.busy && observation.readiness == Readiness::Available;
            let next_poll = r.next_poll(&key(&mr), writes::generation(&mr), idle);
            // While AWS works, look again soon, but never faster than the describe rate lets the whole kind.
            let requeue = if idle {
                next_poll
            } else {
                jitter(busy.max(r.capacity()), r.timing.jitter)
            };
            r.done(&mr, &observation, &observation.readiness, requeue).await
        }
    }
}

/// Kubernetes API errors (conflicts, outages) land here: retry soon; a 409 means a newer version is on its way.
pub fn error_policy<M: Managed, C>(mr: Arc<M>, err: &kube::Error, r: Arc<Reconciler<C>>) -> Action {
    tracing::warn!(kind = r.kind, name = %key(mr.as_ref()), error = %err, "kubernetes write failed");
    r.metrics.reconcile_error(r.kind, "kubernetes");
    Action::requeue(r.next_backoff(&key(mr.as_ref())))
}
