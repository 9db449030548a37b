//! The reconciler records Kubernetes Events for what it asked AWS and why that failed (a Role against moto).

use std::sync::Arc;

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, PostParams};
use modelplane_eks_api::*;
use modelplane_provider_eks::eks::clients::ClientCache;
use modelplane_provider_eks::eks::role::RoleConnector;
use modelplane_provider_eks::managed::reconciler::{Reconciler, Timing, reconcile};
use modelplane_provider_eks::managed::recorder::Events;
use modelplane_provider_eks::metrics::Metrics;

use super::{NS, moto, resource_spec};

fn role(name: &str, policy: &str) -> Role {
    let mut r = Role::new(
        name,
        RoleSpec {
            for_provider: RoleParameters {
                assumed_by: "eks.amazonaws.com".into(),
                policy_arns: vec![policy.into()],
                ..Default::default()
            },
            resource: resource_spec(),
        },
    );
    r.metadata.namespace = Some(NS.into());
    r.metadata.uid = Some(format!("uid-{name}"));
    r.metadata.generation = Some(1);
    r
}

#[tokio::test]
async fn a_rejected_create_and_a_successful_one_leave_events_with_crossplane_reasons() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let (pc, secret) = super::provider_config(&moto);
    let bad = role("bad", "not-an-arn");
    let kube = kube_fake_client::ClientBuilder::new()
        .with_resource::<ProviderConfig>()
        .with_resource::<Role>()
        .with_status_subresource::<Role>()
        .with_resource::<Event>()
        .with_object(pc)
        .with_object(secret)
        .with_object(bad)
        .build()
        .await
        .unwrap();
    let cache = Arc::new(ClientCache::new(kube.clone()));
    let iam = super::aws(&cache).await.iam;
    let policy = iam
        .create_policy()
        .policy_name("describe")
        .policy_document(r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"eks:Describe*","Resource":"*"}]}"#)
        .send()
        .await
        .unwrap()
        .policy
        .unwrap()
        .arn
        .unwrap();
    let connector = RoleConnector { cache };
    let reconciler = Arc::new(
        Reconciler::new(
            kube.clone(),
            connector,
            Timing::default(),
            Arc::new(Metrics::default()),
            "Role",
        )
        .with_events(Events::new(kube.clone())),
    );
    let roles: Api<Role> = Api::namespaced(kube.clone(), NS);
    roles
        .create(&PostParams::default(), &role("good", &policy))
        .await
        .unwrap();
    for name in ["bad", "good"] {
        let mr = roles.get(name).await.unwrap();
        reconcile(Arc::new(mr), reconciler.clone()).await.unwrap();
    }
    let events = Api::<Event>::namespaced(kube.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    let seen: Vec<(String, String, String)> = events
        .items
        .iter()
        .map(|e| {
            (
                e.regarding
                    .as_ref()
                    .and_then(|r| r.name.clone())
                    .unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                e.type_.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        seen.contains(&(
            "bad".into(),
            "CannotCreateExternalResource".into(),
            "Warning".into()
        )),
        "{seen:?}"
    );
    let note = events
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("CannotCreateExternalResource"))
        .and_then(|e| e.note.clone())
        .unwrap_or_default();
    assert!(note.starts_with("spec.forProvider.policyArns[0]"), "{note}");
    assert!(
        seen.contains(&("good".into(), "CreatedExternalResource".into(), "Normal".into())),
        "{seen:?}"
    );
    assert!(
        !seen
            .iter()
            .any(|(name, reason, _)| name == "good" && reason.starts_with("Cannot")),
        "{seen:?}"
    );
}
