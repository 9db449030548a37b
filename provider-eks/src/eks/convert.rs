//! Pure mapping between the managed resources and what EKS reports: status -> readiness, spec vs observed ->
//! drift, observed -> late-initialized spec fields. No SDK calls here, so every branch is unit-tested (moto
//! jumps straight to ACTIVE and lacks the version API, so these cases cannot be seen end to end).

use std::collections::BTreeMap;

use modelplane_eks_api::{ClusterParameters, NodePoolParameters, Scaling, Taint};
use serde_json::json;

use crate::managed::conditions::Readiness;

/// What an EKS status string means to the reconciler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    pub readiness: Readiness,
    /// AWS is working: no change may be sent until it settles.
    pub busy: bool,
}

fn phase(readiness: Readiness, busy: bool) -> Phase {
    Phase { readiness, busy }
}

/// EKS cluster status (CREATING, ACTIVE, UPDATING, DELETING, FAILED, PENDING). A cluster being updated still
/// serves its API, so it stays Available; it is only busy.
pub fn cluster_phase(status: &str) -> Phase {
    match status {
        "ACTIVE" => phase(Readiness::Available, false),
        "UPDATING" => phase(Readiness::Available, true),
        "CREATING" | "PENDING" => phase(Readiness::Creating, true),
        "DELETING" => phase(Readiness::Deleting, true),
        other => phase(
            Readiness::Unavailable(format!("EKS cluster status is {other}")),
            false,
        ),
    }
}

/// EKS node group status (CREATING, ACTIVE, UPDATING, DELETING, CREATE_FAILED, DELETE_FAILED, DEGRADED).
pub fn nodegroup_phase(status: &str, health: &[String]) -> Phase {
    match status {
        "ACTIVE" => phase(Readiness::Available, false),
        "UPDATING" => phase(Readiness::Available, true),
        "CREATING" => phase(Readiness::Creating, true),
        "DELETING" => phase(Readiness::Deleting, true),
        other if health.is_empty() => phase(
            Readiness::Unavailable(format!("EKS node group status is {other}")),
            false,
        ),
        other => phase(
            Readiness::Unavailable(format!("EKS node group status is {other}: {}", health.join("; "))),
            false,
        ),
    }
}

/// The parts of an EKS cluster that the spec can change after creation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedCluster {
    pub version: Option<String>,
    pub endpoint_public_access: bool,
    pub endpoint_private_access: bool,
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterDrift {
    /// Upgrade to this minor version. EKS upgrades one minor version at a time and never downgrades.
    pub version: Option<String>,
    /// New (public, private) endpoint access.
    pub endpoint_access: Option<(bool, bool)>,
    /// Tags to add or change. Tags the spec does not name are left alone: AWS and other tools add their own.
    pub tags: BTreeMap<String, String>,
}

impl ClusterDrift {
    pub fn is_empty(&self) -> bool {
        self.version.is_none() && self.endpoint_access.is_none() && self.tags.is_empty()
    }
}

fn minor(version: &str) -> Option<(u32, u32)> {
    let (major, minor) = version.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The version to upgrade to next, if the desired version is newer than the running one.
fn next_version(desired: &str, running: Option<&str>) -> Option<String> {
    let (d, r) = (minor(desired)?, minor(running?)?);
    if d <= r {
        return None;
    }
    if d.0 == r.0 {
        Some(format!("{}.{}", r.0, r.1 + 1))
    } else {
        Some(desired.to_string())
    }
}

pub fn cluster_drift(desired: &ClusterParameters, observed: &ObservedCluster) -> ClusterDrift {
    let access = (desired.endpoint_public_access, desired.endpoint_private_access);
    ClusterDrift {
        version: next_version(&desired.version, observed.version.as_deref()),
        endpoint_access: (access != (observed.endpoint_public_access, observed.endpoint_private_access))
            .then_some(access),
        tags: desired
            .tags
            .iter()
            .filter(|(k, v)| observed.tags.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// The parts of a node group that the spec can change after creation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedNodeGroup {
    pub scaling: Option<Scaling>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub ami_type: Option<String>,
    pub disk_size: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeGroupDrift {
    pub scaling: Option<Scaling>,
    pub labels_set: BTreeMap<String, String>,
    pub labels_remove: Vec<String>,
    pub taints_set: Vec<Taint>,
    pub taints_remove: Vec<Taint>,
}

impl NodeGroupDrift {
    pub fn is_empty(&self) -> bool {
        self.scaling.is_none()
            && self.labels_set.is_empty()
            && self.labels_remove.is_empty()
            && self.taints_set.is_empty()
            && self.taints_remove.is_empty()
    }
}

/// Labels and taints on a node group are owned by the spec: extra ones are removed.
pub fn nodegroup_drift(desired: &NodePoolParameters, observed: &ObservedNodeGroup) -> NodeGroupDrift {
    let same_taint = |a: &Taint, b: &Taint| a.key == b.key && a.effect == b.effect;
    NodeGroupDrift {
        scaling: (observed.scaling != Some(desired.scaling)).then_some(desired.scaling),
        labels_set: desired
            .labels
            .iter()
            .filter(|(k, v)| observed.labels.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        labels_remove: observed
            .labels
            .keys()
            .filter(|k| !desired.labels.contains_key(*k))
            .cloned()
            .collect(),
        taints_set: desired
            .taints
            .iter()
            .filter(|t| !observed.taints.contains(t))
            .cloned()
            .collect(),
        taints_remove: observed
            .taints
            .iter()
            .filter(|o| !desired.taints.iter().any(|d| same_taint(d, o)))
            .cloned()
            .collect(),
    }
}

/// Spec fields left open that EKS filled in (AMI type, disk size), as a `spec.forProvider` merge patch.
pub fn nodegroup_late_init(
    desired: &NodePoolParameters,
    observed: &ObservedNodeGroup,
) -> Option<serde_json::Value> {
    let mut patch = serde_json::Map::new();
    if let (None, Some(ami)) = (&desired.ami_type, &observed.ami_type) {
        patch.insert("amiType".into(), json!(ami));
    }
    if let (None, Some(disk)) = (desired.disk_size, observed.disk_size) {
        patch.insert("diskSize".into(), json!(disk));
    }
    (!patch.is_empty()).then_some(serde_json::Value::Object(patch))
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
