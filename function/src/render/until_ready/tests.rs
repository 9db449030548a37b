use std::{cell::Cell, collections::BTreeMap};

use serde_json::json;

use super::*;
use crate::{
    compose::fixtures::resource,
    proto::v1::{Resource, State},
    render::print_simulation,
};

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

fn dynamo_cluster() -> Value {
    yaml(include_str!(
        "../../../../examples/clusters/eks-h200-us-east.yaml"
    ))
}

fn h200_class() -> Value {
    yaml(include_str!("../../../../examples/classes/eks-h200-8x.yaml"))
}

fn seed_deployment() -> Value {
    yaml(include_str!("../../../../examples/deployments/qwen3-coder.yaml"))
}

fn seed_cache() -> Value {
    yaml(include_str!("../../../../examples/caches/qwen3-coder.yaml"))
}

fn inputs(composite: Value, required: Vec<Value>) -> Inputs {
    Inputs {
        composite,
        required,
        ..Inputs::default()
    }
}

/// The simulation with the function run in-process, as `render --until-ready` runs it.
fn simulate(inputs: &Inputs) -> Simulation {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime
        .block_on(run_until_ready(inputs, |req| async move {
            Ok(crate::run_function(req))
        }))
        .unwrap()
}

fn keys(simulation: &Simulation) -> Vec<String> {
    composed(&simulation.documents).map(key_of).collect()
}

#[test]
fn the_seed_dynamo_cluster_settles_ready_with_its_whole_stack() {
    let simulation = simulate(&inputs(dynamo_cluster(), vec![h200_class()]));
    assert_eq!(simulation.outcome, Outcome::Ready, "{:?}", simulation.waiting());
    let keys = keys(&simulation);
    for key in [
        "release-grove",
        "release-kai-scheduler",
        "eks-nodepool-gpu",
        "eks-nodepool-system",
    ] {
        assert!(keys.iter().any(|k| k == key), "{key} missing from {keys:?}");
    }
    assert!(keys.iter().any(|k| k.starts_with("object-modelexpress-server-")));
    // Staged: the activation policy alone first, and every round but the last two waited for something.
    assert_eq!(simulation.rounds[0].new.len(), 3);
    let rounds = simulation.rounds.len();
    assert!(
        simulation.rounds[..rounds - 2]
            .iter()
            .all(|r| !r.waiting.is_empty())
    );
    assert!(simulation.simulated.is_empty());
    let status = &simulation.documents[0]["status"];
    assert!(
        status["gateway"]["caCertificate"]
            .as_str()
            .is_some_and(|ca| ca.contains("BEGIN CERTIFICATE"))
    );
    assert_eq!(status["cacheStorageClass"], "modelplane-rwx-efs");
}

#[test]
fn a_deployment_schedules_on_the_example_cluster_simulated_alongside_and_is_routed() {
    let simulation = simulate(&inputs(
        seed_deployment(),
        vec![dynamo_cluster(), h200_class(), seed_cache()],
    ));
    assert_eq!(simulation.outcome, Outcome::Ready, "{:?}", simulation.waiting());
    assert_eq!(
        simulation.simulated,
        ["InferenceCluster eks-h200-us-east", "ModelCache qwen3-coder"]
    );
    let manifests: Vec<&str> = composed(&simulation.documents)
        .filter_map(|d| {
            d.pointer("/spec/forProvider/manifest/kind")
                .and_then(Value::as_str)
        })
        .collect();
    for kind in ["PodCliqueSet", "InferencePool", "HTTPRoute"] {
        assert!(manifests.contains(&kind), "no {kind} in {manifests:?}");
    }
    assert!(composed(&simulation.documents).any(|d| d["kind"] == "ModelEndpoint"));
}

#[test]
fn a_required_object_with_a_status_is_taken_as_observed() {
    let mut cluster = dynamo_cluster();
    cluster["status"] = json!({"stack": "Dynamo"});
    let simulation = simulate(&inputs(
        seed_deployment(),
        vec![cluster, h200_class(), seed_cache()],
    ));
    assert_eq!(simulation.simulated, ["ModelCache qwen3-coder"]);
    assert_eq!(simulation.outcome, Outcome::Stuck);
}

#[test]
fn a_deployment_whose_cache_is_missing_settles_unready_saying_what_it_waits_for() {
    let simulation = simulate(&inputs(seed_deployment(), vec![dynamo_cluster(), h200_class()]));
    assert_eq!(simulation.outcome, Outcome::Stuck);
    let waiting = simulation.waiting().join("; ");
    assert!(waiting.contains("ModelCache \"qwen3-coder\""), "{waiting}");
}

#[test]
fn a_composition_that_keeps_changing_stops_after_the_bound() {
    let calls = Cell::new(0_usize);
    let xr = dynamo_cluster();
    let simulation = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(run_until_ready(&inputs(xr.clone(), Vec::new()), |_req| {
            // Each call composes one more resource than the last: it never settles.
            calls.set(calls.get() + 1);
            let resources: BTreeMap<String, Resource> = (0..calls.get())
                .map(|i| {
                    (
                        format!("config-{i}"),
                        resource(&json!({"apiVersion": "v1", "kind": "ConfigMap"})),
                    )
                })
                .collect();
            let rsp = RunFunctionResponse {
                desired: Some(State {
                    composite: None,
                    resources,
                }),
                ..Default::default()
            };
            async move { Ok(rsp) }
        }))
        .unwrap();
    assert_eq!(simulation.outcome, Outcome::Unsettled);
    assert_eq!(simulation.rounds.len(), MAX_ROUNDS);
    assert!(!simulation.waiting().is_empty());
}

#[test]
fn a_fatal_result_ends_the_simulation_with_its_message() {
    let mut xr = dynamo_cluster();
    xr["spec"]["nodePools"][0]["className"] = json!("no-such-class");
    let simulation = simulate(&inputs(xr, vec![h200_class()]));
    assert_eq!(simulation.outcome, Outcome::Fatal);
    assert!(
        simulation.waiting()[0].contains("no-such-class"),
        "{:?}",
        simulation.waiting()
    );
}

#[test]
fn the_output_says_it_is_a_simulation_in_comment_lines_that_fit() {
    let simulation = simulate(&inputs(dynamo_cluster(), vec![h200_class()]));
    for stages in [false, true] {
        let mut out = Vec::new();
        print_simulation(&simulation, stages, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("# SIMULATION by `render --until-ready`"),
            "{text}"
        );
        let comments: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
        assert!(comments.iter().all(|l| l.len() <= 110), "{comments:?}");
        assert_eq!(text.contains("# --- round 1: 3 new resource(s)"), stages);
        let documents: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
            .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
            .collect();
        // The composite as it ended: first on its own, after the rounds with --stages.
        let composite = documents.iter().position(|d| d["kind"] == "InferenceCluster");
        assert_eq!(composite == Some(0), !stages);
        assert!(composite.is_some_and(|i| documents[i]["status"]["stack"] == "Dynamo"));
    }
}
