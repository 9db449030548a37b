//! In-process cost of reading a fleet request, without the network: prost's generic `Struct` tree (what a
//! function on function-sdk-rust pays before its code runs) against our `RawStruct` path (keep the bytes, then
//! decode only what the scheduler reads).

use std::{
    collections::BTreeMap,
    hint::black_box,
    time::{Duration, Instant},
};

use modelplane_function::{
    api::{
        Composite, ObjectMeta,
        inference_class::InferenceClassSpec,
        inference_cluster::{InferenceClusterStatus, Taint},
    },
    proto::v1::RunFunctionRequest,
    sdk::request::required_resources,
};
use modelplane_tests::fleet::{CLASSES_REQUIREMENT, CLUSTERS_REQUIREMENT};
use prost::Message;
use serde::Deserialize;

/// `RunFunctionRequest` with prost's own `google.protobuf.Struct`, as the Rust SDK generates it. Only the fields
/// that carry objects in these requests are declared; prost skips the rest, as it would skip unknown fields.
#[derive(Clone, PartialEq, Message)]
struct GenericRequest {
    #[prost(message, optional, tag = "2")]
    observed: Option<GenericState>,
    #[prost(message, optional, tag = "3")]
    desired: Option<GenericState>,
    #[prost(btree_map = "string, message", tag = "8")]
    required_resources: BTreeMap<String, GenericResources>,
}

#[derive(Clone, PartialEq, Message)]
struct GenericState {
    #[prost(message, optional, tag = "1")]
    composite: Option<GenericResource>,
    #[prost(btree_map = "string, message", tag = "2")]
    resources: BTreeMap<String, GenericResource>,
}

#[derive(Clone, PartialEq, Message)]
struct GenericResources {
    #[prost(message, repeated, tag = "1")]
    items: Vec<GenericResource>,
}

#[derive(Clone, PartialEq, Message)]
struct GenericResource {
    #[prost(message, optional, tag = "1")]
    resource: Option<prost_types::Struct>,
}

/// What placement reads of each InferenceCluster: identity and labels, taints, and the status contract.
#[derive(Deserialize)]
struct ClusterView {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: TaintsView,
    #[serde(default)]
    status: InferenceClusterStatus,
}

#[derive(Deserialize)]
struct TaintsView {
    #[serde(default)]
    taints: Vec<Taint>,
}

/// Decodes `bytes` the given way once; returns a count derived from the result so nothing is optimised away.
type Path = fn(&[u8]) -> usize;

fn generic_trees(bytes: &[u8]) -> usize {
    GenericRequest::decode(bytes).map_or(0, |req| req.required_resources.len())
}

fn raw_envelope(bytes: &[u8]) -> usize {
    RunFunctionRequest::decode(bytes).map_or(0, |req| req.required_resources.len())
}

fn raw_with_views(bytes: &[u8]) -> usize {
    let Ok(req) = RunFunctionRequest::decode(bytes) else {
        return 0;
    };
    let objects = |name| {
        required_resources(&req, name)
            .unwrap_or_default()
            .iter()
            .filter_map(|item| item.resource.as_ref())
    };
    let pools: usize = objects(CLUSTERS_REQUIREMENT)
        .filter_map(|raw| raw.parse::<ClusterView>().ok())
        .map(|cluster| cluster.status.pools.len() + cluster.spec.taints.len() + cluster.metadata.labels.len())
        .sum();
    let devices: usize = objects(CLASSES_REQUIREMENT)
        .filter_map(|raw| raw.parse::<Composite<InferenceClassSpec>>().ok())
        .map(|class| class.spec.devices.len())
        .sum();
    pools + devices
}

fn raw_to_json(bytes: &[u8]) -> usize {
    let Ok(req) = RunFunctionRequest::decode(bytes) else {
        return 0;
    };
    req.required_resources
        .values()
        .flat_map(|found| &found.items)
        .filter_map(|item| item.resource.as_ref()?.to_json().ok())
        .count()
}

const PATHS: [(&str, Path); 4] = [
    (
        "prost_types::Struct trees for every object (function-sdk-rust's decode)",
        generic_trees,
    ),
    ("RawStruct: request decoded, objects kept as bytes", raw_envelope),
    (
        "RawStruct + typed views the scheduler reads (clusters, classes)",
        raw_with_views,
    ),
    (
        "RawStruct + every object to a serde_json::Value tree",
        raw_to_json,
    ),
];

/// Median wall time of `path` over up to `iterations` runs (fewer if `budget` runs out).
fn median(path: Path, bytes: &[u8], iterations: usize, budget: Duration) -> Duration {
    let started = Instant::now();
    let mut times = Vec::with_capacity(iterations);
    while times.len() < iterations.max(1) && (times.is_empty() || started.elapsed() < budget) {
        let t = Instant::now();
        black_box(path(black_box(bytes)));
        times.push(t.elapsed());
    }
    times.sort_unstable();
    times[times.len() / 2]
}

pub fn print(label: &str, bytes: &[u8], iterations: usize) {
    println!(
        "\nIn-process decode of the {label} request ({} KB), median of up to {iterations} runs:",
        bytes.len() / 1024
    );
    for (what, path) in PATHS {
        black_box(path(bytes));
        let time = median(path, bytes, iterations, Duration::from_secs(5));
        println!("  {:>8.3} ms  {what}", time.as_secs_f64() * 1e3);
    }
}
