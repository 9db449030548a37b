//! Benchmark (not a test) for fleet routing: `cargo bench -p modelplane-function --bench model_service`. Prints
//! p50/p90 of a whole RunFunction, wire bytes in and out, for a ModelService over 1000 ready ModelEndpoints in
//! two priority tiers, served by one InferenceGateway.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use modelplane_function::{
    proto::v1::{RunFunctionRequest, Severity},
    render::RequestBuilder,
    run_function,
};
use prost::Message;
use serde_json::{Value, json};

fn endpoint(i: usize) -> Value {
    let deployment = if i.is_multiple_of(10) {
        "qwen3-coder-canary"
    } else {
        "qwen3-coder"
    };
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelEndpoint",
        "metadata": {"name": format!("qwen3-coder-{i:04}"), "namespace": "ml-team",
                     "labels": {"modelplane.ai/deployment": deployment, "modelplane.ai/cluster": format!("c-{}", i / 10)}},
        "spec": {"url": format!("http://c-{}.gw.example.com/ml-team/qwen3-coder-{i:04}/v1", i / 10)},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
}

// The allocator the server runs on, so in-process figures are the server's (`modelplane_function::memory`).
#[global_allocator]
static ALLOCATOR: modelplane_function::memory::Mimalloc = modelplane_function::memory::Mimalloc;

fn main() {
    let xr = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelService",
        "metadata": {"name": "qwen3-coder", "namespace": "ml-team"},
        "spec": {"endpoints": [
            {"name": "stable", "weight": 95, "selector": {"matchLabels": {"modelplane.ai/deployment": "qwen3-coder"}}},
            {"name": "canary", "weight": 5, "selector": {"matchLabels": {"modelplane.ai/deployment": "qwen3-coder-canary"}}},
            {"name": "provider", "priority": 1, "selector": {"matchLabels": {"modelplane.ai/external-provider": "together"}}}]}});
    let gateway = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway", "metadata": {"name": "fleet"},
        "spec": {"clusterName": "c-0"}, "status": {"clusterName": "c-0", "address": "203.0.113.9"}});
    let cluster = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "c-0"},
        "status": {"providerConfigName": "c-0", "stack": "Standard"}});
    let endpoints: Vec<Value> = (0..1000).map(endpoint).collect();
    let req = RequestBuilder::new(&xr)
        .required("endpoints", &endpoints)
        .required("gateways", &[gateway])
        .required("clusters", &[cluster])
        .build();
    let bytes = req.encode_to_vec();
    let mut samples: Vec<Duration> = (0..50)
        .map(|_| {
            let start = Instant::now();
            let req = RunFunctionRequest::decode(bytes.as_slice()).unwrap();
            let rsp = run_function(req);
            let out = rsp.encode_to_vec();
            let elapsed = start.elapsed();
            assert!(
                !rsp.results.iter().any(|r| r.severity == Severity::Fatal as i32),
                "{:?}",
                rsp.results
            );
            assert!(out.len() > 1000);
            elapsed
        })
        .collect();
    samples.sort();
    println!(
        "RunFunction, ModelService over 1000 endpoints, {} KB request: p50 {:.2?} p90 {:.2?}",
        bytes.len() / 1024,
        samples[samples.len() / 2],
        samples[samples.len() * 9 / 10]
    );
}
