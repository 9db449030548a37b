//! Pure mapping between the managed resources and what EKS reports: status -> readiness, spec vs observed ->
//! drift, observed -> late-initialized spec fields. No SDK calls here, so every branch is unit-tested (moto
//! jumps straight to ACTIVE and lacks the version API, so these cases cannot be seen end to end).

use std::collections::BTreeMap;

use modelplane_eks_api::{CapacityType, ClusterParameters, NodePoolParameters, Scaling, Taint};
use serde_json::json;

use crate::managed::conditions::Readiness;
use crate::managed::external::ExternalError;

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

/// What an EKS status means for the `noun` it is of ("node group", "add-on"): one being updated still serves,
/// so it stays Available and is only busy; a status that is not a step on the way says itself and, when EKS
/// gives them, the health issues behind it.
fn eks_phase(noun: &str, status: &str, health: &[String]) -> Phase {
    match status {
        "ACTIVE" => phase(Readiness::Available, false),
        "UPDATING" => phase(Readiness::Available, true),
        "CREATING" => phase(Readiness::Creating, true),
        "DELETING" => phase(Readiness::Deleting, true),
        other if health.is_empty() => phase(
            Readiness::Unavailable(format!("EKS {noun} status is {other}")),
            false,
        ),
        other => phase(
            Readiness::Unavailable(format!("EKS {noun} status is {other}: {}", health.join("; "))),
            false,
        ),
    }
}

/// EKS cluster status (CREATING, ACTIVE, UPDATING, DELETING, FAILED, PENDING).
pub fn cluster_phase(status: &str) -> Phase {
    match status {
        "PENDING" => phase(Readiness::Creating, true),
        other => eks_phase("cluster", other, &[]),
    }
}

/// EKS node group status (CREATING, ACTIVE, UPDATING, DELETING, CREATE_FAILED, DELETE_FAILED, DEGRADED).
pub fn nodegroup_phase(status: &str, health: &[String]) -> Phase {
    eks_phase("node group", status, health)
}

/// EKS add-on status (CREATING, ACTIVE, UPDATING, DELETING, CREATE_FAILED, DELETE_FAILED, DEGRADED, ...).
pub fn addon_phase(status: &str, health: &[String]) -> Phase {
    eks_phase("add-on", status, health)
}

/// The parts of an EKS cluster that the spec can change after creation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedCluster {
    pub version: Option<String>,
    pub endpoint_public_access: bool,
    pub endpoint_private_access: bool,
    pub tags: BTreeMap<String, String>,
    /// Fixed at creation: a different value in the spec is refused, never silently accepted.
    pub role_arn: Option<String>,
    pub subnet_ids: Vec<String>,
    pub security_group_ids: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterDrift {
    /// Upgrade to this minor version. EKS upgrades one minor version at a time and never downgrades.
    pub version: Option<String>,
    /// New (public, private) endpoint access.
    pub endpoint_access: Option<(bool, bool)>,
    /// Tags to add or change. Tags the spec does not name are left alone: AWS and other tools add their own.
    pub tags: BTreeMap<String, String>,
    /// Spec fields that differ from AWS and cannot be changed on an existing cluster (see [`Unchangeable`]).
    pub unchangeable: Unchangeable,
}

impl ClusterDrift {
    /// Nothing Update can do something about.
    pub fn is_empty(&self) -> bool {
        self.version.is_none() && self.endpoint_access.is_none() && self.tags.is_empty()
    }

    /// Up to date only when nothing differs, changeable or not: a spec AWS cannot follow is never reported
    /// as in sync.
    pub fn up_to_date(&self) -> bool {
        self.is_empty() && self.unchangeable.is_empty()
    }
}

/// Spec fields (by path) whose new values AWS cannot apply to the existing resource. The reconciler refuses
/// them with Synced=False naming the fields, rather than replacing the resource behind the user's back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unchangeable(pub Vec<String>);

impl Unchangeable {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn check(&mut self, field: &str, differs: bool) {
        if differs {
            self.0.push(format!("spec.forProvider.{field}"));
        }
    }

    /// The refusal shown on Synced, or None when every field can be applied. Stable for a given spec, so a
    /// repeated refusal writes no new status.
    pub fn refusal(&self, what: &str) -> Option<String> {
        (!self.is_empty()).then(|| {
            format!(
                "cannot change {} of existing {what} in place: AWS fixes them at creation; create a new \
                 resource with the new values and delete this one, or revert the spec",
                self.0.join(", ")
            )
        })
    }
}

/// The spec's tags that AWS lacks or holds with another value. Tags the spec does not name are left alone: AWS
/// and other tools add their own.
pub fn tags_to_set(
    wanted: &BTreeMap<String, String>,
    seen: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    wanted
        .iter()
        .filter(|(k, v)| seen.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Tags as one AWS SDK's tag type, made by `build`; a tag the SDK refuses is refused naming it.
pub fn aws_tags<T>(
    pairs: Vec<(String, String)>,
    build: impl Fn(&str, String) -> Result<T, aws_smithy_types::error::operation::BuildError>,
) -> Result<Vec<T>, ExternalError> {
    pairs
        .into_iter()
        .map(|(k, v)| {
            build(&k, v).map_err(|e| ExternalError::Rejected(format!("spec.forProvider.tags[{k}]: {e}")))
        })
        .collect()
}

/// Same members, any order.
fn same_set(a: &[String], b: &[String]) -> bool {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort();
    a.dedup();
    b.sort();
    b.dedup();
    a == b
}

/// The region in an ARN (`arn:aws:eks:us-east-1:123456789012:cluster/demo`).
pub fn arn_region(arn: &str) -> Option<&str> {
    arn.split(':').nth(3).filter(|r| !r.is_empty())
}

/// A resource that was made in one region and whose spec now names another would be created again in the new
/// region, leaving the old one behind: refuse instead.
pub fn region_change(recorded_arn: Option<&str>, desired_region: &str) -> Option<String> {
    let recorded = arn_region(recorded_arn?)?;
    (recorded != desired_region).then(|| {
        format!(
            "cannot change spec.forProvider.region from {recorded} to {desired_region}: the resource exists in \
             {recorded}; create a new resource in {desired_region} and delete this one, or revert the spec"
        )
    })
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
    let mut unchangeable = Unchangeable::default();
    let downgrade = match (
        minor(&desired.version),
        observed.version.as_deref().and_then(minor),
    ) {
        (Some(d), Some(r)) => d < r,
        _ => false,
    };
    unchangeable.check("version", downgrade);
    unchangeable.check(
        "roleArn",
        observed.role_arn.as_ref().is_some_and(|r| *r != desired.role_arn),
    );
    unchangeable.check(
        "networking.subnetIds",
        !desired.networking.subnet_ids.is_empty()
            && !observed.subnet_ids.is_empty()
            && !same_set(&desired.networking.subnet_ids, &observed.subnet_ids),
    );
    unchangeable.check(
        "networking.securityGroupIds",
        !same_set(
            &desired.networking.security_group_ids,
            &observed.security_group_ids,
        ),
    );
    ClusterDrift {
        unchangeable,
        version: next_version(&desired.version, observed.version.as_deref()),
        endpoint_access: (access != (observed.endpoint_public_access, observed.endpoint_private_access))
            .then_some(access),
        tags: tags_to_set(&desired.tags, &observed.tags),
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
    /// Fixed at creation (checked, never updated).
    pub instance_types: Vec<String>,
    /// `ON_DEMAND`, `SPOT` or `CAPACITY_BLOCK`.
    pub capacity_type: Option<String>,
    pub node_role: Option<String>,
    pub subnets: Vec<String>,
    /// The nodes' security groups as the group's launch template holds them (none without a template); None
    /// when not looked at this time (a steady pool between full looks, see `full_look`).
    pub security_group_ids: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeGroupDrift {
    pub scaling: Option<Scaling>,
    pub labels_set: BTreeMap<String, String>,
    pub labels_remove: Vec<String>,
    pub taints_set: Vec<Taint>,
    pub taints_remove: Vec<Taint>,
    pub unchangeable: Unchangeable,
}

impl NodeGroupDrift {
    /// Up to date only when nothing differs, changeable or not.
    pub fn up_to_date(&self) -> bool {
        self.is_empty() && self.unchangeable.is_empty()
    }

    pub fn is_empty(&self) -> bool {
        self.scaling.is_none()
            && self.labels_set.is_empty()
            && self.labels_remove.is_empty()
            && self.taints_set.is_empty()
            && self.taints_remove.is_empty()
    }
}

/// What AWS calls a capacity type.
pub fn capacity_type_name(capacity: CapacityType) -> &'static str {
    match capacity {
        CapacityType::OnDemand => "ON_DEMAND",
        CapacityType::CapacityBlock => "CAPACITY_BLOCK",
    }
}

/// Labels and taints on a node group are owned by the spec: extra ones are removed. Instance types, capacity
/// type, node role, subnets, AMI type, disk size and the launch template's security groups are fixed at
/// creation: a difference is reported as unchangeable. `desired_subnets` is None when the pool's subnets
/// cannot be worked out now (its Cluster object is gone or not Ready): subnets are then not compared.
pub fn nodegroup_drift(
    desired: &NodePoolParameters,
    observed: &ObservedNodeGroup,
    desired_subnets: Option<&[String]>,
) -> NodeGroupDrift {
    let same_taint = |a: &Taint, b: &Taint| a.key == b.key && a.effect == b.effect;
    let mut unchangeable = Unchangeable::default();
    unchangeable.check(
        "instanceTypes",
        !observed.instance_types.is_empty() && !same_set(&desired.instance_types, &observed.instance_types),
    );
    unchangeable.check(
        "capacityType",
        observed
            .capacity_type
            .as_deref()
            .is_some_and(|c| c != capacity_type_name(desired.capacity_type)),
    );
    unchangeable.check(
        "nodeRoleArn",
        observed
            .node_role
            .as_ref()
            .is_some_and(|r| *r != desired.node_role_arn),
    );
    unchangeable.check(
        "zones",
        desired_subnets.is_some_and(|d| {
            !d.is_empty() && !observed.subnets.is_empty() && !same_set(d, &observed.subnets)
        }),
    );
    unchangeable.check(
        "amiType",
        matches!((&desired.ami_type, &observed.ami_type), (Some(d), Some(o)) if d != o),
    );
    unchangeable.check(
        "diskSize",
        matches!((desired.disk_size, observed.disk_size), (Some(d), Some(o)) if d != o),
    );
    unchangeable.check(
        "securityGroupIds",
        observed
            .security_group_ids
            .as_ref()
            .is_some_and(|o| !same_set(&desired.security_group_ids, o)),
    );
    NodeGroupDrift {
        unchangeable,
        scaling: scaling_drift(&desired.scaling, observed.scaling.as_ref()),
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

/// The scaling to apply on a steady poll, if any. The range (`minSize`..`maxSize`) is the spec's; the desired
/// size within it is the cluster autoscaler's once the group exists (EKS reports the size the autoscaler set),
/// so a desired size inside the range is left alone and one outside it is brought to the nearest bound (a
/// changed spec's own size is applied by [`requested_size`]). A pool that does not
/// autoscale has a one-size range, so its size follows the spec exactly.
fn scaling_drift(desired: &Scaling, observed: Option<&Scaling>) -> Option<Scaling> {
    let Some(observed) = observed else {
        return Some(*desired);
    };
    let (min, max) = (desired.min_size, desired.max_size.max(desired.min_size));
    let in_range = (min..=max).contains(&observed.desired_size);
    let same_range = observed.min_size == min && observed.max_size == desired.max_size;
    (!(same_range && in_range)).then(|| Scaling {
        desired_size: observed.desired_size.max(min).min(max),
        ..*desired
    })
}

/// After a spec change (a new generation), the spec's own desired size counts again: a size the user (or the
/// composition) asked for is applied once, inside the range; afterwards the autoscaler owns it again.
pub fn requested_size(desired: &Scaling, observed: Option<&Scaling>) -> Option<Scaling> {
    let (min, max) = (desired.min_size, desired.max_size.max(desired.min_size));
    let wanted = desired.desired_size.max(min).min(max);
    (observed.map(|o| o.desired_size) != Some(wanted)).then_some(Scaling {
        desired_size: wanted,
        ..*desired
    })
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
