//! Role against moto's IAM.

use modelplane_eks_api::*;
use modelplane_provider_eks::eks::role::RoleConnector;
use modelplane_provider_eks::managed::conditions::Readiness;
use modelplane_provider_eks::managed::external::{ExternalClient, ExternalError};
use modelplane_provider_eks::managed::reconciler::Connector;

use super::{aws, cache, lose_external_name, moto, resource_spec, stamp};

/// moto starts without AWS's managed policies, so the tests attach customer-managed ones of the same shape.
async fn policy(iam: &aws_sdk_iam::Client, name: &str) -> String {
    let doc = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"eks:Describe*","Resource":"*"}]}"#;
    let out = iam
        .create_policy()
        .policy_name(name)
        .policy_document(doc)
        .send()
        .await
        .unwrap();
    out.policy.unwrap().arn.unwrap()
}

fn role_mr(name: &str, policies: Vec<String>) -> Role {
    stamp(
        Role::new(
            name,
            RoleSpec {
                for_provider: RoleParameters {
                    assumed_by: "pods.eks.amazonaws.com".into(),
                    policy_arns: policies,
                    inline_policy: Some(
                        r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"autoscaling:Describe*","Resource":"*"}]}"#.into(),
                    ),
                    tags: [("team".to_string(), "a".to_string())].into(),
                },
                resource: resource_spec(),
            },
        ),
        name,
    )
}

#[tokio::test]
async fn a_role_is_created_with_its_policies_observed_ready_adopted_and_deleted() {
    let moto = moto();
    let moto = moto.lock().await;
    support_reset(&moto);
    let cache = cache(&moto).await;
    let iam = aws(&cache).await.iam;
    let first = policy(&iam, "first").await;
    let second = policy(&iam, "second").await;
    let mr = role_mr("demo-autoscaler", vec![first.clone()]);
    let client = RoleConnector { cache: cache.clone() }.connect(&mr).await.unwrap();

    assert!(!client.observe(&mr).await.unwrap().exists);
    client.create(&mr).await.unwrap();
    let seen = client.observe(&mr).await.unwrap();
    assert!(seen.exists && seen.up_to_date, "{seen:?}");
    assert_eq!(seen.readiness, Readiness::Available);
    assert_eq!(seen.at_provider.attached_policy_arns, vec![first.clone()]);
    let arn = seen.at_provider.arn.clone().unwrap();
    assert!(arn.ends_with(":role/demo-autoscaler"), "{arn}");

    // A crash after CreateRole lost the answer and the external name: the next reconcile finds the same role
    // (IAM names it), and a repeated Create finishes it without making a second one.
    let restarted = lose_external_name(&mr);
    let again = client.observe(&restarted).await.unwrap();
    assert!(again.exists && again.up_to_date, "{again:?}");
    assert_eq!(again.at_provider.arn.as_deref(), Some(arn.as_str()));
    client.create(&restarted).await.unwrap();
    let roles = iam.list_roles().send().await.unwrap();
    assert_eq!(roles.roles().len(), 1);

    // Drift in attachments is put right by Update.
    let mut changed = mr.clone();
    changed.spec.for_provider.policy_arns = vec![second.clone()];
    changed.spec.for_provider.inline_policy = None;
    let drifted = client.observe(&changed).await.unwrap();
    assert!(!drifted.up_to_date);
    client.update(&changed, &drifted.at_provider).await.unwrap();
    let after = client.observe(&changed).await.unwrap();
    assert!(after.up_to_date, "{after:?}");
    assert_eq!(after.at_provider.attached_policy_arns, vec![second]);

    client.delete(&changed).await.unwrap();
    assert!(!client.observe(&changed).await.unwrap().exists);
    assert!(iam.list_roles().send().await.unwrap().roles().is_empty());
    // Deleting what is gone is done, not an error.
    client.delete(&changed).await.unwrap();
}

#[tokio::test]
async fn a_role_iam_would_reject_is_refused_naming_the_field() {
    let moto = moto();
    let moto = moto.lock().await;
    support_reset(&moto);
    let cache = cache(&moto).await;
    let mut mr = role_mr("bad", vec!["AmazonEKSClusterPolicy".into()]);
    let client = RoleConnector { cache: cache.clone() }.connect(&mr).await.unwrap();
    let err = client.create(&mr).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.starts_with("spec.forProvider.policyArns[0]")),
        "{err}"
    );
    // A policy that is well-formed but does not exist: AWS's own answer, as a permanent error.
    mr.spec.for_provider.policy_arns = vec!["arn:aws:iam::123456789012:policy/missing".into()];
    let err = client.create(&mr).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.contains("NoSuchEntity")),
        "{err}"
    );
    assert!(
        aws(&cache)
            .await
            .iam
            .list_roles()
            .send()
            .await
            .unwrap()
            .roles()
            .len()
            <= 1,
        "no duplicate role"
    );
}

fn support_reset(moto: &super::support::Peer) {
    super::support::reset_moto(moto);
}
