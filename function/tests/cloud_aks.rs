//! AKS end to end through the library: upstream Modelplane's AKS manifests (vendored under
//! `fixtures/upstream-clouds/`) render and reach Ready under `render --until-ready` on both stacks, every
//! provider-upjet-azure object of every stage is accepted by the vendored CRD that serves it (CEL rules
//! included), and bad input is refused by field name with nothing composed.

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod stages;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use common::{problems, read_documents, repo_root, yaml_files};
use modelplane_function::{
    compose::inference_cluster::class_requirement,
    render::{Inputs, Outcome, RequestBuilder, Simulation, run_until_ready},
    run_function,
};
use serde_json::{Value, json};

fn upstream(path: &str) -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream-clouds/docs/manifests");
    read_documents(&root.join(path))
}

/// Every upstream AKS manifest file of our kinds.
const UPSTREAM_AKS: &[&str] = &[
    "concepts/inference-class-aks-h100.yaml",
    "concepts/inference-cluster-aks.yaml",
    "examples/qwen2.5-72b/inference-class-aks.yaml",
    "examples/qwen2.5-72b/inference-cluster-aks.yaml",
    "getting-started/aks/platform.yaml",
    "getting-started/aks/platform-scale.yaml",
];

fn upstream_aks(kind: &str) -> Vec<Value> {
    UPSTREAM_AKS
        .iter()
        .flat_map(|p| upstream(p))
        .filter(|d| d["kind"] == kind)
        .collect()
}

/// Runs `composite` until it settles, its requirements answered from `required` and upstream's provider-upjet-azure
/// ClusterProviderConfig.
fn simulate(composite: &Value, mut required: Vec<Value>) -> Simulation {
    required.extend(upstream("getting-started/clusterproviderconfig-azure.yaml"));
    let inputs = Inputs {
        composite: composite.clone(),
        required,
        ..Default::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime
        .block_on(run_until_ready(
            &inputs,
            |req| async move { Ok(run_function(req)) },
        ))
        .unwrap()
}

fn keys(simulation: &Simulation) -> Vec<String> {
    simulation.documents[1..]
        .iter()
        .filter_map(|d| d["metadata"]["annotations"]["crossplane.io/composition-resource-name"].as_str())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_upstream_aks_cluster_reaches_ready_with_its_pools_and_azure_files() {
    let clusters = upstream_aks("InferenceCluster");
    // Upstream's docs at the vendored commit: concepts, the qwen2.5-72b example, and three getting-started ones.
    assert_eq!(clusters.len(), 5);
    for cluster in clusters {
        let name = cluster["metadata"]["name"].as_str().unwrap().to_owned();
        let simulation = simulate(&cluster, upstream_aks("InferenceClass"));
        assert_eq!(
            simulation.outcome,
            Outcome::Ready,
            "{name}: {:?}",
            simulation.waiting()
        );
        let status = &simulation.documents[0]["status"];
        assert_eq!(status["cacheStorageClass"], "modelplane-rwx-fs", "{name}");
        let pool = cluster["spec"]["nodePools"][0]["name"].as_str().unwrap();
        assert_eq!(status["pools"][0]["name"], pool, "{name}");
        let keys = keys(&simulation);
        assert!(keys.contains(&format!("aks-nodepool-{pool}")), "{name}: {keys:?}");
    }
}

/// Upstream's getting-started platform (one A10 class, one cluster in westeurope) on `stack`.
fn getting_started(stack: &str) -> Simulation {
    let docs = upstream("getting-started/aks/platform.yaml");
    let classes: Vec<Value> = docs
        .iter()
        .filter(|d| d["kind"] == "InferenceClass")
        .cloned()
        .collect();
    let mut cluster = docs
        .into_iter()
        .find(|d| d["kind"] == "InferenceCluster")
        .unwrap();
    cluster["spec"]["stack"] = json!(stack);
    simulate(&cluster, classes)
}

#[test]
fn the_upstream_getting_started_platform_reaches_ready_on_the_standard_stack() {
    let simulation = getting_started("Standard");
    assert_eq!(simulation.outcome, Outcome::Ready, "{:?}", simulation.waiting());
    let keys = keys(&simulation);
    assert!(keys.iter().any(|k| k == "release-lws"), "{keys:?}");
    assert!(!keys.iter().any(|k| k == "release-grove"), "{keys:?}");
    assert!(keys.iter().any(|k| k == "aks-nodepool-gpua10"), "{keys:?}");
}

#[test]
fn the_upstream_getting_started_platform_reaches_ready_on_dynamo_with_grove_kai_and_one_modelexpress() {
    let simulation = getting_started("Dynamo");
    assert_eq!(simulation.outcome, Outcome::Ready, "{:?}", simulation.waiting());
    let keys = keys(&simulation);
    for key in [
        "release-grove",
        "release-kai-scheduler",
        "aks-nodepool-gpua10",
        "aks-cluster",
    ] {
        assert!(keys.iter().any(|k| k == key), "{key} missing from {keys:?}");
    }
    let model_express: Vec<&Value> = simulation.documents[1..]
        .iter()
        .map(|d| &d["spec"]["forProvider"]["manifest"])
        .filter(|m| {
            m["kind"] == "Deployment"
                && m["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.contains("modelexpress"))
        })
        .collect();
    assert_eq!(model_express.len(), 1, "{model_express:#?}");
    let status = &simulation.documents[0]["status"];
    assert!(status["modelExpressAddress"].is_string(), "{status:#}");
    assert_eq!(status["stack"], "Dynamo");
}

/// The CRD schema serving each (apiVersion, kind) of provider-upjet-azure, from the vendored CRDs.
fn azure_schemas() -> BTreeMap<(String, String), Value> {
    let dir: PathBuf = repo_root().join("tests/crds/provider-upjet-azure");
    let mut found = BTreeMap::new();
    for crd in yaml_files(&dir).iter().flat_map(|f| read_documents(f)) {
        let group = crd["spec"]["group"].as_str().unwrap().to_owned();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_owned();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let api_version = format!("{group}/{}", version["name"].as_str().unwrap());
            found.insert(
                (api_version, kind.clone()),
                version["schema"]["openAPIV3Schema"].clone(),
            );
        }
    }
    found
}

#[test]
fn every_azure_object_of_every_stage_is_accepted_by_the_vendored_crd_that_serves_it() {
    let schemas = azure_schemas();
    assert_eq!(schemas.len(), 7, "one CRD per composed kind");
    let classes: Vec<Value> = yaml_files(&repo_root().join("examples/classes"))
        .iter()
        .flat_map(|f| read_documents(f))
        .chain(upstream_aks("InferenceClass"))
        .collect();
    let clusters: Vec<Value> = yaml_files(&repo_root().join("examples/clusters"))
        .iter()
        .flat_map(|f| read_documents(f))
        .filter(|c| c["spec"]["cluster"]["source"] == "AKS")
        .chain(upstream_aks("InferenceCluster"))
        .collect();
    assert!(clusters.len() >= 7, "both examples and upstream's five");
    let mut checked = BTreeMap::<String, usize>::new();
    for xr in &clusters {
        let mut req = RequestBuilder::new(xr);
        for class in &classes {
            let name = class["metadata"]["name"].as_str().unwrap();
            req = req.required(&class_requirement(name), std::slice::from_ref(class));
        }
        for rsp in stages::every_stage(&req.build()) {
            assert!(common::fatal(&rsp).is_empty(), "{:?}", rsp.results);
            for (key, resource) in rsp.desired.unwrap().resources {
                let object = resource.resource.unwrap().to_json().unwrap();
                let api_version = object["apiVersion"].as_str().unwrap().to_owned();
                if !api_version.contains(".azure.m.upbound.io/")
                    && !api_version.starts_with("azure.m.upbound.io/")
                {
                    continue;
                }
                let kind = object["kind"].as_str().unwrap().to_owned();
                let schema = schemas
                    .get(&(api_version.clone(), kind.clone()))
                    .unwrap_or_else(|| panic!("{key}: no vendored CRD serves {api_version} {kind}"));
                let found = problems(schema, &object, None);
                assert!(found.is_empty(), "{} {key}: {found:#?}", xr["metadata"]["name"]);
                *checked.entry(kind).or_default() += 1;
            }
        }
    }
    assert_eq!(checked.len(), 7, "every composed kind was checked: {checked:?}");
}

#[test]
fn bad_input_is_refused_by_field_name_with_nothing_composed() {
    let class = upstream("getting-started/aks/platform.yaml")
        .into_iter()
        .find(|d| d["kind"] == "InferenceClass")
        .unwrap();
    let cluster = || {
        upstream("getting-started/aks/platform.yaml")
            .into_iter()
            .find(|d| d["kind"] == "InferenceCluster")
            .unwrap()
    };
    let mut long_name = cluster();
    long_name["spec"]["nodePools"][0]["name"] = json!("gpu-a10-pool");
    let mut zone = cluster();
    zone["spec"]["nodePools"][0]["zones"] = json!(["westeurope-1"]);
    let mut infiniband = cluster();
    infiniband["spec"]["nodePools"][0]["fabric"] = json!({"type": "InfiniBand"});
    let mut not_a_gpu = class.clone();
    not_a_gpu["spec"]["provisioning"]["aks"]["vmSize"] = json!("Standard_D8s_v5");
    let cases = [
        (long_name, class.clone(), "spec.nodePools[0].name"),
        (zone, class.clone(), "spec.nodePools[0].zones[0]"),
        (infiniband, class.clone(), "spec.nodePools[0].fabric.type"),
        (cluster(), not_a_gpu, "spec.nodePools[0].className"),
    ];
    for (xr, class, field) in cases {
        let name = class["metadata"]["name"].as_str().unwrap().to_owned();
        let req = RequestBuilder::new(&xr)
            .required(&class_requirement(&name), &[class])
            .build();
        let rsp = run_function(req);
        let fatal = common::fatal(&rsp);
        assert!(
            fatal.len() == 1 && fatal[0].contains(&format!(": {field}: ")),
            "{field}: {fatal:?}"
        );
        let composed: Vec<&String> = rsp.desired.iter().flat_map(|d| d.resources.keys()).collect();
        assert!(composed.is_empty(), "{field}: {composed:?}");
    }
}
