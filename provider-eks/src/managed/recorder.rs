//! Kubernetes Events for the reconciler's decisions, with crossplane-runtime's closed set of reasons, so
//! `kubectl describe` on a managed resource tells what the provider did to AWS and why it failed. Publishing is
//! best effort: a failed Event write is logged and never fails or delays the reconcile.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Resource, ResourceExt};

use super::external::ExternalError;

/// The reporting controller in every Event.
pub const CONTROLLER: &str = "modelplane-provider-eks";
/// Kubernetes caps an Event's note at 1 kB.
const MAX_NOTE: usize = 1024;

/// Why an Event was recorded (crossplane-runtime `pkg/reconciler/managed` reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    CannotConnectToProvider,
    CannotObserveExternalResource,
    CannotCreateExternalResource,
    CreatedExternalResource,
    CannotUpdateExternalResource,
    UpdatedExternalResource,
    CannotDeleteExternalResource,
    DeletedExternalResource,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::CannotConnectToProvider => "CannotConnectToProvider",
            Reason::CannotObserveExternalResource => "CannotObserveExternalResource",
            Reason::CannotCreateExternalResource => "CannotCreateExternalResource",
            Reason::CreatedExternalResource => "CreatedExternalResource",
            Reason::CannotUpdateExternalResource => "CannotUpdateExternalResource",
            Reason::UpdatedExternalResource => "UpdatedExternalResource",
            Reason::CannotDeleteExternalResource => "CannotDeleteExternalResource",
            Reason::DeletedExternalResource => "DeletedExternalResource",
        }
    }

    fn action(self) -> &'static str {
        match self {
            Reason::CannotConnectToProvider => "Connect",
            Reason::CannotObserveExternalResource => "Observe",
            Reason::CannotCreateExternalResource | Reason::CreatedExternalResource => "Create",
            Reason::CannotUpdateExternalResource | Reason::UpdatedExternalResource => "Update",
            Reason::CannotDeleteExternalResource | Reason::DeletedExternalResource => "Delete",
        }
    }

    fn is_failure(self) -> bool {
        self.as_str().starts_with("Cannot")
    }
}

/// What to say about an error: waiting on a dependency is normal, so it is not a Warning.
pub fn failure(reason: Reason, err: &ExternalError) -> (Reason, EventType, String) {
    let kind = match err {
        ExternalError::Waiting(_) | ExternalError::Deferred(_) => EventType::Normal,
        ExternalError::Transient(_) | ExternalError::Rejected(_) => EventType::Warning,
    };
    (reason, kind, err.to_string())
}

/// kube-runtime's [`Recorder`] remembers every Event it published for six minutes, to count repeats into a
/// series, and bounds that memory by time alone: a fleet's activation publishes one create per resource in those
/// minutes (7,992 Events, 25 MB). So a recorder serves this many Events and is then replaced by a fresh one, as
/// client-go bounds its correlator with an LRU (of 4,096); a repeat after the swap starts a new Event instead of
/// counting into the old one.
const EVENTS_PER_RECORDER: usize = 512;

/// Publishes Events through a shared [`Recorder`] (it deduplicates repeats into a count).
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    reporter: Reporter,
    current: Arc<Mutex<(Recorder, usize)>>,
}

impl Events {
    pub fn new(client: kube::Client) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let recorder = Recorder::new(client.clone(), reporter.clone());
        Self {
            client,
            reporter,
            current: Arc::new(Mutex::new((recorder, 0))),
        }
    }

    /// The recorder to publish the next Event with: the current one, or a fresh one once it has served its share.
    fn recorder(&self) -> Recorder {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.1 >= EVENTS_PER_RECORDER {
            *current = (Recorder::new(self.client.clone(), self.reporter.clone()), 0);
        }
        current.1 += 1;
        current.0.clone()
    }

    /// Events published through the current recorder.
    #[cfg(test)]
    fn published_by_current(&self) -> usize {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).1
    }

    pub async fn record<M: Resource<DynamicType = ()>>(
        &self,
        mr: &M,
        reason: Reason,
        type_: EventType,
        note: String,
    ) {
        let mut note = note;
        if note.len() > MAX_NOTE {
            let mut cut = MAX_NOTE;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
        }
        let reference: ObjectReference = mr.object_ref(&());
        let event = Event {
            type_,
            reason: reason.as_str().into(),
            note: Some(note),
            action: reason.action().into(),
            secondary: None,
        };
        if let Err(e) = self.recorder().publish(&event, &reference).await {
            tracing::debug!(name = %mr.name_any(), error = %e, "cannot record event");
        }
    }

    pub async fn success<M: Resource<DynamicType = ()>>(&self, mr: &M, reason: Reason, note: String) {
        debug_assert!(!reason.is_failure());
        self.record(mr, reason, EventType::Normal, note).await;
    }

    pub async fn error<M: Resource<DynamicType = ()>>(&self, mr: &M, reason: Reason, err: &ExternalError) {
        let (reason, type_, note) = failure(reason, err);
        self.record(mr, reason, type_, note).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_recorder_is_replaced_once_it_has_served_its_share() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let events = Events::new(kube::Client::try_from(config).unwrap());
        for _ in 0..EVENTS_PER_RECORDER {
            events.recorder();
        }
        assert_eq!(events.published_by_current(), EVENTS_PER_RECORDER);
        events.recorder();
        assert_eq!(events.published_by_current(), 1);
    }

    #[test]
    fn waiting_is_normal_and_aws_errors_are_warnings() {
        let waiting = failure(
            Reason::CannotDeleteExternalResource,
            &ExternalError::Waiting("node groups first".into()),
        );
        assert_eq!(waiting.1, EventType::Normal);
        let rejected = failure(
            Reason::CannotCreateExternalResource,
            &ExternalError::Rejected("spec.forProvider.zones[1]: ...".into()),
        );
        assert_eq!(rejected.1, EventType::Warning);
        assert_eq!(rejected.0.action(), "Create");
        assert!(rejected.0.is_failure() && !Reason::CreatedExternalResource.is_failure());
    }
}
