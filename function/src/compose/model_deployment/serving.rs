//! How the deployment serves, from the fleet's last metrics sample: `status.serving`, each replica's figures, and
//! the `Serving` condition against `spec.slo`. Reads only what it is given ([`Reading`]); the sample is taken
//! outside the call (`fleet_metrics`).

use crate::compose::{
    Output,
    conditions::{ConditionType, Reason},
};
use crate::{
    api::model_deployment::{ModelDeploymentStatus, ServingFigures, ServingStatus, Slo},
    fleet_metrics::Reading,
    proto::v1::Status,
};

/// Misses named in the condition's message; the rest are counted.
const MAX_MISSES_NAMED: usize = 3;

/// Writes the figures into `status` and sets the `Serving` condition. Without fleet metrics and without
/// `spec.slo` there is nothing to say, and no condition is set.
pub fn report(out: &mut Output, status: &mut ModelDeploymentStatus, slo: Option<&Slo>, reading: Reading) {
    let figures = match reading {
        Reading::Off if slo.is_none() => return,
        Reading::Off => {
            let message = "spec.slo needs the fleet's metrics, and this function reads none (its \
                           --fleet-metrics-url is empty)";
            return unknown(out, Reason::MetricsUnavailable, message.into());
        }
        Reading::Unavailable { why, .. } => return unknown(out, Reason::MetricsUnavailable, why),
        Reading::NotReported { source } => {
            let message = format!("no engine of this deployment reports to {source} yet");
            return unknown(out, Reason::NoFigures, message);
        }
        Reading::Found { sampled_at, figures } => {
            status.serving = Some(ServingStatus {
                sampled_at,
                figures: figures.total.clone(),
            });
            figures
        }
    };
    let mut misses = Vec::new();
    let mut reporting = 0;
    for replica in &mut status.replicas {
        replica.serving = figures.replicas.get(&replica.replica).cloned();
        let Some(serving) = &replica.serving else {
            continue;
        };
        reporting += 1;
        let cluster = replica.cluster.as_deref().unwrap_or("no cluster");
        for miss in slo.map(|slo| missed(slo, serving)).unwrap_or_default() {
            misses.push(format!("replica {} on {cluster}: {miss}", replica.replica));
        }
    }
    let total = &figures.total;
    if !misses.is_empty() {
        let more = misses.len().saturating_sub(MAX_MISSES_NAMED);
        misses.truncate(MAX_MISSES_NAMED);
        let mut message = misses.join("; ");
        if more > 0 {
            message.push_str(&format!("; and {more} more"));
        }
        out.condition(
            ConditionType::Serving,
            Status::ConditionFalse,
            Reason::SloMissed,
            message,
        );
        return;
    }
    let targets = slo.is_some_and(|s| s.time_to_first_token.is_some() || s.time_per_output_token.is_some());
    let reason = if targets {
        Reason::WithinSlo
    } else {
        Reason::Reporting
    };
    let mut message = format!("{reporting} of {} replicas report", status.replicas.len());
    if targets {
        message.push_str(", each within spec.slo");
    }
    if let Some(p95) = total.time_to_first_token_p95_seconds {
        message.push_str(&format!("; p95 time to first token {}", seconds(p95)));
    }
    out.condition(ConditionType::Serving, Status::ConditionTrue, reason, message);
}

fn unknown(out: &mut Output, reason: Reason, message: String) {
    out.condition(ConditionType::Serving, Status::ConditionUnknown, reason, message);
}

/// Each target of `slo` that `figures` misses, named with its figure, value and field. A figure the engines do
/// not report (no traffic in the last minute) misses nothing.
fn missed(slo: &Slo, figures: &ServingFigures) -> Vec<String> {
    let targets = [
        (
            "time to first token",
            "spec.slo.timeToFirstToken",
            &slo.time_to_first_token,
            figures.time_to_first_token_p95_seconds,
        ),
        (
            "time per output token",
            "spec.slo.timePerOutputToken",
            &slo.time_per_output_token,
            figures.time_per_output_token_p95_seconds,
        ),
    ];
    targets
        .into_iter()
        .filter_map(|(what, field, target, value)| {
            let target_text = target.as_deref()?;
            let (limit, value) = (latency_seconds(target_text)?, value?);
            (value > limit).then(|| format!("{what} p95 {} is over {field} {target_text}", seconds(value)))
        })
        .collect()
}

/// `500ms` or `1.5s` in seconds. The XRD admits nothing else, so anything else reads as no target.
pub fn latency_seconds(text: &str) -> Option<f64> {
    let (number, scale) = match text.strip_suffix("ms") {
        Some(number) => (number, 1e-3),
        None => (text.strip_suffix('s')?, 1.0),
    };
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value > 0.0).then_some(value * scale)
}

/// Seconds as a reader writes them: `975ms`, `1.25s`.
fn seconds(value: f64) -> String {
    if value < 1.0 {
        let ms = (value * 1e4).round() / 10.0;
        format!("{ms}ms")
    } else {
        format!("{}s", (value * 1e3).round() / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::{api::model_deployment::ReplicaStatus, fleet_metrics::DeploymentFigures};

    fn replicas_on_clusters(replicas: u32) -> ModelDeploymentStatus {
        ModelDeploymentStatus {
            replicas: (0..replicas)
                .map(|i| ReplicaStatus {
                    replica: i,
                    cluster: Some(format!("c{i}")),
                    ..ReplicaStatus::default()
                })
                .collect(),
            ..ModelDeploymentStatus::default()
        }
    }

    fn ttft(p95: f64) -> ServingFigures {
        ServingFigures {
            requests_waiting: Some(2),
            time_to_first_token_p95_seconds: Some(p95),
            ..ServingFigures::default()
        }
    }

    fn found(replicas: &[(u32, ServingFigures)]) -> Reading {
        Reading::Found {
            sampled_at: "2026-12-05T18:00:00Z".into(),
            figures: DeploymentFigures {
                total: ttft(0.5),
                replicas: replicas.iter().cloned().collect::<BTreeMap<_, _>>(),
            },
        }
    }

    fn slo(ttft: &str) -> Slo {
        Slo {
            time_to_first_token: Some(ttft.into()),
            time_per_output_token: None,
        }
    }

    fn serving_condition(out: &Output) -> (Status, &'static str, String) {
        let c = out.reported("Serving");
        (c.status, c.reason, c.message.clone().unwrap_or_default())
    }

    #[test]
    fn figures_land_in_status_per_replica_and_in_total() {
        let mut out = Output::default();
        let mut st = replicas_on_clusters(2);
        report(&mut out, &mut st, None, found(&[(1, ttft(0.3))]));
        let written = serde_json::to_value(&st).unwrap();
        assert_eq!(
            written["serving"],
            json!({"sampledAt": "2026-12-05T18:00:00Z", "requestsWaiting": 2, "timeToFirstTokenP95Seconds": 0.5})
        );
        assert_eq!(written["replicas"][0].get("serving"), None);
        assert_eq!(
            written["replicas"][1]["serving"]["timeToFirstTokenP95Seconds"],
            0.3
        );
        let (status, reason, message) = serving_condition(&out);
        assert_eq!((status, reason), (Status::ConditionTrue, "Reporting"));
        assert_eq!(message, "1 of 2 replicas report; p95 time to first token 500ms");
    }

    #[test]
    fn a_replica_over_its_target_is_named_with_the_figure_and_the_field() {
        let mut out = Output::default();
        let mut st = replicas_on_clusters(2);
        let reading = found(&[(0, ttft(0.3)), (1, ttft(0.975))]);
        report(&mut out, &mut st, Some(&slo("500ms")), reading);
        let (status, reason, message) = serving_condition(&out);
        assert_eq!((status, reason), (Status::ConditionFalse, "SloMissed"));
        assert_eq!(
            message,
            "replica 1 on c1: time to first token p95 975ms is over spec.slo.timeToFirstToken 500ms"
        );

        let mut out = Output::default();
        report(
            &mut out,
            &mut replicas_on_clusters(2),
            Some(&slo("1s")),
            found(&[(1, ttft(0.975))]),
        );
        let (status, reason, message) = serving_condition(&out);
        assert_eq!((status, reason), (Status::ConditionTrue, "WithinSlo"));
        assert!(
            message.starts_with("1 of 2 replicas report, each within spec.slo"),
            "{message}"
        );
    }

    #[test]
    fn many_misses_are_counted_past_the_first_three() {
        let mut out = Output::default();
        let slow: Vec<(u32, ServingFigures)> = (0..5).map(|i| (i, ttft(2.0))).collect();
        report(
            &mut out,
            &mut replicas_on_clusters(5),
            Some(&slo("1.5s")),
            found(&slow),
        );
        let (_, _, message) = serving_condition(&out);
        assert!(message.ends_with("; and 2 more"), "{message}");
        assert!(message.contains("time to first token p95 2s is over spec.slo.timeToFirstToken 1.5s"));
    }

    #[test]
    fn without_a_sample_the_condition_is_unknown_and_says_why_and_no_figure_is_written() {
        let cases = [
            (
                Reading::Off,
                Some(slo("1s")),
                "MetricsUnavailable",
                "--fleet-metrics-url is empty",
            ),
            (
                Reading::Unavailable {
                    source: "http://p".into(),
                    why: "no sample from http://p yet (connection refused)".into(),
                },
                None,
                "MetricsUnavailable",
                "connection refused",
            ),
            (
                Reading::NotReported {
                    source: "http://p".into(),
                },
                None,
                "NoFigures",
                "reports to http://p yet",
            ),
        ];
        for (reading, slo, want_reason, want_message) in cases {
            let mut out = Output::default();
            let mut st = replicas_on_clusters(1);
            report(&mut out, &mut st, slo.as_ref(), reading);
            let (status, reason, message) = serving_condition(&out);
            assert_eq!((status, reason), (Status::ConditionUnknown, want_reason));
            assert!(message.contains(want_message), "{message}");
            assert_eq!(st.serving, None);
        }

        let mut out = Output::default();
        report(&mut out, &mut replicas_on_clusters(1), None, Reading::Off);
        assert!(out.conditions.is_empty(), "no metrics and no SLO: nothing to say");
    }

    /// The seed placed on the Standard cluster, composed with `reading` as the fleet's sample.
    fn composed(xr: serde_json::Value, reading: Reading) -> Output {
        use crate::compose::{
            fixtures::{request, with_required},
            model_deployment::{CACHE, CLUSTERS, compose_with, tests},
        };
        let clusters = [tests::standard()];
        let req = with_required(request(xr.clone()), CLUSTERS, &clusters);
        let req = with_required(req, CACHE, &[tests::cache(&clusters, "Ready")]);
        let raw = crate::wire::RawStruct::from_value(&xr).unwrap();
        compose_with(&req, &raw, |namespace, name| {
            assert_eq!((namespace, name), ("ml-team", "qwen3-coder"));
            reading
        })
        .unwrap()
    }

    #[test]
    fn the_composer_writes_the_sample_of_its_own_deployment() {
        let mut xr = super::super::tests::seed();
        xr["spec"]["slo"] = json!({"timeToFirstToken": "250ms"});
        let out = composed(xr, found(&[(0, ttft(0.3))]));
        assert_eq!(out.status["serving"]["requestsWaiting"], 2);
        assert_eq!(
            out.status["replicas"][0]["serving"]["timeToFirstTokenP95Seconds"],
            0.3
        );
        let (status, reason, message) = serving_condition(&out);
        assert_eq!((status, reason), (Status::ConditionFalse, "SloMissed"));
        assert!(
            message.starts_with("replica 0 on eks-h200-us-west: time to first token p95 300ms"),
            "{message}"
        );
    }

    #[test]
    fn the_xrd_refuses_a_target_without_a_unit_or_of_zero_naming_the_field() {
        use crate::compose::{
            fixtures::{request, run},
            model_deployment::compose,
        };
        for (field, value, message) in [
            ("timeToFirstToken", "500", "must be a duration with its unit"),
            ("timePerOutputToken", "50 ms", "must be a duration with its unit"),
            ("timeToFirstToken", "0ms", "must be above zero"),
            ("timePerOutputToken", "0.0s", "must be above zero"),
        ] {
            let mut xr = super::super::tests::seed();
            xr["spec"]["slo"] = json!({ field: value });
            let err = run(compose, &request(xr)).unwrap_err();
            assert_eq!(err.path, format!("spec.slo.{field}"), "{value}: {err:?}");
            assert!(err.to_string().contains(message), "{value}: {err}");
        }
    }

    #[test]
    fn latencies_are_read_with_their_unit() {
        assert_eq!(latency_seconds("500ms"), Some(0.5));
        assert_eq!(latency_seconds("1.5s"), Some(1.5));
        assert_eq!(latency_seconds("2"), None);
        assert_eq!(latency_seconds("0ms"), None);
        assert_eq!(latency_seconds("fast"), None);
    }
}
