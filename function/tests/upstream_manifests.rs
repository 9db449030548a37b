//! Upstream Modelplane's own documentation manifests for EKS and existing clusters, their classes and their
//! model caches (vendored verbatim under `fixtures/upstream/`, see its SOURCES.md) are accepted as they are:
//! each validates against our XRD and renders without a FATAL result. Those for GKE, AKS, Nebius and Vultr
//! (`fixtures/upstream-clouds/`) validate against our XRDs too, and each cloud's clusters compose (see
//! `cloud_gke.rs`, `cloud_aks.rs`, `cloud_nebius.rs` and `cloud_vultr.rs`).

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod stages;

use std::path::{Path, PathBuf};

use common::{problems, read_documents, yaml_files, yaml_files_below};
use modelplane_function::{
    compose::inference_cluster::class_requirement,
    proto::v1::{RunFunctionResponse, Severity},
    render::{Inputs, Outcome, RequestBuilder, Simulation, run_until_ready},
    run_function,
};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn upstream_documents() -> Vec<(String, Value)> {
    yaml_files(&fixtures().join("upstream"))
        .into_iter()
        .flat_map(|path| {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            read_documents(&path)
                .into_iter()
                .map(move |doc| (file.clone(), doc))
        })
        .collect()
}

/// Every class a vendored cluster may name: upstream's own and our stand-ins for the ones its docs lack.
fn classes() -> Vec<Value> {
    let ours = yaml_files(&fixtures().join("upstream-classes"));
    let theirs = upstream_documents()
        .into_iter()
        .map(|(_, doc)| doc)
        .filter(|doc| doc["kind"] == "InferenceClass");
    ours.iter()
        .flat_map(|p| read_documents(p))
        .chain(theirs)
        .collect()
}

fn render(composite: &Value) -> RunFunctionResponse {
    common::render(composite, classes())
}

#[test]
fn the_vendored_set_covers_every_kind_and_both_cluster_sources() {
    let docs = upstream_documents();
    let sources: Vec<&str> = docs
        .iter()
        .filter_map(|(_, d)| d["spec"]["cluster"]["source"].as_str())
        .collect();
    assert!(
        sources.contains(&"EKS") && sources.contains(&"Existing"),
        "{sources:?}"
    );
    for kind in ["InferenceCluster", "InferenceClass", "ModelCache"] {
        assert!(docs.iter().any(|(_, d)| d["kind"] == kind), "no upstream {kind}");
    }
}

#[test]
fn every_upstream_manifest_validates_against_our_xrd() {
    for (file, doc) in upstream_documents() {
        let kind = doc["kind"].as_str().unwrap();
        let found = problems(&common::kind_schema(kind), &doc, None);
        assert!(found.is_empty(), "{file} ({kind}): {found:#?}");
    }
}

#[test]
fn every_upstream_manifest_renders_without_a_fatal_result() {
    for (file, doc) in upstream_documents() {
        let rsp = render(&doc);
        let fatal: Vec<&str> = rsp
            .results
            .iter()
            .filter(|r| r.severity == Severity::Fatal as i32)
            .map(|r| r.message.as_str())
            .collect();
        assert!(fatal.is_empty(), "{file}: {fatal:?}");
        if doc["kind"] == "InferenceCluster" {
            let composed = rsp.desired.as_ref().map_or(0, |d| d.resources.len());
            assert!(composed > 0, "{file}: an InferenceCluster composes something");
        }
    }
}

#[test]
fn an_upstream_eks_cluster_with_only_a_region_gets_a_public_endpoint() {
    let (_, cluster) = upstream_documents()
        .into_iter()
        .find(|(file, _)| file == "inference-cluster-eks.yaml")
        .unwrap();
    let class = read_documents(&fixtures().join("upstream-classes/eks-l4-1x-g6.yaml")).remove(0);
    let req = RequestBuilder::new(&cluster)
        .required(&class_requirement("eks-l4-1x-g6"), &[class])
        .build();
    let rsp = stages::every_stage(&req).pop().unwrap();
    let eks = rsp
        .desired
        .unwrap()
        .resources
        .into_values()
        .map(|r| r.resource.unwrap().to_json().unwrap())
        .find(|o| o["apiVersion"] == modelplane_eks_api::API_VERSION && o["kind"] == "Cluster")
        .unwrap();
    let params = &eks["spec"]["forProvider"];
    assert_eq!(params["endpointPublicAccess"], true, "{params:#}");
    assert_eq!(params["region"], "us-west-2");
}

/// Upstream's manifests of our kinds for the four clouds beyond EKS, by path under `docs/manifests/`.
fn other_cloud_documents() -> Vec<(String, Value)> {
    let root = fixtures().join("upstream-clouds");
    yaml_files_below(&root)
        .into_iter()
        .flat_map(|path| {
            let file = path.strip_prefix(&root).unwrap().display().to_string();
            read_documents(&path)
                .into_iter()
                .filter(|doc| doc["apiVersion"] == "modelplane.ai/v1alpha1")
                .map(move |doc| (file.clone(), doc))
        })
        .collect()
}

#[test]
fn upstreams_manifests_for_the_other_four_clouds_validate_against_our_xrds() {
    let docs = other_cloud_documents();
    let count = |kind: &str| docs.iter().filter(|(_, d)| d["kind"] == kind).count();
    // Upstream's documentation at the vendored commit: 22 clusters, 20 classes, 6 getting-started deployments.
    assert_eq!(
        (
            count("InferenceCluster"),
            count("InferenceClass"),
            count("ModelDeployment")
        ),
        (22, 20, 6)
    );
    for (file, doc) in &docs {
        let kind = doc["kind"].as_str().unwrap();
        let found = problems(&common::kind_schema(kind), doc, None);
        assert!(found.is_empty(), "{file} ({kind}): {found:#?}");
    }
}

#[test]
fn upstreams_classes_for_the_other_four_clouds_render() {
    for (file, doc) in other_cloud_documents() {
        if doc["kind"] != "InferenceClass" {
            continue;
        }
        let fatal = common::fatal(&render(&doc));
        assert!(fatal.is_empty(), "{file}: {fatal:?}");
    }
}

/// Every class of upstream's docs for a cloud (`spec.cluster.source`) and the ClusterProviderConfigs upstream's
/// getting started applies: what a cluster of those docs may require. Upstream's docs reuse class names across
/// clouds (`l40s-1x` on Nebius and on Vultr), so each cloud gets its own.
fn other_cloud_platform(source: &str) -> Vec<Value> {
    let configs = yaml_files(&fixtures().join("upstream-clouds/docs/manifests/getting-started"))
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("clusterproviderconfig-")
        })
        .flat_map(|p| read_documents(&p));
    other_cloud_documents()
        .into_iter()
        .map(|(_, doc)| doc)
        .filter(|doc| doc["kind"] == "InferenceClass" && doc["spec"]["provisioning"]["provider"] == source)
        .chain(configs)
        .collect()
}

fn until_ready(composite: &Value, required: Vec<Value>) -> Simulation {
    let inputs = Inputs {
        composite: composite.clone(),
        required,
        ..Default::default()
    };
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(run_until_ready(
            &inputs,
            |req| async move { Ok(run_function(req)) },
        ))
        .unwrap()
}

#[test]
fn every_upstream_cluster_of_the_other_four_clouds_reaches_ready_but_the_one_naming_an_undefined_class() {
    let clusters: Vec<(String, Value)> = other_cloud_documents()
        .into_iter()
        .filter(|(_, doc)| doc["kind"] == "InferenceCluster")
        .collect();
    assert_eq!(clusters.len(), 22);
    let mut unready = Vec::new();
    for (file, cluster) in clusters {
        let source = cluster["spec"]["cluster"]["source"].as_str().unwrap();
        let simulation = until_ready(&cluster, other_cloud_platform(source));
        if simulation.outcome != Outcome::Ready {
            unready.push((file, simulation.outcome, simulation.waiting().join("; ")));
        }
    }
    // Upstream's reference page names a class its docs never define; that one cluster is refused by the field.
    match unready.as_slice() {
        [(file, Outcome::Fatal, why)] => {
            assert_eq!(file, "docs/manifests/reference/inferenceclusters.yaml");
            assert!(
                why.contains(
                    "west-gke: spec.nodePools[0].className: InferenceClass \"h100-8x-byo\" not found"
                ),
                "{why}"
            );
        }
        other => panic!("{other:#?}"),
    }
}

/// Upstream's getting started for a cloud: its platform and the fleet it scales to, then the deployments it
/// applies on them. Each deployment is placed on a cluster of that fleet (the one its clusterSelector names where
/// it has one) and reaches Ready against the fleet simulated alongside.
#[test]
fn upstreams_getting_started_fleets_place_their_model_deployments() {
    let root = fixtures().join("upstream-clouds/docs/manifests/getting-started");
    let mut placed = 0;
    for cloud in ["gke", "aks", "nebius", "vultr"] {
        let files = yaml_files(&root.join(cloud));
        let (deployments, platform): (Vec<&PathBuf>, Vec<&PathBuf>) = files.iter().partition(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("model-deployment")
        });
        let fleet: Vec<Value> = platform.iter().flat_map(|p| read_documents(p)).collect();
        let clusters: Vec<&Value> = fleet.iter().filter(|d| d["kind"] == "InferenceCluster").collect();
        let configs = other_cloud_platform("").into_iter();
        let required: Vec<Value> = fleet.iter().cloned().chain(configs).collect();
        for file in deployments {
            for deployment in read_documents(file) {
                let simulation = until_ready(&deployment, required.clone());
                let name = file.display();
                assert_eq!(
                    simulation.outcome,
                    Outcome::Ready,
                    "{name}: {:?}",
                    simulation.waiting()
                );
                let replicas = simulation.documents[0]["status"]["replicas"]
                    .as_array()
                    .unwrap()
                    .clone();
                assert!(!replicas.is_empty(), "{name}: no replica placed");
                let wanted = deployment.pointer("/spec/template/spec/clusterSelector/matchLabels");
                for replica in replicas {
                    let cluster = clusters
                        .iter()
                        .find(|c| c["metadata"]["name"] == replica["cluster"])
                        .unwrap_or_else(|| panic!("{name}: placed off the fleet: {replica}"));
                    if let Some(Value::Object(labels)) = wanted {
                        for (key, value) in labels {
                            assert_eq!(&cluster["metadata"]["labels"][key], value, "{name}: {replica}");
                        }
                    }
                    placed += 1;
                }
            }
        }
    }
    // Upstream's six getting-started deployments (Vultr's getting started has none), one replica each at least.
    assert!(placed >= 6, "{placed} replicas placed");
}
