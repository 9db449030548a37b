//! `spec.autoscaling`: a KEDA ScaledObject next to the ModelDeployment on the control plane, scaling it through its
//! scale subresource (`spec.replicas`) on one of the fleet's `modelplane_*` figures ([`engine_metrics`]).
//!
//! KEDA's Prometheus trigger turns the fleet total into replicas as `ceil(total / perReplica)`. Two choices keep
//! a metrics outage from scaling anything down: an empty answer is an error (`ignoreNullValues: false`), and on
//! errors the ScaledObject keeps the replicas it has (`fallback.behavior: currentReplicas`).
//!
//! With `minReplicas: 0` KEDA may take an idle deployment to zero, after `scaleDownDelay` with no request
//! running, waiting or held. While it has no replica its standby endpoint sends callers to the fleet gateway's
//! standby server ([`crate::standby`]), whose demand series wakes it: a second trigger reads "in use" (1 or 0)
//! from the engines' figures or, with none, from that demand. At zero both triggers find nothing, which KEDA
//! takes as an error and, having a fallback, leaves the deployment where it is.
//!
//! KEDA is the control plane's to install. Its CRD is read as a requirement, so a control plane without it gets
//! a condition that says so instead of a composed resource Crossplane could not apply.
//!
//! [`engine_metrics`]: crate::workload::engine_metrics

use serde::de::IgnoredAny;

use crate::wire::tree::{Fields, fields, tree};

use crate::compose::{
    Output,
    conditions::{ConditionType, Reason},
    remote,
};
use crate::{
    api::model_deployment::{Autoscaling, ScalingMetric},
    proto::v1::{ResourceSelector, RunFunctionRequest, Status, resource_selector::Match},
    sdk::request,
};

/// The composed ScaledObject's key.
pub const KEY: &str = "autoscaler";
/// The requirement that finds KEDA's ScaledObject CRD.
pub const REQUIREMENT: &str = "keda";
const KEDA_CRD: &str = "scaledobjects.keda.sh";
/// Query failures KEDA tolerates before it holds the replicas where they are.
const FAILURES_BEFORE_FALLBACK: u32 = 3;

pub fn requirement() -> ResourceSelector {
    ResourceSelector {
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        r#match: Some(Match::MatchName(KEDA_CRD.into())),
        namespace: None,
    }
}

/// The fleet total of `metric` for one deployment, summed over every cluster, replica and pod.
fn query(metric: ScalingMetric, namespace: &str, deployment: &str) -> String {
    let series = match metric {
        ScalingMetric::RequestsWaiting => "modelplane_requests_waiting",
        ScalingMetric::RequestsRunning => "modelplane_requests_running",
        ScalingMetric::GenerationTokensPerSecond => "modelplane_generation_tokens:rate1m",
    };
    format!("sum({series}{{namespace=\"{namespace}\",deployment=\"{deployment}\"}})")
}

/// `1h2m3s` in seconds. The XRD's pattern admits only such durations; anything else reads as the default.
fn seconds(duration: &str) -> u64 {
    let mut total = 0u64;
    let mut number = 0u64;
    for c in duration.chars() {
        match c {
            '0'..='9' => {
                number = number
                    .saturating_mul(10)
                    .saturating_add(u64::from(c as u8 - b'0'))
            }
            'h' | 'm' | 's' => {
                let unit = match c {
                    'h' => 3600,
                    'm' => 60,
                    _ => 1,
                };
                total = total.saturating_add(number.saturating_mul(unit));
                number = 0;
            }
            _ => return 300,
        }
    }
    total
}

/// How long a held request counts as demand: the standby server asks callers to retry well within it, and each
/// retry renews it, so a replica loading for longer stays wanted while callers still wait.
const DEMAND_WINDOW_SECONDS: u32 = 300;

/// 1 while the deployment is in use, 0 when idle, nothing when nothing is known. In use: a request running or
/// waiting on an engine, or one held by a standby server within the demand window. The two sources are labelled
/// apart so that `or` keeps both, and the sum is clamped so the trigger asks for one replica at most: it wakes
/// the deployment, and the target trigger sizes it.
fn in_use_query(namespace: &str, deployment: &str) -> String {
    let of = format!("{{namespace=\"{namespace}\",deployment=\"{deployment}\"}}");
    format!(
        "clamp_max(sum(label_replace(sum(modelplane_requests_running{of}) + sum(modelplane_requests_waiting{of}), \
         \"from\", \"engines\", \"\", \"\") or label_replace(count(time() - {held}{of} < {DEMAND_WINDOW_SECONDS}), \
         \"from\", \"standby\", \"\", \"\")), 1)",
        held = crate::standby::LAST_REQUEST_SERIES,
    )
}

/// The longest scale-down window an HPA accepts (the XRD refuses a longer delay).
const MAX_SCALE_DOWN_SECONDS: u64 = 3600;

pub fn scaled_object(name: &str, namespace: &str, a: &Autoscaling) -> Fields {
    let delay = seconds(&a.scale_down_delay).min(MAX_SCALE_DOWN_SECONDS);
    let mut triggers = vec![tree!({
        "type": "prometheus",
        "metricType": "AverageValue",
        "metadata": {
            "serverAddress": &a.metrics_server,
            "query": query(a.target.metric, namespace, name),
            "threshold": a.target.per_replica.to_string(),
            "ignoreNullValues": "false",
        },
    })];
    let mut spec = fields!({
        "scaleTargetRef": {"apiVersion": super::API_VERSION, "kind": "ModelDeployment", "name": name},
        "minReplicaCount": a.min_replicas,
        "maxReplicaCount": a.max_replicas,
        "fallback": {
            "failureThreshold": FAILURES_BEFORE_FALLBACK,
            // Never 0: KEDA scales an idle deployment whose triggers fail to zero unless its fallback names
            // replicas. Under `currentReplicas` the number itself is never applied.
            "replicas": a.min_replicas.max(1),
            "behavior": "currentReplicas",
        },
        "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
            "scaleDown": {"stabilizationWindowSeconds": delay},
        }}},
    });
    if a.min_replicas == 0 {
        spec.insert("cooldownPeriod", delay);
        triggers.push(tree!({
            "type": "prometheus",
            "name": IN_USE_TRIGGER,
            "metricType": "AverageValue",
            "metadata": {
                "serverAddress": &a.metrics_server,
                "query": in_use_query(namespace, name),
                "threshold": "1",
                "activationThreshold": "0",
                "ignoreNullValues": "false",
            },
        }));
    }
    spec.insert("triggers", triggers);
    fields!({
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

/// The name of the trigger that wakes a deployment at zero (KEDA lists triggers by name in its status).
pub const IN_USE_TRIGGER: &str = "in-use";

/// Composes the ScaledObject when KEDA is installed, and says in the `Autoscaling` condition how it stands.
/// Returns whether it composed one.
pub fn compose(
    out: &mut Output,
    req: &RunFunctionRequest,
    name: &str,
    namespace: &str,
    a: &Autoscaling,
) -> bool {
    let Some(found) = request::required_resources(req, REQUIREMENT) else {
        return false;
    };
    if found.is_empty() {
        out.condition(
            ConditionType::Autoscaling,
            Status::ConditionFalse,
            Reason::KedaNotInstalled,
            format!(
                "spec.autoscaling needs KEDA on the control plane (no CRD {KEDA_CRD}); spec.replicas stays as \
                 written"
            ),
        );
        return false;
    }
    // Ready or not, it never holds the deployment's readiness: serving does not wait for scaling.
    out.compose(KEY, scaled_object(name, namespace, a), true);
    let observed = remote::observed::<IgnoredAny>(request::observed_composed(req, KEY));
    let (status, reason, message) = match observed.as_ref().and_then(|o| o.condition("Ready")) {
        Some(c) if c.status == "True" => (
            Status::ConditionTrue,
            Reason::Scaling,
            format!(
                "KEDA scales between {} and {} replicas, {} {:?} per replica",
                a.min_replicas, a.max_replicas, a.target.per_replica, a.target.metric
            ),
        ),
        Some(c) => (
            Status::ConditionFalse,
            Reason::Waiting,
            format!("KEDA does not scale yet: {}", c.message),
        ),
        None => (
            Status::ConditionFalse,
            Reason::Waiting,
            "waiting for KEDA to take the ScaledObject".to_owned(),
        ),
    };
    out.condition(ConditionType::Autoscaling, status, reason, message);
    true
}

#[cfg(test)]
#[path = "autoscaling_tests.rs"]
mod tests;
