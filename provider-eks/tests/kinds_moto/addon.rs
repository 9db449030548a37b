//! Addon and PodIdentityAssociation against the EKS stand-in (moto lacks both APIs) on a moto EKS cluster.

use aws_sdk_eks::types::VpcConfigRequest;
use modelplane_eks_api::*;
use modelplane_provider_eks::eks::addon::AddonConnector;
use modelplane_provider_eks::eks::pod_identity::PodIdentityConnector;
use modelplane_provider_eks::managed::conditions::Readiness;
use modelplane_provider_eks::managed::external::{ExternalClient, ExternalError};
use modelplane_provider_eks::managed::reconciler::Connector;

use super::{REGION, aws, cache, lose_external_name, moto, resource_spec, stamp};

const ROLE: &str = "arn:aws:iam::123456789012:role/demo-efs-csi";

async fn eks_cluster(eks: &aws_sdk_eks::Client, name: &str) {
    eks.create_cluster()
        .name(name)
        .role_arn("arn:aws:iam::123456789012:role/eks-cluster")
        .resources_vpc_config(
            VpcConfigRequest::builder()
                .subnet_ids("subnet-a")
                .subnet_ids("subnet-b")
                .build(),
        )
        .send()
        .await
        .unwrap();
}

fn addon_mr(name: &str, addon: &str) -> Addon {
    stamp(
        Addon::new(
            name,
            AddonSpec {
                for_provider: AddonParameters {
                    region: REGION.into(),
                    cluster_name: "demo".into(),
                    addon_name: addon.into(),
                    ..Default::default()
                },
                resource: resource_spec(),
            },
        ),
        name,
    )
}

fn association_mr(name: &str) -> PodIdentityAssociation {
    stamp(
        PodIdentityAssociation::new(
            name,
            PodIdentityAssociationSpec {
                for_provider: PodIdentityAssociationParameters {
                    region: REGION.into(),
                    cluster_name: "demo".into(),
                    namespace: "kube-system".into(),
                    service_account: "efs-csi-controller-sa".into(),
                    role_arn: ROLE.into(),
                },
                resource: resource_spec(),
            },
        ),
        name,
    )
}

#[tokio::test]
async fn an_addon_waits_for_its_cluster_then_is_created_late_initialized_updated_and_deleted() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let cache = cache(&moto).await;
    let eks = aws(&cache).await.eks;
    let mr = addon_mr("demo-aws-efs-csi-driver", "aws-efs-csi-driver");
    let client = AddonConnector { cache: cache.clone() }
        .connect(&mr)
        .await
        .unwrap();

    assert!(!client.observe(&mr).await.unwrap().exists);
    let err = client.create(&mr).await.unwrap_err();
    assert!(matches!(err, ExternalError::Waiting(_)), "{err}");

    eks_cluster(&eks, "demo").await;
    client.create(&mr).await.unwrap();
    // A lost answer: Create again adopts instead of failing.
    client.create(&lose_external_name(&mr)).await.unwrap();
    let seen = client.observe(&mr).await.unwrap();
    assert!(seen.exists && seen.up_to_date, "{seen:?}");
    assert_eq!(seen.readiness, Readiness::Available);
    let version = seen.at_provider.addon_version.clone().unwrap();
    assert_eq!(
        seen.late_initialized,
        Some(serde_json::json!({ "addonVersion": version }))
    );
    let listed = eks.list_addons().cluster_name("demo").send().await.unwrap();
    assert_eq!(listed.addons(), ["aws-efs-csi-driver"]);

    let mut configured = mr.clone();
    configured.spec.for_provider.addon_version = Some(version);
    configured.spec.for_provider.configuration_values = Some("controller:\n  replicaCount: 1\n".into());
    let drifted = client.observe(&configured).await.unwrap();
    assert!(!drifted.up_to_date);
    client.update(&configured, &drifted.at_provider).await.unwrap();
    assert!(client.observe(&configured).await.unwrap().up_to_date);

    client.delete(&configured).await.unwrap();
    assert!(!client.observe(&configured).await.unwrap().exists);
    client.delete(&configured).await.unwrap();
}

#[tokio::test]
async fn an_addon_eks_does_not_offer_is_refused_naming_the_field() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let cache = cache(&moto).await;
    eks_cluster(&aws(&cache).await.eks, "demo").await;
    let mr = addon_mr("bogus", "no-such-addon");
    let client = AddonConnector { cache: cache.clone() }
        .connect(&mr)
        .await
        .unwrap();
    let err = client.create(&mr).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.starts_with("spec.forProvider (addonName \"no-such-addon\"")),
        "{err}"
    );
}

#[tokio::test]
async fn a_pod_identity_association_is_created_adopted_after_a_crash_rebound_and_deleted() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let cache = cache(&moto).await;
    let eks = aws(&cache).await.eks;
    eks_cluster(&eks, "demo").await;
    let mr = association_mr("demo-efs-csi");
    let client = PodIdentityConnector { cache: cache.clone() }
        .connect(&mr)
        .await
        .unwrap();

    assert!(!client.observe(&mr).await.unwrap().exists);
    client.create(&mr).await.unwrap();
    // The answer (and with it the association ID) was lost: Observe finds the association by its service
    // account, and a second Create does not make another.
    let restarted = lose_external_name(&mr);
    let seen = client.observe(&restarted).await.unwrap();
    assert!(seen.exists && seen.up_to_date, "{seen:?}");
    client.create(&restarted).await.unwrap();
    let listed = eks
        .list_pod_identity_associations()
        .cluster_name("demo")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.associations().len(), 1);
    assert_eq!(
        listed.associations()[0].association_id(),
        seen.at_provider.association_id.as_deref()
    );

    // With the ID recorded, the next observe describes it directly; a new role is applied in place.
    let mut recorded = mr.clone();
    recorded.status = Some(PodIdentityAssociationStatus {
        at_provider: seen.at_provider.clone(),
        ..Default::default()
    });
    recorded.spec.for_provider.role_arn = "arn:aws:iam::123456789012:role/other".into();
    let drifted = client.observe(&recorded).await.unwrap();
    assert!(!drifted.up_to_date);
    client.update(&recorded, &drifted.at_provider).await.unwrap();
    assert!(client.observe(&recorded).await.unwrap().up_to_date);

    // Moving it to another service account is refused by name.
    let mut moved = recorded.clone();
    moved.spec.for_provider.service_account = "other-sa".into();
    let err = client.observe(&moved).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.starts_with("spec.forProvider.serviceAccount")),
        "{err}"
    );

    client.delete(&recorded).await.unwrap();
    assert!(!client.observe(&recorded).await.unwrap().exists);
    let listed = eks
        .list_pod_identity_associations()
        .cluster_name("demo")
        .send()
        .await
        .unwrap();
    assert!(listed.associations().is_empty());

    let bad = PodIdentityAssociation {
        spec: PodIdentityAssociationSpec {
            for_provider: PodIdentityAssociationParameters {
                role_arn: "demo-efs-csi".into(),
                ..mr.spec.for_provider.clone()
            },
            resource: resource_spec(),
        },
        ..mr.clone()
    };
    let err = client.create(&bad).await.unwrap_err();
    assert!(
        matches!(&err, ExternalError::Rejected(m) if m.starts_with("spec.forProvider.roleArn")),
        "{err}"
    );
}

/// Addon and PodIdentityAssociation map a Create error the same way (one helper): no cluster yet is Waiting
/// on the cluster's name for both.
#[tokio::test]
async fn both_kinds_wait_on_the_cluster_name_while_the_cluster_does_not_exist() {
    let moto = moto();
    let moto = moto.lock().await;
    super::support::reset_moto(&moto);
    let cache = cache(&moto).await;
    let addon = addon_mr("demo-coredns", "coredns");
    let association = association_mr("demo-efs-csi");
    let addons = AddonConnector { cache: cache.clone() }
        .connect(&addon)
        .await
        .unwrap();
    let associations = PodIdentityConnector { cache: cache.clone() }
        .connect(&association)
        .await
        .unwrap();
    let errors = [
        addons.create(&addon).await.unwrap_err(),
        associations.create(&association).await.unwrap_err(),
    ];
    for err in errors {
        assert!(
            matches!(&err, ExternalError::Waiting(m)
                if m == "spec.forProvider.clusterName: EKS cluster demo does not exist yet"),
            "{err}"
        );
    }
}
