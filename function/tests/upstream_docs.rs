//! Every manifest of upstream Modelplane's documentation, as a migrating user applies it: all of
//! `docs/manifests/` at one commit (v0.3.1), vendored verbatim under `fixtures/upstream-clouds/` (the four clouds
//! beyond EKS) and `fixtures/upstream-docs/` (everything else). Each object of a kind we serve validates against
//! our XRD and renders without a FATAL result; the count per kind is upstream's, so a file left out shows.

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use common::{problems, read_documents, yaml_files, yaml_files_below};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every `modelplane.ai` object of upstream's `docs/manifests/`, by its path there.
fn documents() -> Vec<(String, Value)> {
    ["upstream-clouds", "upstream-docs"]
        .iter()
        .flat_map(|dir| yaml_files_below(&fixtures().join(dir).join("docs/manifests")))
        .flat_map(|path| {
            let at = path.to_string_lossy();
            let file = at[at.find("docs/manifests/").unwrap()..].to_owned();
            read_documents(&path)
                .into_iter()
                .filter(|doc| doc["apiVersion"] == "modelplane.ai/v1alpha1")
                .map(move |doc| (file.clone(), doc))
        })
        .collect()
}

/// Upstream's own kinds that are not ours: ModelReplica is what its ModelDeployment composes per replica (its
/// reference page says not to create one); our ModelDeployment composes each replica's workload itself.
const NOT_SERVED: &[&str] = &["ModelReplica"];

#[test]
fn every_manifest_of_upstreams_documentation_is_vendored() {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (_, doc) in documents() {
        *counts
            .entry(doc["kind"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    // Counted in upstream's docs/manifests at the vendored commit.
    let upstream = [
        ("InferenceClass", 29),
        ("InferenceCluster", 31),
        ("InferenceGateway", 4),
        ("ModelCache", 7),
        ("ModelDeployment", 25),
        ("ModelEndpoint", 2),
        ("ModelReplica", 1),
        ("ModelService", 19),
    ];
    let upstream: BTreeMap<String, usize> = upstream.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect();
    assert_eq!(counts, upstream);
}

/// What a cluster of `source` may require: the classes upstream's docs define for that provider (its docs reuse
/// class names across clouds), our stand-ins for the two they name but never define, and the provider configs its
/// getting started applies.
fn platform(docs: &[(String, Value)], source: &str) -> Vec<Value> {
    let configs = yaml_files(&fixtures().join("upstream-clouds/docs/manifests/getting-started"))
        .into_iter()
        .flat_map(|p| read_documents(&p))
        .filter(|doc| doc["apiVersion"] != "modelplane.ai/v1alpha1");
    let stand_ins = yaml_files(&fixtures().join("upstream-classes"))
        .into_iter()
        .flat_map(|p| read_documents(&p));
    let provider = |doc: &Value| {
        doc["spec"]["provisioning"]["provider"]
            .as_str()
            .map(str::to_owned)
    };
    docs.iter()
        .map(|(_, doc)| doc)
        .filter(|doc| doc["kind"] == "InferenceClass" && provider(doc).is_none_or(|p| p == source))
        .cloned()
        .chain(stand_ins)
        .chain(configs)
        .collect()
}

#[test]
fn every_manifest_of_a_kind_we_serve_validates_and_renders() {
    let docs = documents();
    let mut refused = Vec::new();
    let mut rendered = 0;
    for (file, doc) in &docs {
        let kind = doc["kind"].as_str().unwrap();
        if NOT_SERVED.contains(&kind) {
            continue;
        }
        let found = problems(&common::kind_schema(kind), doc, None);
        assert!(found.is_empty(), "{file} ({kind}): {found:#?}");
        let source = doc["spec"]["cluster"]["source"].as_str().unwrap_or_default();
        let fatal = common::fatal(&common::render(doc, platform(&docs, source)));
        if fatal.is_empty() {
            rendered += 1;
        } else {
            refused.push(format!("{file} ({kind}): {fatal:?}"));
        }
    }
    // Upstream's reference page has a GKE cluster whose pool names `h100-8x-byo`, a class its concepts page
    // defines for existing clusters only (no provisioning.gke): refused by the field, as docs/api.md lists.
    match refused.as_slice() {
        [why] => assert!(
            why.starts_with("docs/manifests/reference/inferenceclusters.yaml (InferenceCluster)")
                && why.contains(
                    "spec.nodePools[0].className: InferenceClass \\\"h100-8x-byo\\\" has no provisioning.gke"
                ),
            "{why}"
        ),
        other => panic!("{other:#?}"),
    }
    assert_eq!(rendered, docs.len() - NOT_SERVED.len() - 1);
    assert_eq!(rendered, 116);
}

/// Upstream's InferenceGateways (`backend: Traefik` with MetalLB) say what serves them: Envoy Gateway, with
/// Traefik's chart version named as not installed.
#[test]
fn upstreams_inference_gateways_say_envoy_gateway_serves_them() {
    let gateways: Vec<(String, Value)> = documents()
        .into_iter()
        .filter(|(_, doc)| doc["kind"] == "InferenceGateway")
        .collect();
    assert_eq!(gateways.len(), 4);
    for (file, doc) in gateways {
        let rsp = common::render(&doc, Vec::new());
        let backend = rsp
            .conditions
            .iter()
            .find(|c| c.r#type == "Backend")
            .unwrap_or_else(|| panic!("{file}: no Backend condition"));
        let message = backend.message.as_deref().unwrap_or_default();
        assert_eq!(backend.reason, "ServedByEnvoyGateway", "{file}: {message}");
        assert!(
            message.contains("spec.traefik.version 40.2.0"),
            "{file}: {message}"
        );
    }
}
