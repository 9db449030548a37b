//! Benchmarks (not tests) for ModelDeployment scheduling: `cargo bench -p modelplane-function --bench
//! model_deployment`. Prints p50/p90 per scenario.
//!
//! 1. The scheduler alone on 1000 clusters × 8 pools × 8 engines.
//! 2. A whole RunFunction, wire bytes in and out, of a 10-replica two-node-gang deployment over 100 clusters ×
//!    8 pools (the request Modelplane's Python function takes ~4.5 s on).
//! 3. A one-replica two-node gang, wire bytes in and out: the first call (answered with requirements) and the
//!    call that composes it (probes and all), each beside an echo of the same request (decode, copy desired and
//!    context into a response, encode: what a no-op function on an SDK does), with the steps timed apart. It
//!    runs as the server runs a call: on a long-lived thread with the call stack, not a thread of its own.
//!
//! 4. The same deployment settled (every composed resource observed Ready, requirements answered), on clusters
//!    without and with a gateway address: what routing (a pool, a picker, a route and an endpoint per replica)
//!    adds to a call, and the composed objects per replica.
//!
//! Arguments choose scenarios by name (`cargo bench --bench model_deployment -- gang` runs only the third),
//! which keeps a run under a profiler short.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use modelplane_function::{
    api::{TypeMeta, model_deployment::ReplicaSpec},
    compose::model_deployment::CLUSTERS,
    dispatch::run_function_here,
    limits::{CALL_STACK_BYTES, Deadline},
    proto::v1::{RunFunctionRequest, RunFunctionResponse},
    render::RequestBuilder,
    run_function,
    schedule::{ClusterView, Input, devices, schedule},
    validate,
    workload::cluster_gateway::tls,
};
use prost::Message;
use serde_json::{Value, json};

/// The cluster gateways' published CA (a test CA; its key was never kept).
const TEST_CA: &str = include_str!("../../tests/fixtures/tls/cluster-gateway-ca.pem");

const CLASSES: [(&str, &str, &str); 4] = [
    ("h200", "141Gi", "9.0.0"),
    ("h100", "80Gi", "9.0.0"),
    ("a100", "80Gi", "8.0.0"),
    ("l40s", "48Gi", "8.9.0"),
];

fn cluster(i: usize, stack: &str) -> Value {
    let pools: Vec<Value> = (0..8)
        .map(|p| {
            let (class, memory, cc) = CLASSES[(i + p) % CLASSES.len()];
            json!({"name": format!("pool-{p}"), "className": class, "nodeCount": 8, "devices": [
                {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 8,
                 "attributes": {"productName": {"string": class}, "cudaComputeCapability": {"version": cc}},
                 "capacity": {"memory": {"value": memory}}},
                {"name": "memory", "claim": "Synthetic", "count": 1, "capacity": {"memory": {"value": "2Ti"}}}]})
        })
        .collect();
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
        "metadata": {"name": format!("cluster-{i:04}"), "labels": {"region": if i.is_multiple_of(2) { "us-east-1" } else { "us-west-2" }}},
        "spec": {"stack": stack, "cluster": {"source": "EKS", "eks": {"region": "us-east-1"}},
                 "nodePools": (0..8).map(|p| json!({"name": format!("pool-{p}"), "className": "h200", "nodeCount": 4})).collect::<Vec<_>>()},
        "status": {"stack": stack, "providerConfigName": format!("cluster-{i:04}"), "cacheStorageClass": "efs",
                   "modelExpressAddress": "modelexpress-server:8001", "pools": pools,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]}})
}

fn gang_engine(name: &str) -> Value {
    let devices = json!({"devices": [{"name": "gpu", "count": 8, "selectors": [
        {"cel": r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("120Gi")) >= 0"#},
        {"cel": r#"device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))"#}]}]});
    let container = json!({"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.23.0",
        "command": ["/bin/sh", "-c", "exec vllm serve Qwen/Qwen3 --master-addr=$(MODELPLANE_LEADER_ADDRESS)"]}]}});
    json!({"name": name, "members": [
        {"role": "Leader", "nodeSelector": devices, "template": container},
        {"role": "Worker", "worker": {"nodes": 1}, "nodeSelector": devices, "template": container}]})
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    println!(
        "{what}: p50 {:?}  p90 {:?}  ({} runs)",
        at(0.5),
        at(0.9),
        samples.len()
    );
}

fn scheduler_on_a_thousand_clusters() {
    let clusters: Vec<ClusterView> = (0..1000)
        .map(|i| serde_json::from_value(cluster(i, "Standard")).unwrap())
        .collect();
    let engines: Vec<Value> = (0..8).map(|e| gang_engine(&format!("engine-{e}"))).collect();
    let spec: ReplicaSpec = serde_json::from_value(json!({"engines": engines})).unwrap();
    let (pins, used) = (BTreeMap::new(), BTreeMap::new());
    let input = Input {
        spec: &spec,
        replicas: 10,
        clusters: &clusters,
        pins: &pins,
        used_elsewhere: &used,
        now: jiff::Timestamp::now(),
        spread_key: "bench/deployment",
    };
    let samples = (0..50)
        .map(|_| {
            let start = Instant::now();
            let outcomes = schedule(&input).unwrap();
            let elapsed = start.elapsed();
            assert_eq!(outcomes.len(), 10);
            elapsed
        })
        .collect();
    report(
        "scheduler, 1000 clusters x 8 pools x 8 gang engines, 10 replicas",
        samples,
    );
}

fn run_function_on_a_hundred_clusters() {
    let xr = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
        "metadata": {"name": "qwen3-coder", "namespace": "ml-team", "uid": "0"},
        "spec": {"replicas": 10, "template": {"spec": {"engines": [gang_engine("qwen3-coder")]}}}});
    let clusters: Vec<Value> = (0..100)
        .map(|i| cluster(i, if i.is_multiple_of(2) { "Standard" } else { "Dynamo" }))
        .collect();
    let req = RequestBuilder::new(&xr).required(CLUSTERS, &clusters).build();
    let bytes = req.encode_to_vec();
    let samples = whole_calls(&bytes);
    report(
        &format!(
            "RunFunction, 10-replica gang over 100 clusters x 8 pools, {} KB request",
            bytes.len() / 1024
        ),
        samples,
    );
}

/// A settled 10-replica gang over 100 clusters, their gateways answering when `routed`: the request Crossplane
/// sends once everything composed is observed Ready. Returns its bytes and the resources it composes.
fn settled_fleet(routed: bool) -> (Vec<u8>, usize) {
    let xr = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
        "metadata": {"name": "qwen3-coder", "namespace": "ml-team", "uid": "0"},
        "spec": {"replicas": 10, "template": {"spec": {"engines": [gang_engine("qwen3-coder")]}}}});
    let clusters: Vec<Value> = (0..100)
        .map(|i| {
            let mut c = cluster(i, if i.is_multiple_of(2) { "Standard" } else { "Dynamo" });
            if routed {
                c["status"]["gateway"] = json!({"address": format!("10.{}.0.1", i % 250),
                                                "serverName": tls::SERVER_NAME,
                                                "caCertificate": TEST_CA});
            }
            c
        })
        .collect();
    let mut builder = RequestBuilder::new(&xr).required(CLUSTERS, &clusters);
    // Three rounds: placed, Ready (endpoints composed), endpoints observed Ready.
    for _ in 0..3 {
        let rsp = run_function(builder.build());
        builder = RequestBuilder::new(&xr);
        for (key, composed) in &rsp.desired.unwrap().resources {
            let mut object = composed.resource.as_ref().unwrap().to_json().unwrap();
            object["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
            builder = builder.observed(key, &object);
        }
        builder = builder.answered_from(&clusters);
    }
    let req = builder.build();
    let composed = run_function(req.clone()).desired.unwrap().resources.len();
    (req.encode_to_vec(), composed)
}

fn routing_on_a_hundred_clusters() {
    for routed in [false, true] {
        let (bytes, composed) = settled_fleet(routed);
        let samples = whole_calls(&bytes);
        report(
            &format!(
                "RunFunction, settled 10-replica gang over 100 clusters, {}: {} KB request, {composed} composed \
                 ({:.1} per replica)",
                if routed { "routed" } else { "no gateways" },
                bytes.len() / 1024,
                composed as f64 / 10.0
            ),
            samples,
        );
    }
}

/// 50 whole calls on `bytes`: decode, compose, encode.
fn whole_calls(bytes: &[u8]) -> Vec<Duration> {
    (0..50)
        .map(|_| {
            let start = Instant::now();
            let rsp = run_function(RunFunctionRequest::decode(bytes).unwrap());
            let out = rsp.encode_to_vec();
            let elapsed = start.elapsed();
            assert!(rsp.results.is_empty(), "{:?}", rsp.results);
            assert!(out.len() > 1000);
            elapsed
        })
        .collect()
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// p50 of `runs` runs of `f` on `bytes`.
fn time(bytes: &[u8], runs: usize, f: impl Fn(RunFunctionRequest) -> Vec<u8>) -> Duration {
    p50((0..runs)
        .map(|_| {
            let start = Instant::now();
            let req = RunFunctionRequest::decode(bytes).unwrap();
            let out = f(req);
            let elapsed = start.elapsed();
            assert!(!out.is_empty());
            elapsed
        })
        .collect())
}

fn one_replica_gang() {
    let xr = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
        "metadata": {"name": "qwen3-coder", "namespace": "ml-team", "uid": "0"},
        "spec": {"replicas": 1, "template": {"spec": {"engines": [gang_engine("qwen3-coder")]}}}});
    let first = RequestBuilder::new(&xr);
    let answered = first
        .clone()
        .required(CLUSTERS, &[cluster(0, "Standard")])
        .build();
    let first = first.build();
    const RUNS: usize = 2000;
    // The server remembers composites it accepted (Crossplane sends the same one on every call of a reconcile);
    // this is what checking one costs the first time.
    let type_meta: TypeMeta = serde_json::from_value(xr.clone()).unwrap();
    let check = p50((0..RUNS / 4)
        .map(|_| {
            let start = Instant::now();
            validate::composite(&type_meta, &xr).unwrap();
            start.elapsed()
        })
        .collect());
    println!("XRD check of the gang composite, first time (schema and CEL rules): p50 {check:?}");
    for (what, req) in [("first call", first), ("composed", answered)] {
        let bytes = req.encode_to_vec();
        let echo = time(&bytes, RUNS, |req| {
            RunFunctionResponse {
                desired: req.desired,
                context: req.context,
                ..Default::default()
            }
            .encode_to_vec()
        });
        let ours = time(&bytes, RUNS, |req| {
            run_function_here(req, Deadline::default()).encode_to_vec()
        });
        let decode = time(&bytes, RUNS, |_| vec![0]);
        let decoded = RunFunctionRequest::decode(bytes.as_slice()).unwrap();
        let compose = p50((0..RUNS)
            .map(|_| {
                let req = decoded.clone();
                let start = Instant::now();
                let rsp = run_function_here(req, Deadline::default());
                let elapsed = start.elapsed();
                assert!(rsp.results.is_empty(), "{:?}", rsp.results);
                elapsed
            })
            .collect());
        let rsp = run_function_here(decoded, Deadline::default());
        let encode = p50((0..RUNS)
            .map(|_| {
                let start = Instant::now();
                let out = rsp.encode_to_vec();
                let elapsed = start.elapsed();
                assert!(!out.is_empty());
                elapsed
            })
            .collect());
        println!(
            "RunFunction, 1-replica gang, {what} ({} B in, {} B out): ours p50 {ours:?}, echo p50 {echo:?} ({:.2}x); \
             decode {decode:?}, run_function {compose:?}, encode {encode:?}",
            bytes.len(),
            rsp.encode_to_vec().len(),
            ours.as_secs_f64() / echo.as_secs_f64(),
        );
    }
}

/// The part of composing one gang that does not grow with the fleet: compiling its CEL selectors and setting
/// up the CEL context they run in, once per request.
fn cel_setup_per_request() {
    let spec: ReplicaSpec = serde_json::from_value(json!({"engines": [gang_engine("qwen3-coder")]})).unwrap();
    let samples = (0..2000)
        .map(|_| {
            let start = Instant::now();
            let matcher = devices::Matcher::new(devices::compile(&spec).unwrap());
            let elapsed = start.elapsed();
            drop(matcher);
            elapsed
        })
        .collect();
    println!(
        "CEL per request, one gang (4 selectors compiled, context built): p50 {:?}",
        p50(samples)
    );
}

// The allocator the server runs on, so in-process figures are the server's (`modelplane_function::memory`).
#[global_allocator]
static ALLOCATOR: modelplane_function::memory::Mimalloc = modelplane_function::memory::Mimalloc;

fn main() {
    // `cargo bench` passes `--bench`; anything else names scenarios.
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let scenarios: [(&str, fn()); 5] = [
        ("scheduler", scheduler_on_a_thousand_clusters),
        ("fleet", run_function_on_a_hundred_clusters),
        ("routing", routing_on_a_hundred_clusters),
        ("gang", || on_a_call_thread(one_replica_gang)),
        ("cel", cel_setup_per_request),
    ];
    for (name, run) in scenarios {
        if wanted.is_empty() || wanted.iter().any(|w| name.contains(w.as_str())) {
            run();
        }
    }
}

/// Runs `f` on a thread like the server's compose pool threads.
fn on_a_call_thread(f: fn()) {
    std::thread::Builder::new()
        .stack_size(CALL_STACK_BYTES)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}
