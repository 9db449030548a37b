//! `Cluster` <-> EKS cluster. Networking: existing subnets only (`networking.subnetIds`); a VPC is the `Network`
//! kind's, and the composition passes its private subnets.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use aws_sdk_eks::types::VpcConfigRequest;
use modelplane_eks_api::{Cluster, ClusterObservation};

use super::clients::{AwsClients, ClientCache};
use super::convert::{ObservedCluster, cluster_drift, cluster_phase, region_change};
use super::errors::{IN_USE, NOT_FOUND, adopted, classify, found, gone_unless_held};
use super::owned::{self, LastSeen};
use super::{external_name, kubeconfig, request_token};
use crate::managed::external::{ConnectionDetails, ExternalClient, ExternalError, Observation};
use crate::managed::reconciler::Connector;

pub struct ClusterConnector {
    pub cache: Arc<ClientCache>,
}

#[async_trait]
impl Connector<Cluster> for ClusterConnector {
    type Client = ClusterClient;
    type AtProvider = ClusterObservation;

    async fn connect(&self, mr: &Cluster) -> Result<ClusterClient, ExternalError> {
        let region = &mr.spec.for_provider.region;
        let clients = owned::clients(&self.cache, mr, &mr.spec.resource, region).await?;
        Ok(ClusterClient {
            clients,
            observed: LastSeen::default(),
        })
    }
}

pub struct ClusterClient {
    clients: AwsClients,
    observed: LastSeen<ObservedCluster>,
}

#[async_trait]
impl ExternalClient<Cluster> for ClusterClient {
    type AtProvider = ClusterObservation;

    async fn observe(&self, mr: &Cluster) -> Result<Observation<ClusterObservation>, ExternalError> {
        let recorded_arn = mr.status.as_ref().and_then(|s| s.at_provider.arn.as_deref());
        if let Some(why) = region_change(recorded_arn, &mr.spec.for_provider.region) {
            return Err(ExternalError::Rejected(why));
        }
        let name = external_name(mr);
        let described = self.clients.eks.describe_cluster().name(&name).send().await;
        let described = found(
            described,
            NOT_FOUND,
            &format!("cannot describe EKS cluster {name}"),
        )?;
        let Some(cluster) = described.and_then(|out| out.cluster) else {
            return Ok(Observation::missing());
        };
        let status = cluster
            .status
            .as_ref()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default();
        let vpc = cluster.resources_vpc_config.as_ref();
        let observed = ObservedCluster {
            version: cluster.version.clone(),
            endpoint_public_access: vpc.is_some_and(|v| v.endpoint_public_access),
            endpoint_private_access: vpc.is_some_and(|v| v.endpoint_private_access),
            tags: cluster.tags.clone().unwrap_or_default().into_iter().collect(),
            role_arn: cluster.role_arn.clone(),
            subnet_ids: vpc.and_then(|v| v.subnet_ids.clone()).unwrap_or_default(),
            security_group_ids: vpc.and_then(|v| v.security_group_ids.clone()).unwrap_or_default(),
        };
        let drift = cluster_drift(&mr.spec.for_provider, &observed);
        self.observed.keep(observed);
        let at_provider = ClusterObservation {
            arn: cluster.arn.clone(),
            status: Some(status.clone()),
            endpoint: cluster.endpoint.clone(),
            version: cluster.version.clone(),
            platform_version: cluster.platform_version.clone(),
            oidc_issuer: cluster
                .identity
                .as_ref()
                .and_then(|i| i.oidc.as_ref())
                .and_then(|o| o.issuer.clone()),
            vpc_id: vpc.and_then(|v| v.vpc_id.clone()),
            subnet_ids: vpc.and_then(|v| v.subnet_ids.clone()).unwrap_or_default(),
        };
        let phase = cluster_phase(&status);
        let ca = cluster
            .certificate_authority
            .as_ref()
            .and_then(|c| c.data.clone());
        let connection_details = match (status.as_str(), &cluster.endpoint, ca) {
            ("ACTIVE" | "UPDATING", Some(endpoint), Some(ca)) => {
                let region = &mr.spec.for_provider.region;
                let (token, expires) =
                    kubeconfig::token(&self.clients.sdk, &name, region, SystemTime::now()).await?;
                kubeconfig::connection_details(&name, endpoint, &ca, &token, expires)
            }
            _ => ConnectionDetails::new(),
        };
        Ok(Observation {
            exists: true,
            up_to_date: drift.up_to_date(),
            readiness: phase.readiness,
            busy: phase.busy,
            late_initialized: None,
            at_provider,
            connection_details,
        })
    }

    async fn create(&self, mr: &Cluster) -> Result<ConnectionDetails, ExternalError> {
        let name = external_name(mr);
        let spec = &mr.spec.for_provider;
        if spec.networking.subnet_ids.is_empty() {
            let why =
                "spec.forProvider.networking.subnetIds: at least two subnets in different zones are required";
            return Err(ExternalError::Rejected(why.into()));
        }
        let vpc = VpcConfigRequest::builder()
            .set_subnet_ids(Some(spec.networking.subnet_ids.clone()))
            .set_security_group_ids(
                (!spec.networking.security_group_ids.is_empty())
                    .then(|| spec.networking.security_group_ids.clone()),
            )
            .endpoint_public_access(spec.endpoint_public_access)
            .endpoint_private_access(spec.endpoint_private_access)
            .build();
        let result = self
            .clients
            .eks
            .create_cluster()
            .name(&name)
            .version(&spec.version)
            .role_arn(&spec.role_arn)
            .resources_vpc_config(vpc)
            .set_tags((!spec.tags.is_empty()).then(|| spec.tags.clone().into_iter().collect()))
            .client_request_token(request_token(mr))
            .send()
            .await;
        adopted(result, IN_USE, &format!("cannot create EKS cluster {name}"))?;
        Ok(ConnectionDetails::new())
    }

    async fn update(&self, mr: &Cluster, at_provider: &ClusterObservation) -> Result<(), ExternalError> {
        let name = external_name(mr);
        let observed = self.observed.get().unwrap_or_default();
        let drift = cluster_drift(&mr.spec.for_provider, &observed);
        let eks = &self.clients.eks;
        // EKS runs one update at a time: the version first, the endpoint access on a later reconcile.
        if let Some(version) = &drift.version {
            tracing::info!(cluster = %name, %version, "upgrading EKS cluster");
            eks.update_cluster_version()
                .name(&name)
                .version(version)
                .send()
                .await
                .map_err(|e| classify(&format!("cannot upgrade EKS cluster {name} to {version}"), &e))?;
            return Ok(());
        }
        if let Some((public, private)) = drift.endpoint_access {
            let vpc = VpcConfigRequest::builder()
                .endpoint_public_access(public)
                .endpoint_private_access(private)
                .build();
            eks.update_cluster_config()
                .name(&name)
                .resources_vpc_config(vpc)
                .send()
                .await
                .map_err(|e| classify(&format!("cannot update EKS cluster {name} endpoint access"), &e))?;
        }
        if let (false, Some(arn)) = (drift.tags.is_empty(), &at_provider.arn) {
            eks.tag_resource()
                .resource_arn(arn)
                .set_tags(Some(drift.tags.clone().into_iter().collect()))
                .send()
                .await
                .map_err(|e| classify(&format!("cannot tag EKS cluster {name}"), &e))?;
        }
        // What could be applied was; what cannot is refused by name, so Synced never claims AWS matches.
        match drift.unchangeable.refusal(&format!("EKS cluster {name}")) {
            Some(why) => Err(ExternalError::Rejected(why)),
            None => Ok(()),
        }
    }

    async fn delete(&self, mr: &Cluster) -> Result<(), ExternalError> {
        let name = external_name(mr);
        let groups = self
            .clients
            .eks
            .list_nodegroups()
            .cluster_name(&name)
            .send()
            .await
            .map_err(|e| classify(&format!("cannot list node groups of EKS cluster {name}"), &e))?;
        let attached = groups.nodegroups.unwrap_or_default();
        if !attached.is_empty() {
            return Err(ExternalError::Waiting(format!(
                "EKS cluster {name} still has {} node group(s), deleted first: {}",
                attached.len(),
                attached.join(", ")
            )));
        }
        let deleted = self.clients.eks.delete_cluster().name(&name).send().await;
        let in_use = format!("EKS cluster {name} is still in use");
        gone_unless_held(
            deleted,
            [NOT_FOUND, IN_USE],
            in_use,
            &format!("cannot delete EKS cluster {name}"),
        )
    }
}
