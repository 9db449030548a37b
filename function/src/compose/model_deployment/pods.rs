//! The `EnginesRunning` condition: what the pods of each placed replica's engines say about themselves, read
//! from the reports the clusters' pod reporters write ([`crate::workload::pod_report`]). Crossplane's own
//! `Ready` condition only lists the composed resources that are not ready; this one names the pod, the failure
//! (an image that cannot be pulled, a probe that never passes, a claim no device satisfies) and the kubelet's or
//! the scheduler's own words.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{
    api::model_deployment::{ModelDeploymentSpec, ModelDeploymentStatus},
    compose::{
        Output,
        conditions::{ConditionType, Reason, first_named},
        remote,
    },
    proto::v1::{RunFunctionRequest, Status},
    sdk::request,
    workload::pod_report::{PodReason, Report},
};

use super::replica::{engine_key, report_key};

/// Failures named in the message; the rest are counted.
const MAX_NAMED: usize = 3;

#[derive(Deserialize)]
struct ConfigMapView {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

/// Sets `EnginesRunning` from the reports of every placed replica that is not ready.
pub fn condition(
    out: &mut Output,
    req: &RunFunctionRequest,
    spec: &ModelDeploymentSpec,
    status: &ModelDeploymentStatus,
) {
    let placed: Vec<_> = status
        .replicas
        .iter()
        .filter_map(|r| Some((r.replica, r.cluster.as_deref()?, r.ready == Some(true))))
        .collect();
    if placed.is_empty() {
        out.condition(
            ConditionType::EnginesRunning,
            Status::ConditionUnknown,
            Reason::EnginesStarting,
            "no replica is placed yet",
        );
        return;
    }
    let mut failures: Vec<(PodReason, String)> = Vec::new();
    let mut waiting = 0usize;
    for &(replica, cluster, ready) in &placed {
        if ready {
            continue;
        }
        waiting += 1;
        for engine in &spec.template.spec.engines {
            let key = report_key(&engine_key(replica, cluster, &engine.name));
            let observed = remote::observed::<ConfigMapView>(request::observed_composed(req, &key));
            let report = observed
                .as_ref()
                .and_then(|o| o.manifest())
                .and_then(|m| Report::from_data(&m.data));
            if let Some(report) = report.filter(|r| r.reason.is_failure()) {
                let at = format!("replica {replica} on {cluster}, engine {}", engine.name);
                failures.push((report.reason, format!("{at}: {}", report.message)));
            }
        }
    }
    let total = placed.len();
    if waiting == 0 {
        let message = format!("the engines of all {total} placed replica(s) are ready");
        out.condition(
            ConditionType::EnginesRunning,
            Status::ConditionTrue,
            Reason::EnginesRunning,
            message,
        );
        return;
    }
    failures.sort_by_key(|(reason, _)| *reason);
    let Some((first, _)) = failures.first() else {
        let message =
            format!("{waiting} of {total} placed replica(s) are starting; no pod reports a failure");
        out.condition(
            ConditionType::EnginesRunning,
            Status::ConditionFalse,
            Reason::EnginesStarting,
            message,
        );
        return;
    };
    let reason = Reason::from(*first);
    let message = first_named(failures.into_iter().map(|(_, m)| m).collect(), MAX_NAMED);
    out.condition(
        ConditionType::EnginesRunning,
        Status::ConditionFalse,
        reason,
        message,
    );
}
