//! The generic managed reconciler, end to end through a real `kube::Client` (kube-fake-client) and a scripted
//! AWS double behind the ExternalClient seam. moto cannot show CREATING/UPDATING/DELETING; this double can.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::runtime::controller::Action;
use modelplane_eks_api::*;
use modelplane_provider_eks::eks::convert::cluster_phase;
use modelplane_provider_eks::managed::annotations::{
    CREATE_FAILED, CREATE_PENDING, CREATE_SUCCEEDED, EXTERNAL_NAME, FINALIZER, PAUSED,
};
use modelplane_provider_eks::managed::external::{
    ConnectionDetails, ExternalClient, ExternalError, Observation,
};
use modelplane_provider_eks::managed::reconciler::{Connector, Reconciler, Timing, reconcile};
use modelplane_provider_eks::metrics::Metrics;

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

/// A scripted EKS: what exists, its status, whether it matches the spec, and every call made.
#[derive(Default)]
struct Aws {
    exists: bool,
    status: &'static str,
    up_to_date: bool,
    observe_error: Option<ExternalError>,
    create_error: Option<ExternalError>,
    calls: Vec<String>,
}

#[derive(Clone, Default)]
struct FakeAws(Arc<Mutex<Aws>>);

impl FakeAws {
    fn with(&self, f: impl FnOnce(&mut Aws)) {
        f(&mut self.0.lock().unwrap())
    }
    fn calls(&self) -> Vec<String> {
        self.0.lock().unwrap().calls.clone()
    }
}

#[async_trait]
impl Connector<Cluster> for FakeAws {
    type Client = FakeAws;
    type AtProvider = ClusterObservation;
    async fn connect(&self, _: &Cluster) -> Result<FakeAws, ExternalError> {
        Ok(self.clone())
    }
}

#[async_trait]
impl ExternalClient<Cluster> for FakeAws {
    type AtProvider = ClusterObservation;

    async fn observe(&self, _: &Cluster) -> Result<Observation<ClusterObservation>, ExternalError> {
        let mut aws = self.0.lock().unwrap();
        aws.calls.push("observe".into());
        if let Some(e) = aws.observe_error.clone() {
            return Err(e);
        }
        if !aws.exists {
            return Ok(Observation::missing());
        }
        let phase = cluster_phase(aws.status);
        let mut details = ConnectionDetails::new();
        if aws.status == "ACTIVE" {
            details.insert("kubeconfig".into(), b"apiVersion: v1\nkind: Config\n".to_vec());
        }
        Ok(Observation {
            exists: true,
            up_to_date: aws.up_to_date,
            readiness: phase.readiness,
            busy: phase.busy,
            late_initialized: None,
            at_provider: ClusterObservation {
                status: Some(aws.status.into()),
                ..Default::default()
            },
            connection_details: details,
        })
    }

    async fn create(&self, _: &Cluster) -> Result<ConnectionDetails, ExternalError> {
        let mut aws = self.0.lock().unwrap();
        aws.calls.push("create".into());
        if let Some(e) = aws.create_error.clone() {
            return Err(e);
        }
        aws.exists = true;
        aws.status = "CREATING";
        aws.up_to_date = true;
        Ok(ConnectionDetails::new())
    }

    async fn update(&self, _: &Cluster, _: &ClusterObservation) -> Result<(), ExternalError> {
        let mut aws = self.0.lock().unwrap();
        aws.calls.push("update".into());
        aws.status = "UPDATING";
        aws.up_to_date = true;
        Ok(())
    }

    async fn delete(&self, _: &Cluster) -> Result<(), ExternalError> {
        let mut aws = self.0.lock().unwrap();
        aws.calls.push("delete".into());
        aws.status = "DELETING";
        Ok(())
    }
}

fn cluster(name: &str) -> Cluster {
    let mut c = Cluster::new(
        name,
        ClusterSpec {
            for_provider: ClusterParameters {
                region: "us-east-1".into(),
                version: "1.34".into(),
                role_arn: "arn:aws:iam::123456789012:role/eks".into(),
                networking: Networking {
                    subnet_ids: vec!["subnet-a".into()],
                    vpc: None,
                    ..Default::default()
                },
                endpoint_public_access: true,
                ..Default::default()
            },
            resource: ResourceSpec {
                provider_config_ref: ProviderConfigReference::default(),
                management_policies: vec![ManagementPolicy::All],
                write_connection_secret_to_ref: Some(SecretReference {
                    name: format!("{name}-conn"),
                }),
            },
        },
    );
    c.metadata.namespace = Some(NS.into());
    c
}

struct Harness {
    api: Api<Cluster>,
    secrets: Api<Secret>,
    aws: FakeAws,
    reconciler: Arc<Reconciler<FakeAws>>,
}

impl Harness {
    async fn new(objects: Vec<Cluster>) -> Self {
        let kube = kube_fake_client::ClientBuilder::new()
            .with_resource::<Cluster>()
            .with_status_subresource::<Cluster>()
            .with_objects(objects)
            .build()
            .await
            .unwrap();
        let aws = FakeAws::default();
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
    let h = Harness::new(vec![cluster("demo")]).await;

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

    h.aws.with(|a| a.status = "ACTIVE");
    assert_eq!(h.reconcile("demo").await, Action::requeue(TIMING.poll));
    assert_eq!(
        h.condition("demo", "Ready").await,
        (ConditionStatus::True, "Available".into(), None)
    );
    let secret = h.secrets.get("demo-conn").await.unwrap();
    assert!(secret.data.unwrap().contains_key("kubeconfig"));
    let status = h.api.get("demo").await.unwrap().status.unwrap();
    assert_eq!(status.at_provider.status.as_deref(), Some("ACTIVE"));
}

#[tokio::test]
async fn a_steady_cluster_costs_one_observe_and_no_status_write_per_poll() {
    let h = Harness::new(vec![cluster("steady")]).await;
    h.reconcile("steady").await;
    h.aws.with(|a| a.status = "ACTIVE");
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
    let h = Harness::new(vec![cluster("drift")]).await;
    h.reconcile("drift").await;
    h.aws.with(|a| a.up_to_date = false);
    h.reconcile("drift").await; // still CREATING
    assert!(!h.aws.calls().contains(&"update".to_string()));

    h.aws.with(|a| a.status = "ACTIVE");
    h.reconcile("drift").await;
    assert_eq!(h.aws.calls().last().unwrap(), "update");
    h.reconcile("drift").await;
    // An updating cluster still serves: Ready stays Available.
    assert_eq!(h.condition("drift", "Ready").await.1, "Available");
}

#[tokio::test]
async fn a_paused_cluster_is_never_observed() {
    let mut c = cluster("paused");
    c.metadata.annotations = Some([(PAUSED.to_string(), "true".to_string())].into());
    let h = Harness::new(vec![c]).await;
    assert_eq!(h.reconcile("paused").await, Action::await_change());
    assert!(h.aws.calls().is_empty());
    assert_eq!(h.condition("paused", "Synced").await.1, "ReconcilePaused");
}

#[tokio::test]
async fn throttling_is_reported_on_synced_and_retried_with_growing_backoff() {
    let h = Harness::new(vec![cluster("slow")]).await;
    h.aws.with(|a| {
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

    h.aws.with(|a| a.observe_error = None);
    h.reconcile("slow").await;
    assert_eq!(h.condition("slow", "Synced").await.1, "ReconcileSuccess");
}

#[tokio::test]
async fn a_failed_create_is_marked_and_reported() {
    let h = Harness::new(vec![cluster("bad")]).await;
    h.aws.with(|a| {
        a.create_error = Some(ExternalError::Rejected(
            "cannot create EKS cluster bad: InvalidParameterException: role".into(),
        ))
    });
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
    let h = Harness::new(vec![deleted(cluster("gone"))]).await;
    h.aws.with(|a| {
        a.exists = true;
        a.status = "ACTIVE";
        a.up_to_date = true;
    });
    assert_eq!(h.reconcile("gone").await, Action::requeue(TIMING.busy));
    assert_eq!(h.condition("gone", "Ready").await.1, "Deleting");
    // AWS is DELETING now: no second delete.
    h.reconcile("gone").await;
    assert_eq!(h.aws.calls().iter().filter(|c| *c == "delete").count(), 1);

    h.aws.with(|a| a.exists = false);
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
    let mut c = deleted(cluster("keep"));
    c.spec.resource.management_policies = vec![
        ManagementPolicy::Observe,
        ManagementPolicy::Create,
        ManagementPolicy::Update,
    ];
    let h = Harness::new(vec![c]).await;
    h.aws.with(|a| a.exists = true);
    assert_eq!(h.reconcile("keep").await, Action::await_change());
    assert!(h.aws.calls().is_empty());
}
