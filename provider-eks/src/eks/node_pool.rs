//! `NodePool` <-> EKS managed node group. The pool joins the EKS cluster of the `Cluster` it references; that
//! name is kept in `status.atProvider.clusterName`, so a pool can still be deleted after its Cluster object is gone.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_eks::types::{
    CapacityTypes, LaunchTemplateSpecification, NodegroupScalingConfig, Taint as EksTaint,
    TaintEffect as EksEffect, UpdateLabelsPayload, UpdateTaintsPayload,
};
use kube::{Api, ResourceExt};
use modelplane_eks_api::{
    Cluster, ConditionStatus, NodePool, NodePoolObservation, Scaling, Taint, TaintEffect,
};

use super::clients::{AwsClients, ClientCache};
use super::convert::{
    NodeGroupDrift, ObservedNodeGroup, capacity_type_name, nodegroup_drift, nodegroup_late_init,
    nodegroup_phase, region_change, requested_size,
};
use super::errors::{IN_USE, Meaning, NOT_FOUND, adopted, answer, classify, found, health_issues};
use super::owned::{self, LastSeen, owner};
use super::{external_name, full_look, launch_template, request_token};
use crate::managed::conditions::READY;
use crate::managed::external::{ConnectionDetails, ExternalClient, ExternalError, Observation};
use crate::managed::reconciler::Connector;

pub struct NodePoolConnector {
    pub cache: Arc<ClientCache>,
}

/// The EKS cluster a pool belongs to. `subnet_ids` is known only while the Cluster object exists and is Ready.
pub struct ClusterTarget {
    pub name: String,
    pub subnet_ids: Vec<String>,
}

async fn resolve_cluster(kube: &kube::Client, mr: &NodePool) -> Result<Option<ClusterTarget>, ExternalError> {
    let namespace = mr.namespace().unwrap_or_default();
    let reference = &mr.spec.for_provider.cluster_ref.name;
    let recorded = mr
        .status
        .as_ref()
        .and_then(|s| s.at_provider.cluster_name.clone());
    let cluster = Api::<Cluster>::namespaced(kube.clone(), &namespace)
        .get_opt(reference)
        .await
        .map_err(|e| ExternalError::Transient(format!("cannot get Cluster {reference}: {e}")))?;
    let ready = cluster.as_ref().is_some_and(|c| {
        c.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == READY && c.status == ConditionStatus::True)
        })
    });
    match (cluster, ready, recorded) {
        (Some(c), true, _) => Ok(Some(ClusterTarget {
            name: external_name(&c),
            subnet_ids: c.status.map(|s| s.at_provider.subnet_ids).unwrap_or_default(),
        })),
        (_, _, Some(name)) => Ok(Some(ClusterTarget {
            name,
            subnet_ids: Vec::new(),
        })),
        (_, _, None) if mr.metadata.deletion_timestamp.is_some() => Ok(None),
        (None, _, None) => Err(ExternalError::Waiting(format!(
            "Cluster {reference} does not exist"
        ))),
        (Some(_), false, None) => Err(ExternalError::Waiting(format!(
            "Cluster {reference} is not Ready yet"
        ))),
    }
}

#[async_trait]
impl Connector<NodePool> for NodePoolConnector {
    type Client = NodePoolClient;
    type AtProvider = NodePoolObservation;

    async fn connect(&self, mr: &NodePool) -> Result<NodePoolClient, ExternalError> {
        let cluster = resolve_cluster(self.cache.kube(), mr).await?;
        let region = &mr.spec.for_provider.region;
        let clients = owned::clients(&self.cache, mr, &mr.spec.resource, region).await?;
        Ok(NodePoolClient {
            clients,
            cluster,
            drift: LastSeen::default(),
        })
    }
}

pub struct NodePoolClient {
    clients: AwsClients,
    /// None only while deleting a pool whose cluster was never resolved: nothing can exist in AWS then.
    cluster: Option<ClusterTarget>,
    /// What the last Observe found different, so Update needs no second Describe.
    drift: LastSeen<NodeGroupDrift>,
}

fn to_eks_taint(t: &Taint) -> EksTaint {
    let effect = match t.effect {
        TaintEffect::NoSchedule => EksEffect::NoSchedule,
        TaintEffect::NoExecute => EksEffect::NoExecute,
        TaintEffect::PreferNoSchedule => EksEffect::PreferNoSchedule,
    };
    EksTaint::builder()
        .key(&t.key)
        .value(&t.value)
        .effect(effect)
        .build()
}

fn from_eks_taint(t: &EksTaint) -> Option<Taint> {
    let effect = match t.effect()? {
        EksEffect::NoSchedule => TaintEffect::NoSchedule,
        EksEffect::NoExecute => TaintEffect::NoExecute,
        EksEffect::PreferNoSchedule => TaintEffect::PreferNoSchedule,
        _ => return None,
    };
    Some(Taint {
        key: t.key()?.to_string(),
        value: t.value().unwrap_or_default().to_string(),
        effect,
    })
}

fn scaling_config(s: &Scaling) -> NodegroupScalingConfig {
    let int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    NodegroupScalingConfig::builder()
        .min_size(int(s.min_size))
        .max_size(int(s.max_size))
        .desired_size(int(s.desired_size))
        .build()
}

impl NodePoolClient {
    /// Deleting, the node group gone, and its launch template or placement group still there.
    async fn template_left(&self, mr: &NodePool, name: &str) -> Result<bool, ExternalError> {
        let had_template = launch_template::needed(&mr.spec.for_provider)
            || mr
                .status
                .as_ref()
                .is_some_and(|s| s.at_provider.launch_template_id.is_some());
        if mr.metadata.deletion_timestamp.is_none() || !had_template {
            return Ok(false);
        }
        launch_template::leftover(&self.clients.ec2, name).await
    }

    /// The security groups the node group's launch template gives its nodes (none without a template), to
    /// compare with the spec. A template version never changes, so a steady pool skips the read between full
    /// looks (see `full_look`): None, not compared. A spec change, a restart or the window passing reads it
    /// again.
    async fn template_groups(
        &self,
        mr: &NodePool,
        group: &aws_sdk_eks::types::Nodegroup,
    ) -> Result<Option<Vec<String>>, ExternalError> {
        let owner = owner(mr);
        // A pool being deleted has nothing left to change.
        if mr.metadata.deletion_timestamp.is_some() || full_look::NODE_POOL_TEMPLATE.may_skip(mr, &owner) {
            return Ok(None);
        }
        let groups = match group.launch_template.as_ref().and_then(|t| t.id()) {
            None => Vec::new(),
            Some(id) => {
                let version = group
                    .launch_template
                    .as_ref()
                    .and_then(|t| t.version())
                    .unwrap_or("$Default");
                launch_template::security_groups(&self.clients.ec2, id, version).await?
            }
        };
        full_look::NODE_POOL_TEMPLATE.looked(&owner);
        Ok(Some(groups))
    }

    fn cluster(&self) -> Result<&ClusterTarget, ExternalError> {
        self.cluster
            .as_ref()
            .ok_or_else(|| ExternalError::Waiting("the pool's Cluster is not resolved".into()))
    }

    /// The zone of each subnet. A subnet never moves, so each is described once per process (per ProviderConfig
    /// version and region) and steady-state observes cost no EC2 call.
    async fn subnet_zones(
        &self,
        subnet_ids: &[String],
        cluster: &str,
    ) -> Result<HashMap<String, String>, ExternalError> {
        let unknown: Vec<String> = {
            let known = self
                .clients
                .subnet_zones
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            subnet_ids
                .iter()
                .filter(|id| !known.contains_key(*id))
                .cloned()
                .collect()
        };
        if !unknown.is_empty() {
            let described = self
                .clients
                .ec2
                .describe_subnets()
                .set_subnet_ids(Some(unknown))
                .send()
                .await
                .map_err(|e| classify(&format!("cannot describe subnets of EKS cluster {cluster}"), &e))?;
            let mut known = self
                .clients
                .subnet_zones
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            for subnet in described.subnets.unwrap_or_default() {
                if let (Some(id), Some(zone)) = (subnet.subnet_id, subnet.availability_zone) {
                    known.insert(id, zone);
                }
            }
        }
        let known = self
            .clients
            .subnet_zones
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Ok(subnet_ids
            .iter()
            .filter_map(|id| Some((id.clone(), known.get(id)?.clone())))
            .collect())
    }

    /// The cluster's subnets in the pool's zones (all of them when no zones are given).
    async fn subnets(&self, mr: &NodePool) -> Result<Vec<String>, ExternalError> {
        let cluster = self.cluster()?;
        let zones = &mr.spec.for_provider.zones;
        if zones.is_empty() {
            return Ok(cluster.subnet_ids.clone());
        }
        let zone_of = self.subnet_zones(&cluster.subnet_ids, &cluster.name).await?;
        let chosen: Vec<String> = cluster
            .subnet_ids
            .iter()
            .filter(|id| zone_of.get(*id).is_some_and(|z| zones.contains(z)))
            .cloned()
            .collect();
        if chosen.is_empty() {
            return Err(ExternalError::Rejected(format!(
                "spec.forProvider.zones: EKS cluster {} has no subnet in {}",
                cluster.name,
                zones.join(", ")
            )));
        }
        Ok(chosen)
    }
}

#[async_trait]
impl ExternalClient<NodePool> for NodePoolClient {
    type AtProvider = NodePoolObservation;

    async fn observe(&self, mr: &NodePool) -> Result<Observation<NodePoolObservation>, ExternalError> {
        let Some(cluster) = &self.cluster else {
            return Ok(Observation::missing());
        };
        let recorded_arn = mr.status.as_ref().and_then(|s| s.at_provider.arn.as_deref());
        if let Some(why) = region_change(recorded_arn, &mr.spec.for_provider.region) {
            return Err(ExternalError::Rejected(why));
        }
        let name = external_name(mr);
        let described = self
            .clients
            .eks
            .describe_nodegroup()
            .cluster_name(&cluster.name)
            .nodegroup_name(&name)
            .send();
        let described = found(
            described.await,
            NOT_FOUND,
            &format!("cannot describe EKS node group {name}"),
        )?;
        let Some(group) = described.and_then(|out| out.nodegroup) else {
            full_look::NODE_POOL_TEMPLATE.forget(&owner(mr));
            // A deleted pool's launch template outlives its node group by one step: report it so Delete runs.
            if self.template_left(mr, &name).await? {
                return Ok(Observation {
                    readiness: crate::managed::conditions::Readiness::Deleting,
                    ..Observation::available(NodePoolObservation {
                        cluster_name: Some(cluster.name.clone()),
                        ..Default::default()
                    })
                });
            }
            return Ok(Observation::missing());
        };
        let status = group
            .status
            .as_ref()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default();
        let uint = |v: Option<i32>| v.and_then(|v| u32::try_from(v).ok()).unwrap_or_default();
        let observed = ObservedNodeGroup {
            scaling: group.scaling_config.as_ref().map(|s| Scaling {
                min_size: uint(s.min_size),
                max_size: uint(s.max_size),
                desired_size: uint(s.desired_size),
            }),
            labels: group.labels.clone().unwrap_or_default().into_iter().collect(),
            taints: group
                .taints
                .as_deref()
                .unwrap_or_default()
                .iter()
                .filter_map(from_eks_taint)
                .collect(),
            ami_type: group.ami_type.as_ref().map(|a| a.as_str().to_string()),
            // With a launch template the disk size lives in the template, and what the group reports (moto: a
            // default of 20) is not the node's disk: comparing it would refuse every such pool as changed.
            disk_size: group
                .disk_size
                .filter(|_| group.launch_template.is_none())
                .and_then(|d| u32::try_from(d).ok()),
            instance_types: group.instance_types.clone().unwrap_or_default(),
            capacity_type: group.capacity_type.as_ref().map(|c| c.as_str().to_string()),
            node_role: group.node_role.clone(),
            subnets: group.subnets.clone().unwrap_or_default(),
            security_group_ids: self.template_groups(mr, &group).await?,
        };
        let issues = health_issues(
            group
                .health
                .as_ref()
                .map(|h| h.issues())
                .unwrap_or_default()
                .iter()
                .map(|i| (i.code().map(|c| c.as_str()), i.message())),
        );
        let phase = nodegroup_phase(&status, &issues);
        let desired = &mr.spec.for_provider;
        // The subnets the spec asks for are only known while the Cluster is Ready (and cost no call once the
        // subnets' zones are cached); without them the pool's subnets are not compared.
        let desired_subnets = match cluster.subnet_ids.is_empty() {
            true => None,
            false => self.subnets(mr).await.ok(),
        };
        let mut drift = nodegroup_drift(desired, &observed, desired_subnets.as_deref());
        let spec_changed = mr.status.as_ref().and_then(|s| s.observed_generation) != mr.metadata.generation;
        if spec_changed {
            drift.scaling = drift
                .scaling
                .or_else(|| requested_size(&desired.scaling, observed.scaling.as_ref()));
        }
        let up_to_date = drift.up_to_date();
        let late_initialized = nodegroup_late_init(desired, &observed);
        let scaling = observed.scaling;
        self.drift.keep(drift);
        Ok(Observation {
            exists: true,
            up_to_date,
            readiness: phase.readiness,
            busy: phase.busy,
            late_initialized,
            at_provider: NodePoolObservation {
                arn: group.nodegroup_arn.clone(),
                status: Some(status),
                cluster_name: Some(cluster.name.clone()),
                scaling,
                launch_template_id: group
                    .launch_template
                    .as_ref()
                    .and_then(|l| l.id().map(str::to_string)),
                subnet_ids: group.subnets.clone().unwrap_or_default(),
            },
            connection_details: ConnectionDetails::new(),
        })
    }

    async fn create(&self, mr: &NodePool) -> Result<ConnectionDetails, ExternalError> {
        let cluster = self.cluster()?;
        let name = external_name(mr);
        let spec = &mr.spec.for_provider;
        let subnets = self.subnets(mr).await?;
        let token = request_token(mr);
        let template = if launch_template::needed(spec) {
            let id = launch_template::ensure(&self.clients.ec2, &name, spec, &token).await?;
            Some(
                LaunchTemplateSpecification::builder()
                    .id(id)
                    .version("$Latest")
                    .build(),
            )
        } else {
            None
        };
        let capacity = CapacityTypes::from(capacity_type_name(spec.capacity_type));
        let disk_size = match template {
            Some(_) => None,
            None => spec.disk_size.and_then(|d| i32::try_from(d).ok()),
        };
        let result = self
            .clients
            .eks
            .create_nodegroup()
            .cluster_name(&cluster.name)
            .nodegroup_name(&name)
            .node_role(&spec.node_role_arn)
            .set_subnets(Some(subnets))
            .set_instance_types(Some(spec.instance_types.clone()))
            .set_ami_type(spec.ami_type.as_deref().map(Into::into))
            .set_disk_size(disk_size)
            .scaling_config(scaling_config(&spec.scaling))
            .set_labels((!spec.labels.is_empty()).then(|| spec.labels.clone().into_iter().collect()))
            .set_taints((!spec.taints.is_empty()).then(|| spec.taints.iter().map(to_eks_taint).collect()))
            .capacity_type(capacity)
            .set_launch_template(template)
            .set_tags((!spec.tags.is_empty()).then(|| spec.tags.clone().into_iter().collect()))
            .client_request_token(token)
            .send()
            .await;
        adopted(result, IN_USE, &format!("cannot create EKS node group {name}"))?;
        Ok(ConnectionDetails::new())
    }

    async fn update(&self, mr: &NodePool, _: &NodePoolObservation) -> Result<(), ExternalError> {
        let cluster = self.cluster()?;
        let name = external_name(mr);
        let drift = self.drift.get().unwrap_or_default();
        let refusal = drift.unchangeable.refusal(&format!("EKS node group {name}"));
        if drift.is_empty() {
            return refusal.map_or(Ok(()), |why| Err(ExternalError::Rejected(why)));
        }
        let mut request = self
            .clients
            .eks
            .update_nodegroup_config()
            .cluster_name(&cluster.name)
            .nodegroup_name(&name);
        if let Some(scaling) = &drift.scaling {
            request = request.scaling_config(scaling_config(scaling));
        }
        if !drift.labels_set.is_empty() || !drift.labels_remove.is_empty() {
            request = request.labels(
                UpdateLabelsPayload::builder()
                    .set_add_or_update_labels(
                        (!drift.labels_set.is_empty())
                            .then(|| drift.labels_set.clone().into_iter().collect()),
                    )
                    .set_remove_labels((!drift.labels_remove.is_empty()).then(|| drift.labels_remove.clone()))
                    .build(),
            );
        }
        if !drift.taints_set.is_empty() || !drift.taints_remove.is_empty() {
            request = request.taints(
                UpdateTaintsPayload::builder()
                    .set_add_or_update_taints(
                        (!drift.taints_set.is_empty())
                            .then(|| drift.taints_set.iter().map(to_eks_taint).collect()),
                    )
                    .set_remove_taints(
                        (!drift.taints_remove.is_empty())
                            .then(|| drift.taints_remove.iter().map(to_eks_taint).collect()),
                    )
                    .build(),
            );
        }
        request
            .send()
            .await
            .map_err(|e| classify(&format!("cannot update EKS node group {name}"), &e))?;
        // What could be applied was; what cannot is refused by name, so Synced never claims AWS matches.
        refusal.map_or(Ok(()), |why| Err(ExternalError::Rejected(why)))
    }

    async fn delete(&self, mr: &NodePool) -> Result<(), ExternalError> {
        let cluster = self.cluster()?;
        let name = external_name(mr);
        let deleted = self
            .clients
            .eks
            .delete_nodegroup()
            .cluster_name(&cluster.name)
            .nodegroup_name(&name)
            .send()
            .await;
        let busy = format!("EKS node group {name} is busy");
        let meanings = [(NOT_FOUND, Meaning::Settled), (IN_USE, Meaning::Wait(busy))];
        match answer(
            deleted,
            &format!("cannot delete EKS node group {name}"),
            &meanings,
        )? {
            Some(_) => Ok(()),
            // The group is gone: what it ran from goes now (EKS may still need it while deleting the group).
            None => launch_template::remove(&self.clients.ec2, &name, &mr.spec.for_provider).await,
        }
    }
}
