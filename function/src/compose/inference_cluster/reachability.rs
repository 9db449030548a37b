//! Whether Modelplane reaches the cluster: a probe Object that only reads the cluster's `kube-system` Namespace
//! through the cluster's provider config, so it fails exactly when everything else Modelplane applies there would
//! (the API server gone, its address unroutable, the kubeconfig's credentials revoked). Its `Synced` condition
//! becomes `status.reachability`, with the time the cluster was lost or came back, and the `Reachable` and
//! `Schedulable` conditions say what that means for replicas ([`crate::api::availability`]).

use jiff::Timestamp;
use serde::{Deserialize, de::IgnoredAny};

use super::components::cluster_object;
use crate::{
    api::{
        availability::{Availability, Probe, Reachability},
        inference_cluster::InferenceClusterSpec,
    },
    compose::{
        Output,
        conditions::{ConditionType, Reason},
        remote,
    },
    proto::v1::{RunFunctionRequest, Status},
    sdk::request,
    wire::RawStruct,
};

pub const PROBE_KEY: &str = "reachability-probe";

/// Composes the probe. It only observes: it never writes to the cluster and deleting it deletes nothing there.
pub fn compose_probe(out: &mut Output, cluster: &str) {
    let manifest = crate::wire::tree::tree!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}
    });
    let probe = cluster_object(cluster, PROBE_KEY, manifest)
        .observe_only()
        .ready_once_created();
    // Never holds the cluster's readiness: an outage is reported by the conditions below, not by Ready.
    out.compose(PROBE_KEY, probe.build(), true);
}

/// What the probe's last reconcile found.
fn probe(req: &RunFunctionRequest) -> Probe {
    let observed = remote::observed::<IgnoredAny>(request::observed_composed(req, PROBE_KEY));
    match observed.as_ref().and_then(|o| o.condition("Synced")) {
        Some(c) if c.status == "True" => Probe::Answered,
        Some(c) if c.status == "False" => Probe::Failed(c.provider_words()),
        _ => Probe::NotYet,
    }
}

#[derive(Default, Deserialize)]
struct PreviousStatus {
    #[serde(default)]
    status: ReachabilityStatus,
}

#[derive(Default, Deserialize)]
struct ReachabilityStatus {
    #[serde(default)]
    reachability: Option<Reachability>,
}

/// The cluster's reachability at `now`, from the probe and the status reported before; sets the conditions and
/// asks to be composed again when a grace period runs out.
pub fn report(
    out: &mut Output,
    req: &RunFunctionRequest,
    xr: &RawStruct,
    spec: &InferenceClusterSpec,
    now: Timestamp,
) -> Option<Reachability> {
    let previous: PreviousStatus = xr.parse().unwrap_or_default();
    let reachability = Reachability::next(previous.status.reachability.as_ref(), probe(req), now);
    match &reachability {
        Some(r) if r.reachable => out.condition(
            ConditionType::Reachable,
            Status::ConditionTrue,
            Reason::Reachable,
            "",
        ),
        Some(r) => {
            let since = r.since.map(|t| format!(" since {t}")).unwrap_or_default();
            let message = r.message.as_deref().unwrap_or("the provider gives no reason");
            out.condition(
                ConditionType::Reachable,
                Status::ConditionFalse,
                Reason::Unreachable,
                format!("the cluster's API server has not answered{since}: {message}"),
            );
        }
        None => {}
    }
    let availability = Availability::of(&spec.scheduling, reachability.as_ref(), now);
    let reason = match availability {
        Availability::Open => Reason::Open,
        Availability::Returning { .. } => Reason::Returning,
        Availability::Cordoned => Reason::Cordoned,
        Availability::Unreachable { .. } | Availability::NeverReached => Reason::Unreachable,
        Availability::Evacuating { .. } => Reason::Evacuating,
    };
    let status = if availability.takes_new() {
        Status::ConditionTrue
    } else {
        Status::ConditionFalse
    };
    out.condition(
        ConditionType::Schedulable,
        status,
        reason,
        availability.describe().unwrap_or_default(),
    );
    if let Some(at) = availability.changes_at() {
        out.compose_again_by(at, now);
    }
    reachability
}
