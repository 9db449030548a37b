//! The `ClustersAvailable` condition: which replicas run on a cluster that is lost or cordoned, what that does
//! to them and when ([`crate::api::availability`]). The scheduler acts on the same states; this says it.

use jiff::Timestamp;

use crate::{
    api::{availability::Availability, model_deployment::ModelDeploymentStatus},
    compose::{
        Output,
        conditions::{ConditionType, Reason, first_named},
    },
    proto::v1::Status,
    schedule::ClusterView,
};

/// Replicas named in the message; the rest are counted.
const MAX_NAMED: usize = 3;

/// Sets `ClustersAvailable` and returns the earliest time one of the replicas' clusters changes state on its
/// own (a grace period running out), when the deployment should be composed again.
pub fn condition(
    out: &mut Output,
    status: &ModelDeploymentStatus,
    clusters: &[ClusterView],
    now: Timestamp,
) -> Option<Timestamp> {
    let availability = |name: &str| {
        clusters
            .iter()
            .find(|c| c.metadata.name == name)
            .map(|c| c.availability(now))
    };
    let mut affected: Vec<(Reason, String)> = Vec::new();
    let mut changes_at: Option<Timestamp> = None;
    for replica in &status.replicas {
        let current = replica.cluster.as_deref();
        let previous = replica.moving_from.as_ref().map(|p| p.cluster.as_str());
        for (cluster, leaving) in [(current, false), (previous, true)] {
            let Some((cluster, state)) = cluster.and_then(|c| Some((c, availability(c)?))) else {
                continue;
            };
            if let Some(at) = state.changes_at() {
                changes_at = Some(changes_at.map_or(at, |t| t.min(at)));
            }
            let reason = match state {
                Availability::Open | Availability::Returning { .. } => continue,
                Availability::Unreachable { .. } | Availability::NeverReached => Reason::ClusterUnreachable,
                Availability::Evacuating { .. } => Reason::Evacuating,
                Availability::Cordoned => Reason::Draining,
            };
            let what = match (leaving, current) {
                (false, _) => format!("replica {} on {cluster}", replica.replica),
                (true, Some(to)) => format!("replica {} moves from {cluster} to {to}", replica.replica),
                (true, None) => format!(
                    "replica {} stays on {cluster}: no other cluster fits (see status.replicas)",
                    replica.replica
                ),
            };
            let why = state.describe().unwrap_or_default();
            affected.push((reason, format!("{what}: {cluster} is {why}")));
        }
    }
    affected.sort_by_key(|(reason, _)| severity(*reason));
    let Some((reason, _)) = affected.first() else {
        out.condition(
            ConditionType::ClustersAvailable,
            Status::ConditionTrue,
            Reason::ClustersAvailable,
            "",
        );
        return changes_at;
    };
    let reason = *reason;
    let message = first_named(affected.into_iter().map(|(_, m)| m).collect(), MAX_NAMED);
    out.condition(
        ConditionType::ClustersAvailable,
        Status::ConditionFalse,
        reason,
        message,
    );
    changes_at
}

/// Which reason the condition gives when several apply: what takes traffic away first.
fn severity(reason: Reason) -> u8 {
    match reason {
        Reason::ClusterUnreachable => 0,
        Reason::Evacuating => 1,
        _ => 2,
    }
}
