//! An [`ExternalClient`] made of closures (crossplane-runtime's `ExternalClientFns`), for tests of the
//! reconciler: a case states only the calls it cares about, and every call left out gives a harmless answer
//! (nothing exists; Create, Update and Delete succeed). It is its own [`Connector`], and it notes every call it
//! gets, so a case can say what the reconciler asked of AWS.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::Serialize;

use super::external::{ConnectionDetails, ExternalClient, ExternalError, Observation};
use super::reconciler::Connector;

type Answer<T> = Result<T, ExternalError>;
/// A call on the resource alone (Observe, Create, Delete).
type OnResource<M, T> = Option<Arc<dyn Fn(&M) -> Answer<T> + Send + Sync>>;
/// Update's call, on the resource and what Observe returned.
type OnUpdate<M, O> = Option<Arc<dyn Fn(&M, &O) -> Answer<()> + Send + Sync>>;

/// Closures standing in for the calls of an [`ExternalClient`] of `M` whose observation is `O`. Cloning it
/// shares the closures and the record of calls.
pub struct ExternalClientFns<M, O> {
    observe: OnResource<M, Observation<O>>,
    create: OnResource<M, ConnectionDetails>,
    update: OnUpdate<M, O>,
    delete: OnResource<M, ()>,
    calls: Arc<Mutex<Vec<&'static str>>>,
}

impl<M, O> Default for ExternalClientFns<M, O> {
    fn default() -> Self {
        Self {
            observe: None,
            create: None,
            update: None,
            delete: None,
            calls: Arc::default(),
        }
    }
}

impl<M, O> Clone for ExternalClientFns<M, O> {
    fn clone(&self) -> Self {
        Self {
            observe: self.observe.clone(),
            create: self.create.clone(),
            update: self.update.clone(),
            delete: self.delete.clone(),
            calls: self.calls.clone(),
        }
    }
}

impl<M, O> ExternalClientFns<M, O> {
    pub fn on_observe(mut self, f: impl Fn(&M) -> Answer<Observation<O>> + Send + Sync + 'static) -> Self {
        self.observe = Some(Arc::new(f));
        self
    }

    pub fn on_create(mut self, f: impl Fn(&M) -> Answer<ConnectionDetails> + Send + Sync + 'static) -> Self {
        self.create = Some(Arc::new(f));
        self
    }

    pub fn on_update(mut self, f: impl Fn(&M, &O) -> Answer<()> + Send + Sync + 'static) -> Self {
        self.update = Some(Arc::new(f));
        self
    }

    pub fn on_delete(mut self, f: impl Fn(&M) -> Answer<()> + Send + Sync + 'static) -> Self {
        self.delete = Some(Arc::new(f));
        self
    }

    /// The calls made so far, in order, by name ("observe", "create", "update", "delete").
    pub fn calls(&self) -> Vec<&'static str> {
        self.lock().clone()
    }

    fn note(&self, call: &'static str) {
        self.lock().push(call);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<&'static str>> {
        // A failed assertion in another test thread must not hide this one's record.
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl<M: Send + Sync, O: Default + Send + Sync> ExternalClient<M> for ExternalClientFns<M, O> {
    type AtProvider = O;

    async fn observe(&self, mr: &M) -> Answer<Observation<O>> {
        self.note("observe");
        self.observe
            .as_ref()
            .map_or_else(|| Ok(Observation::missing()), |f| f(mr))
    }

    async fn create(&self, mr: &M) -> Answer<ConnectionDetails> {
        self.note("create");
        self.create
            .as_ref()
            .map_or_else(|| Ok(ConnectionDetails::new()), |f| f(mr))
    }

    async fn update(&self, mr: &M, observed: &O) -> Answer<()> {
        self.note("update");
        self.update.as_ref().map_or(Ok(()), |f| f(mr, observed))
    }

    async fn delete(&self, mr: &M) -> Answer<()> {
        self.note("delete");
        self.delete.as_ref().map_or(Ok(()), |f| f(mr))
    }
}

#[async_trait]
impl<M, O> Connector<M> for ExternalClientFns<M, O>
where
    M: Send + Sync + 'static,
    O: Default + Serialize + Send + Sync + 'static,
{
    type Client = Self;
    type AtProvider = O;

    async fn connect(&self, _: &M) -> Answer<Self> {
        Ok(self.clone())
    }
}
