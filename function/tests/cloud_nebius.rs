//! Nebius end to end, through the library as `render` runs it: upstream Modelplane's Nebius manifests (vendored
//! under `fixtures/upstream-clouds/`) render as they are, with the ClusterProviderConfig upstream's getting
//! started applies; its getting-started platform reaches Ready under `--until-ready` on both serving stacks;
//! and bad input is refused by field name with nothing composed.

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use common::{read_documents, yaml_files};
use modelplane_function::{
    proto::v1::RunFunctionResponse,
    render::{self, Inputs, Outcome, Simulation},
    run_function,
};
use serde_json::{Value, json};

fn manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream-clouds/docs/manifests")
}

fn documents_below(dir: &Path) -> Vec<Value> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(documents_below(&path));
        }
    }
    found.extend(yaml_files(dir).iter().flat_map(|p| read_documents(p)));
    found
}

/// The ClusterProviderConfig named default upstream's getting started applies.
fn provider_config() -> Value {
    read_documents(&manifests().join("getting-started/clusterproviderconfig-nebius.yaml")).remove(0)
}

/// Every Nebius class upstream's documentation writes, and the provider config.
fn required() -> Vec<Value> {
    documents_below(&manifests())
        .into_iter()
        .filter(|d| d["kind"] == "InferenceClass" && d["spec"]["provisioning"]["provider"] == "Nebius")
        .chain([provider_config()])
        .collect()
}

fn nebius_clusters() -> Vec<Value> {
    documents_below(&manifests())
        .into_iter()
        .filter(|d| d["kind"] == "InferenceCluster" && d["spec"]["cluster"]["source"] == "Nebius")
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

fn render(composite: &Value, required: Vec<Value>) -> RunFunctionResponse {
    let inputs = Inputs {
        composite: composite.clone(),
        required,
        ..Default::default()
    };
    runtime()
        .block_on(render::run(&inputs, |req| async move { Ok(run_function(req)) }))
        .unwrap()
}

fn until_ready(composite: &Value, required: Vec<Value>) -> Simulation {
    let inputs = Inputs {
        composite: composite.clone(),
        required,
        ..Default::default()
    };
    runtime()
        .block_on(render::run_until_ready(&inputs, |req| async move {
            Ok(run_function(req))
        }))
        .unwrap()
}

fn composed_keys(rsp: &RunFunctionResponse) -> Vec<String> {
    rsp.desired
        .iter()
        .flat_map(|d| d.resources.keys().cloned())
        .collect()
}

fn composed(documents: &[Value], key: &str) -> Value {
    documents
        .iter()
        .find(|d| d["metadata"]["annotations"]["crossplane.io/composition-resource-name"] == key)
        .cloned()
        .unwrap_or_else(|| panic!("{key} not composed"))
}

/// The getting-started platform's cluster and its class (one file), on `stack`.
fn platform(stack: &str) -> (Value, Vec<Value>) {
    let docs = read_documents(&manifests().join("getting-started/nebius/platform.yaml"));
    let mut cluster = docs
        .iter()
        .find(|d| d["kind"] == "InferenceCluster")
        .unwrap()
        .clone();
    cluster["spec"]["stack"] = json!(stack);
    let class = docs
        .iter()
        .find(|d| d["kind"] == "InferenceClass")
        .unwrap()
        .clone();
    (cluster, vec![class, provider_config()])
}

#[test]
fn every_upstream_nebius_cluster_renders_and_reaches_ready() {
    let clusters = nebius_clusters();
    assert_eq!(clusters.len(), 7, "upstream's docs at the vendored commit");
    for cluster in clusters {
        let name = cluster["metadata"]["name"].as_str().unwrap();
        let rsp = render(&cluster, required());
        assert!(
            common::fatal(&rsp).is_empty(),
            "{name}: {:?}",
            common::fatal(&rsp)
        );
        assert!(
            composed_keys(&rsp).contains(&"activation-policy".to_owned()),
            "{name}: {:?}",
            composed_keys(&rsp)
        );
        let simulation = until_ready(&cluster, required());
        assert_eq!(
            simulation.outcome,
            Outcome::Ready,
            "{name}: {:?}",
            simulation.waiting()
        );
    }
}

#[test]
fn the_getting_started_platform_reaches_ready_on_the_standard_stack() {
    let (cluster, required) = platform("Standard");
    let simulation = until_ready(&cluster, required);
    assert_eq!(simulation.outcome, Outcome::Ready, "{:?}", simulation.waiting());
    let docs = &simulation.documents;
    assert_eq!(docs[0]["status"]["cacheStorageClass"], "modelplane-rwx-fs");
    assert_eq!(docs[0]["status"]["pools"][0]["name"], "gpu-l40s");
    let pool = composed(docs, "nebius-nodegroup-gpu-l40s");
    let for_provider = &pool["spec"]["forProvider"];
    assert_eq!(for_provider["template"]["resources"]["platform"], "gpu-l40s-a");
    // Upstream's pool sets minNodeCount = maxNodeCount = 1: no range, so mk8s keeps one node.
    assert_eq!(for_provider["fixedNodeCount"], 1);
    assert!(
        for_provider["parentId"]
            .as_str()
            .unwrap()
            .starts_with("mk8scluster-sim")
    );
    let config = composed(docs, "providerconfig-kubernetes");
    assert_eq!(
        config["spec"]["identity"],
        json!({"type": "NebiusServiceAccountCredentials", "source": "Secret",
               "secretRef": {"name": "nebius-credentials", "namespace": "crossplane-system",
                             "key": "credentials.json"}})
    );
    composed(docs, "release-lws");
}

#[test]
fn the_getting_started_platform_reaches_ready_on_the_dynamo_stack() {
    let (cluster, required) = platform("Dynamo");
    let simulation = until_ready(&cluster, required);
    assert_eq!(simulation.outcome, Outcome::Ready, "{:?}", simulation.waiting());
    let docs = &simulation.documents;
    composed(docs, "release-grove");
    composed(docs, "release-kai-scheduler");
    let model_express: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            d["kind"] == "Object"
                && d["spec"]["forProvider"]["manifest"]["kind"] == "Deployment"
                && d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.contains("modelexpress"))
        })
        .collect();
    assert_eq!(model_express.len(), 1, "one ModelExpress server");
    assert!(
        !docs
            .iter()
            .any(|d| d["kind"] == "Release" && d["metadata"]["name"] == "nebius-eu-north-lws")
    );
}

/// A refusal: one FATAL naming `field`, and nothing composed.
fn assert_refused(cluster: &Value, required: Vec<Value>, field: &str) {
    let rsp = render(cluster, required);
    let fatal = common::fatal(&rsp);
    assert!(
        fatal.len() == 1 && fatal[0].contains(&format!(": {field}: ")),
        "{field}: {fatal:?}"
    );
    assert!(composed_keys(&rsp).is_empty(), "{:?}", composed_keys(&rsp));
}

#[test]
fn bad_input_is_refused_by_field_name_with_nothing_composed() {
    let (mut cluster, required) = platform("Standard");
    cluster["spec"]["nodePools"][0]["zones"] = json!(["eu-north1-a"]);
    assert_refused(&cluster, required.clone(), "spec.nodePools[0].zones");

    let (mut cluster, _) = platform("Standard");
    cluster["spec"]["nodePools"][0]["fabric"] =
        json!({"type": "InfiniBand", "infiniband": {"fabric": "fabric-2"}});
    assert_refused(&cluster, required.clone(), "spec.nodePools[0].fabric.type");

    let (cluster, mut required) = platform("Standard");
    required[0]["spec"]["provisioning"]["nebius"]["preset"] = json!("2gpu-16vcpu-64gb");
    assert_refused(&cluster, required, "spec.nodePools[0].className");

    let (cluster, mut required) = platform("Standard");
    required[1]["spec"]["credentials"] = json!({"source": "Environment"});
    assert_refused(&cluster, required, "spec.cluster.nebius.credentials");
}
