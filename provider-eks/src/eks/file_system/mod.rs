//! `FileSystem` <-> an encrypted EFS file system, a mount target in each of its subnets, and the security group
//! that admits the nodes (or the VPC) on NFS. EFS's own idempotency key (the creation token) is derived from the managed
//! resource, so a lost CreateFileSystem answer is found again by that token; the security group carries the
//! ownership tag and is found by it. Deleting goes mount targets, then the file system, then the group. A full
//! Observe is three calls (file system, mount targets, group); a steady one is the first alone (`full_look`).

pub mod group;
pub mod plan;

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_efs::types::{LifeCycleState, PerformanceMode};
use modelplane_eks_api::{FileSystem, FileSystemObservation, MountTarget, ThroughputMode};

use self::group::NfsSources;
use self::plan::{
    as_recorded, creation_token, efs_tags, efs_throughput, file_system_phase, from_efs_throughput,
    mount_target_plan,
};
use super::clients::AwsClients;
use super::convert::tags_to_set;
use super::errors::{adopted, classify, gone, gone_unless_held, is_code};
use super::full_look;
use super::owned::{LastSeen, connector, delete_security_group, owner, owner_tags};
use crate::managed::conditions::Readiness;
use crate::managed::external::{ConnectionDetails, ExternalClient, ExternalError, Observation};

connector!(FileSystemConnector, FileSystem, FileSystemClient, FileSystemObservation, mr => &mr.spec.for_provider.region);

pub struct FileSystemClient {
    clients: AwsClients,
    /// What the last Observe saw, so Update needs no second round of reads.
    seen: LastSeen<Seen>,
}

impl FileSystemClient {
    pub fn new(clients: AwsClients) -> Self {
        Self {
            clients,
            seen: LastSeen::default(),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Seen {
    file_system_id: String,
    throughput: Option<ThroughputMode>,
    tags: BTreeMap<String, String>,
    mount_targets: Vec<MountTarget>,
    security_group: Option<(String, NfsSources)>,
}

impl FileSystemClient {
    async fn find(
        &self,
        token: &str,
    ) -> Result<Option<aws_sdk_efs::types::FileSystemDescription>, ExternalError> {
        let out = self
            .clients
            .efs
            .describe_file_systems()
            .creation_token(token)
            .send()
            .await
            .map_err(|e| classify(&format!("cannot describe EFS file system {token}"), &e))?;
        Ok(out.file_systems.unwrap_or_default().into_iter().next())
    }

    async fn mount_targets(&self, id: &str) -> Result<Vec<MountTarget>, ExternalError> {
        let out = self
            .clients
            .efs
            .describe_mount_targets()
            .file_system_id(id)
            .send()
            .await
            .map_err(|e| classify(&format!("cannot describe mount targets of EFS {id}"), &e))?;
        Ok(out
            .mount_targets()
            .iter()
            .map(|m| MountTarget {
                subnet_id: m.subnet_id().to_owned(),
                mount_target_id: m.mount_target_id().to_owned(),
                life_cycle_state: m.life_cycle_state().as_str().to_owned(),
            })
            .collect())
    }

    async fn create_mount_targets(
        &self,
        id: &str,
        subnets: &[String],
        group: &str,
    ) -> Result<(), ExternalError> {
        for subnet in subnets {
            let created = self
                .clients
                .efs
                .create_mount_target()
                .file_system_id(id)
                .subnet_id(subnet)
                .security_groups(group)
                .send()
                .await;
            // The file system is still being created: the next Update makes the rest.
            if matches!(&created, Err(e) if is_code(e, "IncorrectFileSystemLifeCycleState")) {
                return Ok(());
            }
            // One from an earlier attempt: the next Observe lists it.
            let what = format!("cannot create a mount target of EFS {id} in {subnet}");
            adopted(created, "MountTargetConflict", &what)?;
        }
        Ok(())
    }

    async fn delete_mount_target(&self, mount_target: &str) -> Result<(), ExternalError> {
        let deleted = self
            .clients
            .efs
            .delete_mount_target()
            .mount_target_id(mount_target)
            .send()
            .await;
        gone(
            deleted,
            "MountTargetNotFound",
            &format!("cannot delete EFS mount target {mount_target}"),
        )
    }
}

#[async_trait]
impl ExternalClient<FileSystem> for FileSystemClient {
    type AtProvider = FileSystemObservation;

    async fn observe(&self, mr: &FileSystem) -> Result<Observation<FileSystemObservation>, ExternalError> {
        let owner = owner(mr);
        let deleting = mr.metadata.deletion_timestamp.is_some();
        let Some(fs) = self.find(&creation_token(&owner)).await? else {
            full_look::FILE_SYSTEM.forget(&owner);
            // The group outlives the file system by one step of a delete: it still has to go.
            if deleting && let Some((group, _)) = group::find(&self.clients.ec2, &owner).await? {
                let at_provider = FileSystemObservation {
                    security_group_id: Some(group),
                    ..Default::default()
                };
                return Ok(Observation {
                    readiness: Readiness::Deleting,
                    ..Observation::available(at_provider)
                });
            }
            return Ok(Observation::missing());
        };
        // A steady file system is polled with this one call (see `full_look`): found, and as last recorded.
        if full_look::FILE_SYSTEM.may_skip(mr, &owner)
            && let Some(recorded) = mr.status.as_ref().map(|s| &s.at_provider)
            && as_recorded(&mr.spec.for_provider, recorded, &fs)
        {
            return Ok(Observation::available(recorded.clone()));
        }
        let id = fs.file_system_id().to_owned();
        let state = fs.life_cycle_state().as_str().to_owned();
        let mount_targets = if state == "deleted" {
            Vec::new()
        } else {
            self.mount_targets(&id).await?
        };
        let security_group = group::find(&self.clients.ec2, &owner).await?;
        full_look::FILE_SYSTEM.looked(&owner);
        let spec = &mr.spec.for_provider;
        let seen = Seen {
            file_system_id: id.clone(),
            throughput: fs.throughput_mode().and_then(from_efs_throughput),
            tags: fs
                .tags()
                .iter()
                .map(|t| (t.key().to_owned(), t.value().to_owned()))
                .collect(),
            mount_targets: mount_targets.clone(),
            security_group: security_group.clone(),
        };
        let (create, delete) = mount_target_plan(&spec.subnet_ids, &mount_targets);
        let tags_differ = !tags_to_set(&spec.tags, &seen.tags).is_empty();
        let up_to_date = create.is_empty()
            && delete.is_empty()
            && seen.throughput == Some(spec.throughput_mode)
            && !tags_differ
            && security_group
                .as_ref()
                .is_some_and(|(_, sources)| sources.as_wanted(&spec.nfs_security_group_ids));
        let (readiness, busy) = file_system_phase(&state, &mount_targets, &spec.subnet_ids);
        self.seen.keep(seen);
        Ok(Observation {
            exists: state != "deleted",
            up_to_date,
            readiness,
            busy,
            late_initialized: None,
            at_provider: FileSystemObservation {
                file_system_id: Some(id),
                life_cycle_state: Some(state),
                security_group_id: security_group.map(|(id, _)| id),
                mount_targets,
            },
            connection_details: ConnectionDetails::new(),
        })
    }

    async fn create(&self, mr: &FileSystem) -> Result<ConnectionDetails, ExternalError> {
        let owner = owner(mr);
        let token = creation_token(&owner);
        let spec = &mr.spec.for_provider;
        // The group first: it checks the subnets, so a bad spec is refused before anything is made.
        let group = group::ensure(&self.clients.ec2, mr, None).await?;
        let created = self
            .clients
            .efs
            .create_file_system()
            .creation_token(&token)
            .encrypted(true)
            .performance_mode(PerformanceMode::GeneralPurpose)
            .throughput_mode(efs_throughput(spec.throughput_mode))
            .set_tags(Some(efs_tags(owner_tags(mr, &spec.tags))?))
            .send()
            .await;
        let what = format!("cannot create EFS file system for {owner}");
        let (id, available) = match adopted(created, "FileSystemAlreadyExists", &what)? {
            Some(out) => (
                out.file_system_id().to_owned(),
                *out.life_cycle_state() == LifeCycleState::Available,
            ),
            // Made by an earlier attempt whose answer was lost.
            None => match self.find(&token).await? {
                Some(fs) => (
                    fs.file_system_id().to_owned(),
                    *fs.life_cycle_state() == LifeCycleState::Available,
                ),
                None => {
                    return Err(ExternalError::Transient(format!(
                        "EFS file system {token} exists but is not listed yet"
                    )));
                }
            },
        };
        if available {
            self.create_mount_targets(&id, &spec.subnet_ids, &group).await?;
        }
        Ok(ConnectionDetails::new())
    }

    async fn update(&self, mr: &FileSystem, _: &FileSystemObservation) -> Result<(), ExternalError> {
        let Some(seen) = self.seen.get() else {
            return Ok(());
        };
        let spec = &mr.spec.for_provider;
        let id = &seen.file_system_id;
        let group = match &seen.security_group {
            Some((group, sources)) if sources.as_wanted(&spec.nfs_security_group_ids) => group.clone(),
            _ => group::ensure(&self.clients.ec2, mr, seen.security_group.clone()).await?,
        };
        let (create, delete) = mount_target_plan(&spec.subnet_ids, &seen.mount_targets);
        for mount_target in &delete {
            self.delete_mount_target(mount_target).await?;
        }
        self.create_mount_targets(id, &create, &group).await?;
        if seen.throughput != Some(spec.throughput_mode) {
            self.clients
                .efs
                .update_file_system()
                .file_system_id(id)
                .throughput_mode(efs_throughput(spec.throughput_mode))
                .send()
                .await
                .map_err(|e| classify(&format!("cannot change throughput mode of EFS {id}"), &e))?;
        }
        let tags = tags_to_set(&spec.tags, &seen.tags);
        if !tags.is_empty() {
            self.clients
                .efs
                .tag_resource()
                .resource_id(id)
                .set_tags(Some(efs_tags(tags.into_iter().collect())?))
                .send()
                .await
                .map_err(|e| classify(&format!("cannot tag EFS {id}"), &e))?;
        }
        Ok(())
    }

    async fn delete(&self, mr: &FileSystem) -> Result<(), ExternalError> {
        let owner = owner(mr);
        if let Some(fs) = self.find(&creation_token(&owner)).await? {
            let id = fs.file_system_id().to_owned();
            let mount_targets = self.mount_targets(&id).await?;
            if !mount_targets.is_empty() {
                // Mount targets first: EFS refuses to delete a file system that still has one.
                for m in mount_targets.iter().filter(|m| m.life_cycle_state != "deleting") {
                    self.delete_mount_target(&m.mount_target_id).await?;
                }
                return Err(ExternalError::Waiting(format!(
                    "EFS {id}: waiting for {} mount target(s) to be deleted first",
                    mount_targets.len()
                )));
            }
            let deleted = self
                .clients
                .efs
                .delete_file_system()
                .file_system_id(&id)
                .send()
                .await;
            let held = format!("EFS {id} still has mount targets");
            let codes = ["FileSystemNotFound", "FileSystemInUse"];
            return gone_unless_held(deleted, codes, held, &format!("cannot delete EFS {id}"));
        }
        // The file system is gone; its security group goes last (the mount targets' interfaces used it).
        if let Some((group, _)) = group::find(&self.clients.ec2, &owner).await? {
            let held =
                format!("security group {group} is still in use by the mount targets' network interfaces");
            delete_security_group(&self.clients.ec2, &group, held).await?;
        }
        Ok(())
    }
}
