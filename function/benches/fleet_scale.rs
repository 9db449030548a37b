//! Fleet-scale benchmark (not a test) for the placement ledger, docs/scheduling.md:
//! `cargo bench -p modelplane-function --bench fleet_scale`.
//!
//! One ModelDeployment reconcile in a 100-cluster fleet with 0, 1,000 and 10,000 other deployments (one
//! one-node replica each, spread evenly, so their cluster's ledger lists a hundredth of them). Prints the
//! request's bytes and RunFunction's p50 (decode, compose, encode) for a settled deployment (it requires its
//! own cluster by name) and for a waiting one (it requires the candidate set: every cluster), beside the bytes
//! the old way's request carried (every cluster and every other deployment's status), and how many composites
//! one replica change concerns either way.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use modelplane_function::{
    compose::model_deployment::{CLUSTERS, cluster_requirement},
    proto::v1::{Resource, Resources, RunFunctionRequest, State},
    run_function,
    wire::RawStruct,
};
use prost::Message;
use serde_json::{Value, json};

const CLUSTER_COUNT: usize = 100;
const POOL_NODES: u64 = 200;

fn resource(value: &Value) -> Resource {
    Resource {
        resource: Some(RawStruct::from_value(value).unwrap()),
        ..Default::default()
    }
}

/// A Ready cluster with one pool whose ledger admitted `holders` one-node replicas of other deployments.
fn cluster(i: usize, holders: usize) -> Value {
    let holders: Vec<Value> = (0..holders)
        .map(|h| json!({"deployment": format!("team-{}/model-{h:05}", h % 50), "replica": 0, "nodes": 1}))
        .collect();
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
        "metadata": {"name": format!("cluster-{i:03}"), "labels": {"region": "us-east-1"}},
        "spec": {"stack": "Standard", "cluster": {"source": "EKS", "eks": {"region": "us-east-1"}},
                 "nodePools": [{"name": "gpu", "className": "h200", "nodeCount": POOL_NODES}]},
        "status": {"stack": "Standard", "providerConfigName": format!("cluster-{i:03}"), "cacheStorageClass": "efs",
                   "pools": [{"name": "gpu", "className": "h200", "nodeCount": POOL_NODES, "devices": [
                       {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 8,
                        "attributes": {"productName": {"string": "NVIDIA H200"}},
                        "capacity": {"memory": {"value": "141Gi"}}}],
                       "allocatedNodes": holders.len(), "holders": holders}],
                   "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]}})
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": "ml-team"},
        "spec": {"replicas": 1, "template": {"spec": {"engines": [{"name": "engine", "copies": 1, "members": [
            {"role": "Standalone", "nodeSelector": {"devices": [{"name": "gpu", "count": 1}]},
             "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.23.0",
                                                   "args": ["--model=Qwen/Qwen3-0.6B"]}]}}}]}]}}}})
}

/// What the old way's request carried per other deployment: its status with one placed replica.
fn other_status(i: usize) -> Value {
    let mut other = deployment(&format!("model-{i:05}"));
    other["metadata"]["namespace"] = json!(format!("team-{}", i % 50));
    other["status"] = json!({"placedReplicas": 1, "readyReplicas": 1, "replicas": [
        {"replica": 0, "cluster": format!("cluster-{:03}", i % CLUSTER_COUNT), "stack": "Standard", "ready": true,
         "engines": [{"name": "engine", "pool": "gpu", "nodes": 1}]}]});
    other
}

fn request(
    xr: &Value,
    required: Vec<(String, Vec<Value>)>,
    observed: &[(String, Value)],
) -> RunFunctionRequest {
    RunFunctionRequest {
        observed: Some(State {
            composite: Some(resource(xr)),
            resources: observed.iter().map(|(k, v)| (k.clone(), resource(v))).collect(),
        }),
        desired: Some(State::default()),
        required_resources: required
            .into_iter()
            .map(|(name, items)| {
                let items = items.iter().map(resource).collect();
                (name, Resources { items })
            })
            .collect(),
        ..Default::default()
    }
}

fn p50(bytes: &[u8], runs: usize) -> Duration {
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let rsp = run_function(RunFunctionRequest::decode(bytes).unwrap());
            std::hint::black_box(rsp.encode_to_vec());
            start.elapsed()
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let me = deployment("bench");
    // The settled deployment's own Objects: what it composes on cluster-000, observed.
    let fleet0: Vec<Value> = (0..CLUSTER_COUNT).map(|i| cluster(i, 0)).collect();
    let first = run_function(request(&me, vec![(CLUSTERS.into(), fleet0)], &[]));
    let observed: Vec<(String, Value)> = first
        .desired
        .unwrap()
        .resources
        .into_iter()
        .map(|(k, r)| (k, r.resource.unwrap().to_json().unwrap()))
        .collect();
    assert!(
        observed
            .iter()
            .any(|(k, _)| k.starts_with("replica-0-cluster-000")),
        "placed on cluster-000"
    );

    println!(
        "| other deployments | settled: request, p50 | waiting: request, p50 | old way: request | composites one replica change concerns, before / after |"
    );
    println!("|---:|---|---|---:|---|");
    let mut settled_zero = Duration::ZERO;
    for others in [0usize, 1_000, 10_000] {
        let per_cluster = others / CLUSTER_COUNT;
        let own = cluster(0, per_cluster);
        let settled = request(
            &me,
            vec![(cluster_requirement("cluster-000"), vec![own])],
            &observed,
        )
        .encode_to_vec();
        let fleet: Vec<Value> = (0..CLUSTER_COUNT).map(|i| cluster(i, per_cluster)).collect();
        let waiting = request(
            &deployment("newcomer"),
            vec![(CLUSTERS.into(), fleet.clone())],
            &[],
        )
        .encode_to_vec();
        let old_way = request(
            &me,
            vec![
                (CLUSTERS.into(), fleet),
                (
                    "model-deployments".into(),
                    (0..others).map(other_status).collect(),
                ),
            ],
            &observed,
        )
        .encoded_len();
        if others == 0 {
            // Warm caches and the allocator before the row everything is compared with.
            p50(&settled, 200);
        }
        let (settled_p50, waiting_p50) = (p50(&settled, 400), p50(&waiting, 40));
        if others == 0 {
            settled_zero = settled_p50;
        }
        println!(
            "| {others} | {:.1} KB, {:.3} ms ({:.2}x of 0) | {:.1} KB, {:.2} ms | {:.1} KB | {} / {} |",
            settled.len() as f64 / 1e3,
            settled_p50.as_secs_f64() * 1e3,
            settled_p50.as_secs_f64() / settled_zero.as_secs_f64(),
            waiting.len() as f64 / 1e3,
            waiting_p50.as_secs_f64() * 1e3,
            old_way as f64 / 1e3,
            // Before: every deployment required every deployment. After: the replica's cluster, then the
            // deployments that run there (they require it by name); waiting ones come on top.
            others + 1,
            1 + per_cluster + 1,
        );
    }
}
