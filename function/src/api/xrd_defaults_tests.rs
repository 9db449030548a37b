//! The typed views' serde defaults are the XRDs' `default`s: a composer reads the composite as Crossplane sent
//! it, which the API server defaulted from the XRD, but `render` and the tests compose manifests nobody
//! defaulted, so both must land on the same spec. Every example of every kind is stripped of each field its XRD
//! defaults, then read once as it is (serde's defaults fill the gaps) and once after the XRD's defaults are
//! applied; the two views must be equal.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use serde::{Deserialize, de::DeserializeOwned};
use serde_json::Value;

use super::{
    Composite, inference_class::InferenceClassSpec, inference_cluster::InferenceClusterSpec,
    model_cache::ModelCacheSpec, model_deployment::ModelDeploymentSpec, routing,
};
use crate::wire::RawStruct;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every manifest of `kind` under the example and fixture folders.
fn manifests(kind: &str) -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    for folder in ["examples", "tests/fixtures"] {
        let mut stack = vec![repo().join(folder)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "yaml") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for doc in serde_yaml::Deserializer::from_str(&text) {
                        let Ok(value) = Value::deserialize(doc) else {
                            continue;
                        };
                        if value["kind"] == kind && value["apiVersion"] == crate::compose::API_VERSION {
                            out.push((path.clone(), value));
                        }
                    }
                }
            }
        }
    }
    out
}

/// The `openAPIV3Schema` of the XRD of `kind` the package ships.
fn schema(kind: &str) -> Value {
    let dir = repo().join("package/configuration/xrds");
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let xrd: Value = serde_yaml::from_str(&text).unwrap();
        if xrd["spec"]["names"]["kind"] == kind {
            return xrd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
        }
    }
    panic!("no XRD of kind {kind}");
}

/// Removes from `value` every field `schema` gives a default, counting them.
fn strip_defaulted(schema: &Value, value: &mut Value) -> usize {
    let mut stripped = 0;
    match value {
        Value::Object(fields) => {
            let properties = schema["properties"].as_object();
            let names: Vec<String> = fields.keys().cloned().collect();
            for name in names {
                let child = properties
                    .and_then(|p| p.get(&name))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                let Some(child) = child else { continue };
                if child.get("default").is_some() {
                    fields.remove(&name);
                    stripped += 1;
                } else if let Some(inner) = fields.get_mut(&name) {
                    stripped += strip_defaulted(child, inner);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                stripped += strip_defaulted(&schema["items"], item);
            }
        }
        _ => {}
    }
    stripped
}

/// The typed spec of `manifest` as a composer reads it, printed whole.
fn view<S: DeserializeOwned + std::fmt::Debug>(manifest: &Value) -> String {
    let raw = RawStruct::from_map(manifest.as_object().unwrap());
    let composite: Composite<S> = raw.parse().unwrap();
    format!("{:#?}", composite.spec)
}

fn held_to_its_xrd<S: DeserializeOwned + std::fmt::Debug>(kind: &str) -> usize {
    let schema = schema(kind);
    let examples = manifests(kind);
    assert!(!examples.is_empty(), "no example of {kind}");
    let mut stripped = 0;
    for (path, mut manifest) in examples {
        stripped += strip_defaulted(&schema, &mut manifest);
        let defaulted = kube_cel::apply_defaults(&schema, &manifest);
        assert_eq!(
            view::<S>(&manifest),
            view::<S>(&defaulted),
            "{kind} {}: a serde default differs from the XRD's",
            path.display()
        );
    }
    stripped
}

#[test]
fn every_kinds_serde_defaults_are_its_xrds() {
    let stripped = held_to_its_xrd::<InferenceClassSpec>("InferenceClass")
        + held_to_its_xrd::<InferenceClusterSpec>("InferenceCluster")
        + held_to_its_xrd::<routing::InferenceGatewaySpec>("InferenceGateway")
        + held_to_its_xrd::<ModelCacheSpec>("ModelCache")
        + held_to_its_xrd::<ModelDeploymentSpec>("ModelDeployment")
        + held_to_its_xrd::<routing::ModelEndpointSpec>("ModelEndpoint")
        + held_to_its_xrd::<routing::ModelServiceSpec>("ModelService");
    assert!(stripped > 0, "no defaulted field was exercised");
}
