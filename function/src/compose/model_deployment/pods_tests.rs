//! The pod report each engine workload's replica observes, and the `EnginesRunning` condition read from it.

use serde_json::{Value, json};

use super::tests::{compose_on, manifest, seed, standard};
use super::*;
use crate::compose::fixtures::{request, run, with_observed, with_required};

const ENGINE_KEY: &str = "replica-0-eks-h200-us-west-qwen3-coder";
const REPORT_KEY: &str = "replica-0-eks-h200-us-west-qwen3-coder-pods";

fn engines_running(out: &Output) -> (Status, &'static str, String) {
    let c = out.reported("EnginesRunning");
    (c.status, c.reason, c.message.clone().unwrap_or_default())
}

/// The seed placed on the Standard cluster, composed again with `report` (ConfigMap data) observed.
fn with_report(report: Option<Value>) -> Output {
    let first = compose_on(seed(), &[standard()]);
    let mut req = with_required(request(seed()), CLUSTERS, &[standard()]);
    req = with_required(req, CACHE, &[super::tests::cache(&[standard()], "Ready")]);
    for (key, composed) in &first.resources {
        let mut object = Value::Object(composed.object.to_map());
        if key == REPORT_KEY
            && let Some(data) = &report
        {
            let mut observed = object["spec"]["forProvider"]["manifest"].clone();
            observed["data"] = data.clone();
            object["status"] = json!({"atProvider": {"manifest": observed}});
        }
        req = with_observed(req, key, &object);
    }
    run(compose, &req).unwrap()
}

#[test]
fn each_engine_workload_observes_its_pod_report_without_holding_readiness() {
    let out = compose_on(seed(), &[standard()]);
    let workload = manifest(&out, ENGINE_KEY)["metadata"]["name"].as_str().unwrap();
    let report = &out.resources[REPORT_KEY];
    assert!(report.ready, "a report never holds the replica's readiness");
    assert_eq!(report.object["spec"]["managementPolicies"], json!(["Observe"]));
    assert_eq!(
        manifest(&out, REPORT_KEY),
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("pods.ml-team.{workload}"), "namespace": "modelplane-system"}})
    );
}

#[test]
fn a_pod_that_cannot_pull_its_image_is_named_in_the_condition() {
    let out = with_report(Some(
        json!({"reason": "ImagePullFailed", "pods": "2", "ready": "0",
        "message": "pod qwen3-coder-0-abc: container engine cannot pull image vllm:bad: not found"}),
    ));
    let (status, reason, message) = engines_running(&out);
    assert_eq!((status, reason), (Status::ConditionFalse, "ImagePullFailed"));
    assert_eq!(
        message,
        "replica 0 on eks-h200-us-west, engine qwen3-coder: pod qwen3-coder-0-abc: container engine cannot pull \
         image vllm:bad: not found"
    );
}

#[test]
fn without_a_failure_reported_the_engines_are_starting() {
    for report in [
        None,
        Some(json!({"reason": "EnginesStarting", "message": "0 of 2 pod(s) ready"})),
    ] {
        let (status, reason, _) = engines_running(&with_report(report));
        assert_eq!((status, reason), (Status::ConditionFalse, "EnginesStarting"));
    }
    // A reason from a newer reporter is not taken for a failure.
    let (_, reason, _) = engines_running(&with_report(Some(json!({"reason": "SomethingNew"}))));
    assert_eq!(reason, "EnginesStarting");
}

#[test]
fn before_any_placement_the_condition_is_unknown() {
    let req = with_required(request(seed()), CLUSTERS, &[]);
    let req = with_required(req, CACHE, &[]);
    let out = run(compose, &req).unwrap();
    let (status, _, _) = engines_running(&out);
    assert_eq!(status, Status::ConditionUnknown);
}
