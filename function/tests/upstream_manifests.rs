//! Upstream Modelplane's own documentation manifests for EKS and existing clusters, their classes and their
//! model caches (vendored verbatim under `fixtures/upstream/`, see its SOURCES.md) are accepted as they are:
//! each validates against our XRD and renders without a FATAL result. Those for GKE, AKS, Nebius and Vultr
//! (`fixtures/upstream-clouds/`) validate against our XRDs too; AKS clusters compose (see `cloud_aks.rs`), the
//! other clouds' are refused by name until their composers land.

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod stages;

use std::path::{Path, PathBuf};

use common::{problems, read_documents, yaml_files};
use modelplane_function::{
    compose::inference_cluster::class_requirement,
    proto::v1::{RunFunctionResponse, Severity},
    render::RequestBuilder,
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

fn xrd_schema(kind: &str) -> Value {
    let file = match kind {
        "InferenceCluster" => "inferenceclusters.yaml",
        "InferenceClass" => "inferenceclasses.yaml",
        "ModelCache" => "modelcaches.yaml",
        "ModelDeployment" => "modeldeployments.yaml",
        other => panic!("no XRD for {other}"),
    };
    common::xrd_schema(file)
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
        let found = problems(&xrd_schema(kind), &doc, None);
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

/// Every file under `dir`, depth first, in name order.
fn yaml_files_below(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    entries
        .into_iter()
        .flat_map(|path| {
            if path.is_dir() {
                yaml_files_below(&path)
            } else if path.extension().is_some_and(|ext| ext == "yaml") {
                vec![path]
            } else {
                Vec::new()
            }
        })
        .collect()
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
        let found = problems(&xrd_schema(kind), doc, None);
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
