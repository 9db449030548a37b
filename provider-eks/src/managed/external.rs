//! The seam between the generic reconciler and one kind of external resource (crossplane-runtime's
//! `ExternalClient`). None of these calls may block waiting for AWS to finish, and all of them must be
//! idempotent: the reconciler calls them again after any crash, timeout or conflict.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::conditions::Readiness;

/// Connection details published to the resource's connection secret (key -> raw bytes).
pub type ConnectionDetails = BTreeMap<String, Vec<u8>>;

/// What Observe found. Observe never changes the external resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation<O> {
    /// False when the external resource does not exist (or is gone after a delete).
    pub exists: bool,
    /// False only when Update would change something; the reconciler then calls Update (if allowed).
    pub up_to_date: bool,
    /// What the external resource is doing: drives the `Ready` condition, and Update/Delete are held back while
    /// AWS is still busy with a previous change.
    pub readiness: Readiness,
    /// True while AWS is working on the resource (CREATING, UPDATING, DELETING): no new change may be sent.
    pub busy: bool,
    /// A JSON merge patch for `spec.forProvider` with values AWS chose that the spec left open. Must be `None`
    /// when nothing new was learned: a spec write on every Observe would start a new reconcile each time and the
    /// status would never settle.
    pub late_initialized: Option<serde_json::Value>,
    /// Written to `status.atProvider`.
    pub at_provider: O,
    pub connection_details: ConnectionDetails,
}

impl<O: Default> Observation<O> {
    /// The external resource does not exist.
    pub fn missing() -> Self {
        Self {
            exists: false,
            up_to_date: false,
            readiness: Readiness::Unavailable("external resource does not exist".into()),
            busy: false,
            late_initialized: None,
            at_provider: O::default(),
            connection_details: ConnectionDetails::new(),
        }
    }

    /// Exists, usable, matches the spec.
    pub fn available(at_provider: O) -> Self {
        Self {
            exists: true,
            up_to_date: true,
            readiness: Readiness::Available,
            busy: false,
            late_initialized: None,
            at_provider,
            connection_details: ConnectionDetails::new(),
        }
    }
}

/// The error kinds the reconciler treats differently. Messages never contain credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExternalError {
    /// AWS asked us to slow down (throttling) or failed on its side (5xx, timeouts): retry with backoff.
    #[error("{0} (will retry)")]
    Transient(String),
    /// The request cannot succeed until the spec changes (4xx validation, missing role, ...).
    #[error("{0}")]
    Rejected(String),
    /// Something this resource needs is not there yet (its cluster is not ACTIVE, node pools still attached).
    #[error("{0}")]
    Waiting(String),
    /// Nothing went wrong: the client-side rate limit would have held a call past its timeout, so it was not
    /// sent. Look again after this long; the resource's conditions stay as they are.
    #[error("AWS calls are rate-limited here: deferred for {0:?}")]
    Deferred(std::time::Duration),
}

impl ExternalError {
    /// Label for metrics: the variant only, never the message (it can carry resource names).
    pub fn metric_label(&self) -> &'static str {
        match self {
            ExternalError::Transient(_) => "transient",
            ExternalError::Rejected(_) => "rejected",
            ExternalError::Waiting(_) => "waiting",
            ExternalError::Deferred(_) => "deferred",
        }
    }
}

/// Operations on one external resource, already connected to AWS with the resource's ProviderConfig.
#[async_trait]
pub trait ExternalClient<M>: Send + Sync {
    type AtProvider;

    async fn observe(&self, mr: &M) -> Result<Observation<Self::AtProvider>, ExternalError>;
    /// Starts creating. Must be safe to call twice for the same resource (client request tokens).
    async fn create(&self, mr: &M) -> Result<ConnectionDetails, ExternalError>;
    /// Starts changing the external resource towards the spec. `observed` is what Observe just returned.
    async fn update(&self, mr: &M, observed: &Self::AtProvider) -> Result<(), ExternalError>;
    /// Starts deleting. Returns Waiting while dependents (node groups) still hold the resource.
    async fn delete(&self, mr: &M) -> Result<(), ExternalError>;
}
