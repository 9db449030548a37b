use serde_json::{Value, json};

use super::{KEY, REQUIREMENT};
use crate::compose::{
    Output,
    fixtures::{run, with_observed, with_required},
    model_deployment::{
        compose,
        tests::{compose_on, seed, standard},
    },
};

fn scaling(mut xr: Value, autoscaling: Value) -> Value {
    xr["spec"]["autoscaling"] = autoscaling;
    xr
}

fn queue_depth() -> Value {
    json!({"maxReplicas": 8, "target": {"metric": "RequestsWaiting", "perReplica": 4}})
}

fn keda_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "scaledobjects.keda.sh"}})
}

fn condition(out: &Output) -> (crate::proto::v1::Status, &str, &str) {
    let c = out.reported("Autoscaling");
    (c.status, c.reason, c.message.as_deref().unwrap_or_default())
}

/// The seed, placed, with the KEDA CRD answered as `crds`.
fn with_keda(xr: Value, crds: &[Value]) -> Output {
    let first = compose_on(xr.clone(), &[standard()]);
    assert!(first.requirements.contains_key(REQUIREMENT));
    let req = super::super::engine_tests::next_request(&xr, &[standard()], &first, |_| true);
    run(compose, &with_required(req, REQUIREMENT, crds)).unwrap()
}

#[test]
fn the_scaled_object_scales_the_deployment_on_the_fleet_total_and_holds_through_an_outage() {
    let xr = scaling(seed(), queue_depth());
    let out = with_keda(xr, &[keda_crd()]);
    let scaled = &out.resources[KEY].object;
    assert_eq!(scaled["kind"], "ScaledObject");
    let spec = &scaled["spec"];
    assert_eq!(
        spec["scaleTargetRef"],
        json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment", "name": "qwen3-coder"})
    );
    assert_eq!(
        (&spec["minReplicaCount"], &spec["maxReplicaCount"]),
        (&json!(1), &json!(8))
    );
    let trigger = &spec["triggers"][0]["metadata"];
    assert_eq!(
        trigger["query"],
        "sum(modelplane_requests_waiting{namespace=\"ml-team\",deployment=\"qwen3-coder\"})"
    );
    assert_eq!(trigger["threshold"], "4");
    assert_eq!(
        trigger["serverAddress"],
        "http://prometheus-operated.monitoring.svc:9090"
    );
    // An outage: no answer is an error, and on errors the replicas stay as they are.
    assert_eq!(trigger["ignoreNullValues"], "false");
    assert_eq!(spec["fallback"]["behavior"], "currentReplicas");
    assert_eq!(
        spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        300
    );
    assert_eq!(condition(&out).1, "Waiting");
    // The scale subresource's selector, without which an HPA refuses to scale anything.
    assert_eq!(out.status["selector"], "modelplane.ai/deployment=qwen3-coder");

    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let first = compose_on(scaling(seed(), queue_depth()), &[standard()]);
    let req = super::super::engine_tests::next_request(
        &scaling(seed(), queue_depth()),
        &[standard()],
        &first,
        |_| true,
    );
    let req = with_observed(with_required(req, REQUIREMENT, &[keda_crd()]), KEY, &ready);
    let out = run(compose, &req).unwrap();
    let (status, reason, message) = condition(&out);
    assert_eq!(
        (status, reason),
        (crate::proto::v1::Status::ConditionTrue, "Scaling")
    );
    assert!(message.contains("between 1 and 8"), "{message}");
}

#[test]
fn without_keda_nothing_is_composed_for_scaling_and_the_condition_says_why() {
    let out = with_keda(scaling(seed(), queue_depth()), &[]);
    assert!(!out.resources.contains_key(KEY));
    let (status, reason, message) = condition(&out);
    assert_eq!(
        (status, reason),
        (crate::proto::v1::Status::ConditionFalse, "KedaNotInstalled")
    );
    assert!(message.contains("scaledobjects.keda.sh"), "{message}");
    assert!(
        out.resources.keys().any(|k| k.starts_with("replica-0-")),
        "the deployment runs regardless"
    );
}

#[test]
fn keda_is_asked_for_from_the_first_call() {
    let xr = scaling(seed(), queue_depth());
    let first = crate::compose::fixtures::run(compose, &crate::compose::fixtures::request(xr)).unwrap();
    assert!(
        first.requirements.contains_key(REQUIREMENT),
        "{:?}",
        first.requirements.keys()
    );
}

#[test]
fn without_autoscaling_keda_is_never_asked_for() {
    let out = compose_on(seed(), &[standard()]);
    assert!(!out.requirements.contains_key(REQUIREMENT));
    assert!(!out.resources.contains_key(KEY));
}

#[test]
fn durations_read_as_seconds() {
    for (text, seconds) in [("5m", 300), ("1h2m3s", 3723), ("90s", 90), ("0s", 0)] {
        assert_eq!(super::seconds(text), seconds, "{text}");
    }
}

fn engine_container(xr: &mut Value) -> &mut Value {
    &mut xr["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"][0]
}

#[test]
fn an_engine_that_does_not_report_the_figure_is_refused_naming_the_field() {
    let mut trtllm = scaling(seed(), queue_depth());
    engine_container(&mut trtllm)["image"] = json!("nvcr.io/nvidia/tensorrt-llm/release:1.1.0");
    let err = crate::compose::fixtures::run(compose, &crate::compose::fixtures::request(trtllm)).unwrap_err();
    assert_eq!(err.path, "spec.autoscaling.target.metric");
    assert!(err.reason.contains("TensorRT-LLM"), "{}", err.reason);

    let mut sglang = scaling(seed(), queue_depth());
    let container = engine_container(&mut sglang);
    container["image"] = json!("lmsysorg/sglang:v0.5.6");
    container["command"] = json!(["python3", "-m", "sglang.launch_server"]);
    container["args"] = json!(["--model-path", "Qwen/Qwen3-Coder"]);
    let err = crate::compose::fixtures::run(compose, &crate::compose::fixtures::request(sglang.clone()))
        .unwrap_err();
    assert!(err.path.ends_with("containers[0].args"), "{}", err.path);
    assert!(err.reason.contains("--enable-metrics"), "{}", err.reason);
    engine_container(&mut sglang)["args"] = json!(["--model-path", "Qwen/Qwen3-Coder", "--enable-metrics"]);
    assert!(crate::compose::fixtures::run(compose, &crate::compose::fixtures::request(sglang)).is_ok());

    // A vLLM engine serving a model whose name mentions another engine is still vLLM.
    let mut vllm = scaling(seed(), queue_depth());
    engine_container(&mut vllm)["args"] = json!(["--model", "nvidia/Qwen3-trtllm-ckpt"]);
    assert!(crate::compose::fixtures::run(compose, &crate::compose::fixtures::request(vllm)).is_ok());
}

#[test]
fn the_xrd_refuses_bounds_that_make_no_sense_naming_the_field() {
    let schema = |autoscaling: Value| {
        let xr = scaling(seed(), autoscaling);
        crate::compose::fixtures::run(compose, &crate::compose::fixtures::request(xr)).unwrap_err()
    };
    let err = schema(
        json!({"minReplicas": 5, "maxReplicas": 2, "target": {"metric": "RequestsWaiting", "perReplica": 4}}),
    );
    assert_eq!(err.path, "spec.autoscaling.minReplicas", "{err:?}");
    let err = schema(json!({"maxReplicas": 2, "target": {"metric": "RequestsWaiting", "perReplica": 0}}));
    assert_eq!(err.path, "spec.autoscaling.target.perReplica", "{err:?}");
    let err = schema(json!({"maxReplicas": 2, "target": {"metric": "GpuTemperature", "perReplica": 1}}));
    assert_eq!(err.path, "spec.autoscaling.target.metric", "{err:?}");
    for delay in ["5", "2h", "61m"] {
        let err = schema(json!({"maxReplicas": 2, "scaleDownDelay": delay,
                                "target": {"metric": "RequestsWaiting", "perReplica": 1}}));
        assert_eq!(err.path, "spec.autoscaling.scaleDownDelay", "{delay}: {err:?}");
    }
}

fn to_zero() -> Value {
    json!({"minReplicas": 0, "maxReplicas": 4, "scaleDownDelay": "10m",
           "target": {"metric": "RequestsWaiting", "perReplica": 4}})
}

#[test]
fn a_deployment_that_may_scale_to_zero_wakes_on_demand_and_never_sleeps_through_an_outage() {
    let out = with_keda(scaling(seed(), to_zero()), &[keda_crd()]);
    let spec = &out.resources[KEY].object["spec"];
    assert_eq!(spec["minReplicaCount"], 0);
    // Idle for the scale-down delay before the last replica goes.
    assert_eq!(spec["cooldownPeriod"], 600);
    // KEDA takes an idle deployment whose triggers fail to zero unless its fallback names replicas.
    assert_eq!(spec["fallback"]["replicas"], 1);
    assert_eq!(spec["fallback"]["behavior"], "currentReplicas");
    let in_use = &spec["triggers"][1];
    assert_eq!(in_use["name"], super::IN_USE_TRIGGER);
    let meta = &in_use["metadata"];
    assert_eq!(
        (&meta["threshold"], &meta["ignoreNullValues"]),
        (&json!("1"), &json!("false")),
        "it asks for one replica at most, and nothing known is an error"
    );
    let query = meta["query"].as_str().unwrap();
    for part in [
        "modelplane_requests_running{namespace=\"ml-team\",deployment=\"qwen3-coder\"}",
        "modelplane_standby_last_request_timestamp_seconds{namespace=\"ml-team\",deployment=\"qwen3-coder\"} < 300",
        "clamp_max(",
    ] {
        assert!(query.contains(part), "{part} not in {query}");
    }

    // Its standby endpoint: the standby server on the gateway's cluster, under the deployment's own prefix.
    let standby = &out.resources[super::super::endpoint::STANDBY_KEY];
    assert!(standby.ready, "it never holds the deployment's readiness");
    let endpoint = &standby.object;
    assert_eq!(endpoint["metadata"]["name"], "qwen3-coder-standby");
    assert_eq!(
        endpoint["metadata"]["labels"]["modelplane.ai/deployment"],
        "qwen3-coder"
    );
    assert_eq!(endpoint["metadata"]["labels"]["modelplane.ai/standby"], "true");
    assert_eq!(
        endpoint["spec"],
        json!({"origin": "http://modelplane-standby.modelplane-system.svc.cluster.local:8080",
               "api": {"schema": "OpenAI", "prefix": "/ml-team/qwen3-coder/v1"}})
    );
    // The ModelEndpoint XRD admits it, and the endpoint's own composer finds it routable.
    let checked = run(
        crate::compose::model_endpoint::compose,
        &crate::compose::fixtures::request(Value::Object(endpoint.to_map())),
    )
    .unwrap();
    assert_eq!(checked.ready, Some(true));
}

#[test]
fn no_standby_endpoint_without_keda_or_with_a_floor_of_one() {
    let without_keda = with_keda(scaling(seed(), to_zero()), &[]);
    assert!(
        !without_keda
            .resources
            .contains_key(super::super::endpoint::STANDBY_KEY)
    );
    let floor = with_keda(scaling(seed(), queue_depth()), &[keda_crd()]);
    assert!(!floor.resources.contains_key(super::super::endpoint::STANDBY_KEY));
    let spec = &floor.resources[KEY].object["spec"];
    assert_eq!(
        spec["triggers"].as_array().unwrap().len(),
        1,
        "no wake-up trigger"
    );
    assert!(spec.get("cooldownPeriod").is_none());
}
