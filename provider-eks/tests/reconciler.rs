//! The generic managed reconciler, end to end through a real `kube::Client` (kube-fake-client) and an AWS
//! double behind the ExternalClient seam: an `ExternalClientFns`, scripted where a case plays out over several
//! reconciles. moto cannot show CREATING/UPDATING/DELETING; this double can.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::runtime::controller::Action;
use modelplane_eks_api::*;
use modelplane_provider_eks::eks::convert::cluster_phase;
use modelplane_provider_eks::managed::annotations::{
    CREATE_FAILED, CREATE_PENDING, CREATE_SUCCEEDED, EXTERNAL_NAME, FINALIZER, PAUSED,
};
use modelplane_provider_eks::managed::external::{ConnectionDetails, ExternalError, Observation};
use modelplane_provider_eks::managed::external_fns::ExternalClientFns;
use modelplane_provider_eks::managed::reconciler::{Reconciler, Timing, reconcile};
use modelplane_provider_eks::metrics::Metrics;
use support::objects::cluster_in;

const NS: &str = "team-a";
const TIMING: Timing = Timing {
    poll: Duration::from_secs(60),
    busy: Duration::from_secs(15),
    backoff: Duration::from_secs(1),
    max_backoff: Duration::from_secs(8),
    // No adaptive polling and no jitter: these tests compare requeue times exactly.
    max_poll: Duration::from_secs(60),
    jitter: 0.0,
    steady_rate: 0.0,
};

type Fake = ExternalClientFns<Cluster, ClusterObservation>;

/// A scripted EKS for the cases that play out over several reconciles: what exists, its status, whether it
/// matches the spec. Create makes it CREATING, Update UPDATING, Delete DELETING.
#[derive(Default)]
struct Aws {
    exists: bool,
    status: &'static str,
    up_to_date: bool,
    observe_error: Option<ExternalError>,
}

impl Aws {
    fn observe(&self) -> Result<Observation<ClusterObservation>, ExternalError> {
        if let Some(e) = self.observe_error.clone() {
            return Err(e);
        }
        if !self.exists {
            return Ok(Observation::missing());
        }
        let phase = cluster_phase(self.status);
        let mut details = ConnectionDetails::new();
        if self.status == "ACTIVE" {
            details.insert("kubeconfig".into(), b"apiVersion: v1\nkind: Config\n".to_vec());
        }
        Ok(Observation {
            exists: true,
            up_to_date: self.up_to_date,
            readiness: phase.readiness,
            busy: phase.busy,
            late_initialized: None,
            at_provider: ClusterObservation {
                status: Some(self.status.into()),
                ..Default::default()
            },
            connection_details: details,
        })
    }

    /// Makes it exist with `status`, in sync with the spec.
    fn becomes(&mut self, status: &'static str) {
        self.exists = true;
        self.status = status;
        self.up_to_date = true;
    }
}

/// The scripted EKS, shared by the test and the closures of its client.
#[derive(Clone, Default)]
struct Scripted(Arc<Mutex<Aws>>);

impl Scripted {
    fn with(&self, f: impl FnOnce(&mut Aws)) {
        f(&mut self.0.lock().unwrap())
    }

    fn client(&self) -> Fake {
        let (observed, created, updated, deleted) = (self.clone(), self.clone(), self.clone(), self.clone());
        Fake::default()
            .on_observe(move |_| observed.0.lock().unwrap().observe())
            .on_create(move |_| {
                created.with(|a| a.becomes("CREATING"));
                Ok(ConnectionDetails::new())
            })
            .on_update(move |_, _| {
                updated.with(|a| a.becomes("UPDATING"));
                Ok(())
            })
            .on_delete(move |_| {
                deleted.with(|a| a.status = "DELETING");
                Ok(())
            })
    }
}

struct Harness {
    api: Api<Cluster>,
    secrets: Api<Secret>,
    aws: Fake,
    reconciler: Arc<Reconciler<Fake>>,
}

impl Harness {
    async fn new(objects: Vec<Cluster>, aws: Fake) -> Self {
        let kube = kube_fake_client::ClientBuilder::new()
            .with_resource::<Cluster>()
            .with_status_subresource::<Cluster>()
            .with_objects(objects)
            .build()
            .await
            .unwrap();
        let reconciler = Arc::new(Reconciler::new(
            kube.clone(),
            aws.clone(),
            TIMING,
            Arc::new(Metrics::default()),
            "Cluster",
        ));
        Self {
            api: Api::namespaced(kube.clone(), NS),
            secrets: Api::namespaced(kube, NS),
            aws,
            reconciler,
        }
    }

    async fn reconcile(&self, name: &str) -> Action {
        let mr = self.api.get(name).await.unwrap();
        reconcile(Arc::new(mr), self.reconciler.clone()).await.unwrap()
    }

    async fn condition(&self, name: &str, type_: &str) -> (ConditionStatus, String, Option<String>) {
        let mr = self.api.get(name).await.unwrap();
        let c = mr
            .status
            .unwrap()
            .conditions
            .into_iter()
            .find(|c| c.type_ == type_)
            .unwrap();
        (c.status, c.reason, c.message)
    }
}

#[tokio::test]
async fn a_new_cluster_is_created_once_then_becomes_ready_and_publishes_its_secret() {
    let aws = Scripted::default();
    let h = Harness::new(vec![cluster_in(NS, "demo")], aws.client()).await;

    assert_eq!(h.reconcile("demo").await, Action::requeue(TIMING.busy));
    let mr = h.api.get("demo").await.unwrap();
    let annotations = mr.metadata.annotations.clone().unwrap();
    assert_eq!(annotations[EXTERNAL_NAME], "demo");
    assert!(annotations.contains_key(CREATE_PENDING) && annotations.contains_key(CREATE_SUCCEEDED));
    assert_eq!(mr.metadata.finalizers, Some(vec![FINALIZER.to_string()]));
    assert_eq!(h.condition("demo", "Ready").await.1, "Creating");
    assert_eq!(h.condition("demo", "Synced").await.1, "ReconcileSuccess");

    // AWS still CREATING: wait, do not create again.
    assert_eq!(h.reconcile("demo").await, Action::requeue(TIMING.busy));
    assert_eq!(h.aws.calls(), ["observe", "create", "observe"]);

    aws.with(|a| a.status = "ACTIVE");
    assert_eq!(h.reconcile("demo").await, Action::requeue(TIMING.poll));
    assert_eq!(
        h.condition("demo", "Ready").await,
        (ConditionStatus::True, "Available".into(), None)
    );
    let secret = h.secrets.get("demo-kubeconfig").await.unwrap();
    assert!(secret.data.unwrap().contains_key("kubeconfig"));
    let status = h.api.get("demo").await.unwrap().status.unwrap();
    assert_eq!(status.at_provider.status.as_deref(), Some("ACTIVE"));
}

#[tokio::test]
async fn a_steady_cluster_costs_one_observe_and_no_status_write_per_poll() {
    let aws = Scripted::default();
    let h = Harness::new(vec![cluster_in(NS, "steady")], aws.client()).await;
    h.reconcile("steady").await;
    aws.with(|a| a.status = "ACTIVE");
    h.reconcile("steady").await;
    let before = h.api.get("steady").await.unwrap().metadata.resource_version;
    let calls_before = h.aws.calls().len();

    assert_eq!(h.reconcile("steady").await, Action::requeue(TIMING.poll));
    assert_eq!(h.aws.calls().len(), calls_before + 1);
    assert_eq!(
        h.api.get("steady").await.unwrap().metadata.resource_version,
        before
    );
}

#[tokio::test]
async fn drift_is_corrected_but_not_while_aws_is_busy() {
    let aws = Scripted::default();
    let h = Harness::new(vec![cluster_in(NS, "drift")], aws.client()).await;
    h.reconcile("drift").await;
    aws.with(|a| a.up_to_date = false);
    h.reconcile("drift").await; // still CREATING
    assert!(!h.aws.calls().contains(&"update"));

    aws.with(|a| a.status = "ACTIVE");
    h.reconcile("drift").await;
    assert_eq!(h.aws.calls().last(), Some(&"update"));
    h.reconcile("drift").await;
    // An updating cluster still serves: Ready stays Available.
    assert_eq!(h.condition("drift", "Ready").await.1, "Available");
}

#[tokio::test]
async fn a_paused_cluster_is_never_observed() {
    let mut c = cluster_in(NS, "paused");
    c.metadata.annotations = Some([(PAUSED.to_string(), "true".to_string())].into());
    let h = Harness::new(vec![c], Fake::default()).await;
    assert_eq!(h.reconcile("paused").await, Action::await_change());
    assert!(h.aws.calls().is_empty());
    assert_eq!(h.condition("paused", "Synced").await.1, "ReconcilePaused");
}

#[tokio::test]
async fn throttling_is_reported_on_synced_and_retried_with_growing_backoff() {
    let aws = Scripted::default();
    let h = Harness::new(vec![cluster_in(NS, "slow")], aws.client()).await;
    aws.with(|a| {
        a.observe_error = Some(ExternalError::Transient(
            "cannot describe EKS cluster slow: ThrottlingException (HTTP 400)".into(),
        ))
    });
    assert_eq!(h.reconcile("slow").await, Action::requeue(Duration::from_secs(1)));
    assert_eq!(h.reconcile("slow").await, Action::requeue(Duration::from_secs(2)));
    assert_eq!(h.reconcile("slow").await, Action::requeue(Duration::from_secs(4)));
    assert_eq!(h.reconcile("slow").await, Action::requeue(Duration::from_secs(8)));
    assert_eq!(h.reconcile("slow").await, Action::requeue(Duration::from_secs(8)));
    let (status, reason, message) = h.condition("slow", "Synced").await;
    assert_eq!(
        (status, reason.as_str()),
        (ConditionStatus::False, "ReconcileError")
    );
    assert!(message.unwrap().contains("ThrottlingException"));

    aws.with(|a| a.observe_error = None);
    h.reconcile("slow").await;
    assert_eq!(h.condition("slow", "Synced").await.1, "ReconcileSuccess");
}

/// A call the rate limit would have held past its timeout is not a failure: the resource comes back after the
/// wait, its conditions untouched, and the backoff does not grow.
#[tokio::test]
async fn a_poll_deferred_by_the_rate_limit_requeues_after_the_wait_and_leaves_the_conditions() {
    let aws = Scripted::default();
    let h = Harness::new(vec![cluster_in(NS, "busy")], aws.client()).await;
    aws.with(|a| {
        a.exists = true;
        a.status = "ACTIVE";
        a.up_to_date = true;
    });
    h.reconcile("busy").await;
    assert_eq!(h.condition("busy", "Synced").await.1, "ReconcileSuccess");
    let before = h.api.get("busy").await.unwrap().status;
    let wait = Duration::from_secs(12);
    aws.with(|a| a.observe_error = Some(ExternalError::Deferred(wait)));
    assert_eq!(h.reconcile("busy").await, Action::requeue(wait));
    assert_eq!(h.reconcile("busy").await, Action::requeue(wait));
    assert_eq!(h.api.get("busy").await.unwrap().status, before);
    // A real failure afterwards starts from the first backoff step: deferrals did not count as failures.
    aws.with(|a| a.observe_error = Some(ExternalError::Transient("x".into())));
    assert_eq!(h.reconcile("busy").await, Action::requeue(Duration::from_secs(1)));
}

#[tokio::test]
async fn a_failed_create_is_marked_and_reported() {
    let refused = "cannot create EKS cluster bad: InvalidParameterException: role";
    let aws = Fake::default().on_create(move |_| Err(ExternalError::Rejected(refused.into())));
    let h = Harness::new(vec![cluster_in(NS, "bad")], aws).await;
    h.reconcile("bad").await;
    let mr = h.api.get("bad").await.unwrap();
    assert!(mr.metadata.annotations.unwrap().contains_key(CREATE_FAILED));
    let (_, reason, message) = h.condition("bad", "Synced").await;
    assert_eq!(reason, "ReconcileError");
    assert!(message.unwrap().contains("InvalidParameterException"));
}

fn deleted(mut c: Cluster) -> Cluster {
    c.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    c.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
    c.metadata.annotations = Some([(EXTERNAL_NAME.to_string(), c.metadata.name.clone().unwrap())].into());
    c
}

#[tokio::test]
async fn a_deleted_cluster_is_deleted_in_aws_before_its_finalizer_goes() {
    let aws = Scripted::default();
    let h = Harness::new(vec![deleted(cluster_in(NS, "gone"))], aws.client()).await;
    aws.with(|a| {
        a.exists = true;
        a.status = "ACTIVE";
        a.up_to_date = true;
    });
    assert_eq!(h.reconcile("gone").await, Action::requeue(TIMING.busy));
    assert_eq!(h.condition("gone", "Ready").await.1, "Deleting");
    // AWS is DELETING now: no second delete.
    h.reconcile("gone").await;
    assert_eq!(h.aws.calls().iter().filter(|c| **c == "delete").count(), 1);

    aws.with(|a| a.exists = false);
    assert_eq!(h.reconcile("gone").await, Action::await_change());
    let finalizers = h
        .api
        .get("gone")
        .await
        .map(|c| c.metadata.finalizers.unwrap_or_default());
    assert!(finalizers.map_or(true, |f| f.is_empty()));
}

#[tokio::test]
async fn without_the_delete_policy_a_deleted_cluster_is_orphaned() {
    let mut c = deleted(cluster_in(NS, "keep"));
    c.spec.resource.management_policies = vec![
        ManagementPolicy::Observe,
        ManagementPolicy::Create,
        ManagementPolicy::Update,
    ];
    let exists = |_: &Cluster| Ok(Observation::available(ClusterObservation::default()));
    let h = Harness::new(vec![c], Fake::default().on_observe(exists)).await;
    assert_eq!(h.reconcile("keep").await, Action::await_change());
    assert!(h.aws.calls().is_empty());
}
