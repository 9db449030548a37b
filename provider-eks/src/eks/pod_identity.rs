//! `PodIdentityAssociation` <-> an EKS pod identity association. EKS allows one association per (cluster,
//! namespace, service account), so a lost Create answer is found again by listing exactly that triple; the
//! association ID AWS picks is kept in `status.atProvider`, so steady-state observes cost one Describe. The
//! role changes in place; the triple cannot, and a change to it is refused naming the field.

use async_trait::async_trait;
use aws_sdk_eks::types::PodIdentityAssociation as EksAssociation;
use modelplane_eks_api::{
    PodIdentityAssociation, PodIdentityAssociationObservation, PodIdentityAssociationParameters,
    names::{is_dns_label, is_dns_subdomain},
};

use super::clients::AwsClients;
use super::errors::{NOT_FOUND, classify, created_on_cluster, found, gone};
use super::owned::{connector, owner_tags};
use super::request_token;
use crate::managed::external::{ConnectionDetails, ExternalClient, ExternalError, Observation};

connector!(PodIdentityConnector, PodIdentityAssociation, PodIdentityClient, PodIdentityAssociationObservation, mr => &mr.spec.for_provider.region);

pub struct PodIdentityClient {
    clients: AwsClients,
}

impl PodIdentityClient {
    pub fn new(clients: AwsClients) -> Self {
        Self { clients }
    }
}

/// A spec EKS would reject, refused before any call with the field named.
pub fn validate(spec: &PodIdentityAssociationParameters) -> Result<(), ExternalError> {
    let reject = |why: String| Err(ExternalError::Rejected(why));
    if spec.cluster_name.is_empty() {
        return reject("spec.forProvider.clusterName: required".into());
    }
    if !is_dns_label(&spec.namespace) {
        return reject(format!(
            "spec.forProvider.namespace: {:?} is not a Kubernetes namespace name",
            spec.namespace
        ));
    }
    if !is_dns_subdomain(&spec.service_account) {
        return reject(format!(
            "spec.forProvider.serviceAccount: {:?} is not a Kubernetes service account name",
            spec.service_account
        ));
    }
    let parts: Vec<&str> = spec.role_arn.splitn(6, ':').collect();
    let role_ok = parts.len() == 6
        && parts[0] == "arn"
        && parts[1].starts_with("aws")
        && parts[2] == "iam"
        && parts[4].len() == 12
        && parts[5].starts_with("role/");
    if !role_ok {
        return reject(format!(
            "spec.forProvider.roleArn: {:?} is not an IAM role ARN",
            spec.role_arn
        ));
    }
    Ok(())
}

/// The spec moved an association that exists (cluster, namespace or service account changed).
fn identity_change(spec: &PodIdentityAssociationParameters, found: &EksAssociation) -> Option<String> {
    let checks = [
        ("clusterName", found.cluster_name(), spec.cluster_name.as_str()),
        ("namespace", found.namespace(), spec.namespace.as_str()),
        (
            "serviceAccount",
            found.service_account(),
            spec.service_account.as_str(),
        ),
    ];
    checks.iter().find_map(|(field, have, want)| {
        (have.is_some_and(|h| h != *want)).then(|| {
            format!(
                "spec.forProvider.{field}: cannot change {:?} to {want:?} on an existing association; create a \
                 new PodIdentityAssociation and delete this one",
                have.unwrap_or_default()
            )
        })
    })
}

impl PodIdentityClient {
    async fn describe(&self, cluster: &str, id: &str) -> Result<Option<EksAssociation>, ExternalError> {
        let described = self
            .clients
            .eks
            .describe_pod_identity_association()
            .cluster_name(cluster)
            .association_id(id)
            .send()
            .await;
        let what = format!("cannot describe pod identity association {id}");
        Ok(found(described, NOT_FOUND, &what)?.and_then(|out| out.association))
    }

    /// The association for the spec's (cluster, namespace, service account): by the recorded ID when there
    /// is one, else by listing that triple (after a lost Create answer, or a lost status).
    async fn find(&self, mr: &PodIdentityAssociation) -> Result<Option<EksAssociation>, ExternalError> {
        let spec = &mr.spec.for_provider;
        let recorded = mr
            .status
            .as_ref()
            .and_then(|s| s.at_provider.association_id.clone());
        if let Some(id) = recorded {
            let cluster = mr
                .status
                .as_ref()
                .and_then(|s| s.at_provider.association_arn.as_deref())
                .and_then(|arn| arn.rsplit('/').nth(1))
                .unwrap_or(&spec.cluster_name)
                .to_owned();
            if let Some(found) = self.describe(&cluster, &id).await? {
                return Ok(Some(found));
            }
        }
        let listed = self
            .clients
            .eks
            .list_pod_identity_associations()
            .cluster_name(&spec.cluster_name)
            .namespace(&spec.namespace)
            .service_account(&spec.service_account)
            .send()
            .await;
        // No cluster, so no association.
        let Some(listed) = found(listed, NOT_FOUND, "cannot list pod identity associations")? else {
            return Ok(None);
        };
        let summaries = listed.associations.unwrap_or_default();
        match summaries.iter().find_map(|s| s.association_id()) {
            Some(id) => self.describe(&spec.cluster_name, id).await,
            None => Ok(None),
        }
    }
}

#[async_trait]
impl ExternalClient<PodIdentityAssociation> for PodIdentityClient {
    type AtProvider = PodIdentityAssociationObservation;

    async fn observe(
        &self,
        mr: &PodIdentityAssociation,
    ) -> Result<Observation<PodIdentityAssociationObservation>, ExternalError> {
        let Some(found) = self.find(mr).await? else {
            return Ok(Observation::missing());
        };
        if let Some(why) = identity_change(&mr.spec.for_provider, &found) {
            return Err(ExternalError::Rejected(why));
        }
        let at_provider = PodIdentityAssociationObservation {
            association_id: found.association_id().map(str::to_owned),
            association_arn: found.association_arn().map(str::to_owned),
        };
        Ok(Observation {
            up_to_date: found.role_arn() == Some(mr.spec.for_provider.role_arn.as_str()),
            ..Observation::available(at_provider)
        })
    }

    async fn create(&self, mr: &PodIdentityAssociation) -> Result<ConnectionDetails, ExternalError> {
        let spec = &mr.spec.for_provider;
        validate(spec)?;
        let created = self
            .clients
            .eks
            .create_pod_identity_association()
            .cluster_name(&spec.cluster_name)
            .namespace(&spec.namespace)
            .service_account(&spec.service_account)
            .role_arn(&spec.role_arn)
            .set_tags(Some(owner_tags(mr, &Default::default()).into_iter().collect()))
            .client_request_token(request_token(mr))
            .send()
            .await;
        // One per (namespace, service account): "in use" is ours from an earlier attempt.
        created_on_cluster(
            created,
            &spec.cluster_name,
            "spec.forProvider",
            "pod identity association",
        )?;
        Ok(ConnectionDetails::new())
    }

    async fn update(
        &self,
        mr: &PodIdentityAssociation,
        observed: &PodIdentityAssociationObservation,
    ) -> Result<(), ExternalError> {
        let spec = &mr.spec.for_provider;
        validate(spec)?;
        let Some(id) = &observed.association_id else {
            return Ok(());
        };
        self.clients
            .eks
            .update_pod_identity_association()
            .cluster_name(&spec.cluster_name)
            .association_id(id)
            .role_arn(&spec.role_arn)
            .client_request_token(request_token(mr))
            .send()
            .await
            .map_err(|e| classify(&format!("cannot update pod identity association {id}"), &e))?;
        Ok(())
    }

    async fn delete(&self, mr: &PodIdentityAssociation) -> Result<(), ExternalError> {
        let Some(found) = self.find(mr).await? else {
            return Ok(());
        };
        let (Some(cluster), Some(id)) = (found.cluster_name(), found.association_id()) else {
            return Ok(());
        };
        let deleted = self
            .clients
            .eks
            .delete_pod_identity_association()
            .cluster_name(cluster)
            .association_id(id)
            .send()
            .await;
        gone(
            deleted,
            NOT_FOUND,
            &format!("cannot delete pod identity association {id}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> PodIdentityAssociationParameters {
        PodIdentityAssociationParameters {
            region: "us-east-1".into(),
            cluster_name: "demo".into(),
            namespace: "kube-system".into(),
            service_account: "efs-csi-controller-sa".into(),
            role_arn: "arn:aws:iam::123456789012:role/demo-efs-csi".into(),
        }
    }

    #[test]
    fn bad_specs_are_refused_naming_the_field() {
        assert_eq!(validate(&spec()), Ok(()));
        let cases = [
            (
                PodIdentityAssociationParameters {
                    namespace: "Kube_System".into(),
                    ..spec()
                },
                "spec.forProvider.namespace",
            ),
            (
                PodIdentityAssociationParameters {
                    service_account: String::new(),
                    ..spec()
                },
                "spec.forProvider.serviceAccount",
            ),
            (
                PodIdentityAssociationParameters {
                    role_arn: "demo-efs-csi".into(),
                    ..spec()
                },
                "spec.forProvider.roleArn",
            ),
        ];
        for (s, field) in cases {
            let err = validate(&s).unwrap_err();
            assert!(err.to_string().starts_with(field), "{err}");
        }
    }

    #[test]
    fn a_moved_association_is_refused() {
        let found = EksAssociation::builder()
            .cluster_name("demo")
            .namespace("default")
            .service_account("efs-csi-controller-sa")
            .build();
        let why = identity_change(&spec(), &found).unwrap();
        assert!(why.starts_with("spec.forProvider.namespace"), "{why}");
        assert_eq!(
            identity_change(&spec(), &EksAssociation::builder().cluster_name("demo").build()),
            None
        );
    }
}
