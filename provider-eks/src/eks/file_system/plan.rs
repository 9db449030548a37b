//! The pure half of `FileSystem`: its EFS creation token, which mount targets to make or drop, and what the
//! file system's state means for readiness.

use aws_sdk_efs::types::{FileSystemDescription, LifeCycleState, ThroughputMode as EfsThroughput};
use modelplane_eks_api::{FileSystemObservation, FileSystemParameters, MountTarget, ThroughputMode};
use sha2::{Digest, Sha256};

use crate::eks::convert::aws_tags;
use crate::managed::conditions::Readiness;
use crate::managed::external::ExternalError;

/// EFS's idempotency key for this managed resource (at most 64 characters).
pub fn creation_token(owner: &str) -> String {
    let digest = Sha256::digest(owner.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("modelplane-{hex}")
}

pub fn efs_throughput(mode: ThroughputMode) -> EfsThroughput {
    match mode {
        ThroughputMode::Elastic => EfsThroughput::Elastic,
        ThroughputMode::Bursting => EfsThroughput::Bursting,
    }
}

pub fn from_efs_throughput(mode: &EfsThroughput) -> Option<ThroughputMode> {
    match mode {
        EfsThroughput::Elastic => Some(ThroughputMode::Elastic),
        EfsThroughput::Bursting => Some(ThroughputMode::Bursting),
        _ => None,
    }
}

/// Which subnets still need a mount target, and which mount targets serve a subnet the spec dropped.
pub fn mount_target_plan(wanted: &[String], existing: &[MountTarget]) -> (Vec<String>, Vec<String>) {
    let create = wanted
        .iter()
        .filter(|s| !existing.iter().any(|m| &m.subnet_id == *s))
        .cloned()
        .collect();
    let delete = existing
        .iter()
        .filter(|m| !wanted.contains(&m.subnet_id) && m.life_cycle_state != "deleting")
        .map(|m| m.mount_target_id.clone())
        .collect();
    (create, delete)
}

/// Ready once the file system and every mount target are available; busy while any of them is changing.
pub fn file_system_phase(state: &str, mount_targets: &[MountTarget], wanted: &[String]) -> (Readiness, bool) {
    let changing = |s: &str| matches!(s, "creating" | "updating" | "deleting");
    let busy = changing(state) || mount_targets.iter().any(|m| changing(&m.life_cycle_state));
    let readiness = match state {
        "creating" => Readiness::Creating,
        "deleting" | "deleted" => Readiness::Deleting,
        "available" | "updating" => {
            let missing: Vec<&String> = wanted
                .iter()
                .filter(|s| {
                    !mount_targets
                        .iter()
                        .any(|m| &m.subnet_id == *s && m.life_cycle_state == "available")
                })
                .collect();
            if missing.is_empty() {
                Readiness::Available
            } else {
                Readiness::Unavailable(format!(
                    "no available mount target yet in {}",
                    missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ))
            }
        }
        other => Readiness::Unavailable(format!("EFS file system state is {other}")),
    };
    (readiness, busy)
}

/// Whether the one DescribeFileSystems of a steady poll shows the file system as the last full look recorded
/// it: the same file system, available, with the spec's throughput mode and tags, and as many mount targets as
/// were recorded, each available in one of the spec's subnets. What it cannot show (which subnets the mount
/// targets are in now, their states, the NFS security group's rule) waits for the next full look.
pub fn as_recorded(
    spec: &FileSystemParameters,
    recorded: &FileSystemObservation,
    fs: &FileSystemDescription,
) -> bool {
    let tags_match = spec.tags.iter().all(|(k, v)| {
        fs.tags()
            .iter()
            .any(|t| t.key() == k.as_str() && t.value() == v.as_str())
    });
    let (create, delete) = mount_target_plan(&spec.subnet_ids, &recorded.mount_targets);
    recorded.file_system_id.as_deref() == Some(fs.file_system_id())
        && *fs.life_cycle_state() == LifeCycleState::Available
        && fs.throughput_mode().and_then(from_efs_throughput) == Some(spec.throughput_mode)
        && tags_match
        && usize::try_from(fs.number_of_mount_targets()).ok() == Some(recorded.mount_targets.len())
        && create.is_empty()
        && delete.is_empty()
        && recorded
            .mount_targets
            .iter()
            .all(|m| m.life_cycle_state == "available")
}

pub fn efs_tags(pairs: Vec<(String, String)>) -> Result<Vec<aws_sdk_efs::types::Tag>, ExternalError> {
    aws_tags(pairs, |k, v| {
        aws_sdk_efs::types::Tag::builder().key(k).value(v).build()
    })
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
