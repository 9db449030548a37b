//! Shared helpers for tests that check objects against OpenAPI v3 schemas the way an API server would:
//! structure (types, required, enums, patterns) with a JSON Schema validator, undeclared fields with a walk
//! (CRD schemas never forbid them; the API server prunes or, with strict field validation, rejects them), and
//! CEL rules with kube-cel.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use modelplane_function::proto::v1::{RunFunctionResponse, Severity};
use serde::Deserialize;
use serde_json::Value;

/// What `render` answers for `composite` with `required` as the objects its requirements may select.
pub fn render(composite: &Value, required: Vec<Value>) -> RunFunctionResponse {
    let inputs = modelplane_function::render::Inputs {
        composite: composite.clone(),
        required,
        ..Default::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime
        .block_on(modelplane_function::render::run(&inputs, |req| async move {
            Ok(modelplane_function::run_function(req))
        }))
        .unwrap()
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `InferenceCluster.status.gateway` of a cluster whose gateway answers at `address`, has published its CA (a test
/// CA, `tests/fixtures/tls/cluster-gateway-ca.pem`) and requires the fleet's client certificate: what replicas
/// there need to be published.
pub fn reachable_gateway(address: &str) -> Value {
    let ca = std::fs::read_to_string(repo_root().join("tests/fixtures/tls/cluster-gateway-ca.pem")).unwrap();
    serde_json::json!({"address": address, "serverName": "cluster-gateway.modelplane.internal", "caCertificate": ca,
                       "admits": "FleetGateways"})
}

/// Every YAML document in `path`.
pub fn read_documents(path: &Path) -> Vec<Value> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde_yaml::from_value::<Value>(serde_yaml::Value::deserialize(doc).unwrap()).unwrap())
        .filter(|doc| !doc.is_null())
        .collect()
}

/// Every YAML file under `dir`, sorted by path.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}

/// Every `.yaml` below `dir`, depth first, in name order.
pub fn yaml_files_below(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    entries
        .into_iter()
        .flat_map(|path| match path.is_dir() {
            true => yaml_files_below(&path),
            false if path.extension().is_some_and(|ext| ext == "yaml") => vec![path],
            false => Vec::new(),
        })
        .collect()
}

/// Every problem an API server would find with `object` under `schema`, CEL rules included. `old` makes it an
/// update, so transition rules (`oldSelf`) run.
pub fn problems(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
    let defaulted = kube_cel::apply_defaults(schema, object);
    let mut found = structural_problems(schema, &defaulted);
    if let Err(errors) = kube_cel::validate(schema, object, old) {
        found.extend(errors.iter().map(|e| format!("{}: {}", e.field_path, e.message)));
    }
    found
}

/// Problems a JSON Schema validator and the undeclared-field walk find (no CEL).
pub fn structural_problems(schema: &Value, object: &Value) -> Vec<String> {
    let validator =
        jsonschema::draft7::new(schema).unwrap_or_else(|e| panic!("schema does not compile: {e}"));
    let mut found: Vec<String> = validator
        .iter_errors(object)
        .map(|e| format!("{}: {e}", e.instance_path().as_str()))
        .collect();
    undeclared(schema, object, "", &mut found);
    found
}

/// Properties the schema does not declare, unless a node preserves unknown fields or is a map
/// (`additionalProperties`).
pub fn undeclared(schema: &Value, value: &Value, path: &str, found: &mut Vec<String>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, child) in map {
                // The API server owns metadata and apiVersion/kind on every object.
                if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let at = format!("{path}.{key}");
                match (properties.and_then(|p| p.get(key)), additional) {
                    (Some(child_schema), _) | (None, Some(child_schema)) => {
                        undeclared(child_schema, child, &at, found)
                    }
                    (None, None) if properties.is_some() => found.push(format!("{at}: field not declared")),
                    (None, None) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    undeclared(item_schema, item, &format!("{path}[{i}]"), found);
                }
            }
        }
        _ => {}
    }
}

/// The `openAPIV3Schema` of the first version of a CRD or XRD.
pub fn version_schema(definition: &Value) -> Value {
    definition["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// The XRD of `package/configuration/xrds/<file>`, whole.
pub fn xrd(file: &str) -> Value {
    read_documents(&repo_root().join("package/configuration/xrds").join(file)).remove(0)
}

/// The served version's schema of `package/configuration/xrds/<file>`.
pub fn xrd_schema(file: &str) -> Value {
    version_schema(&xrd(file))
}

/// The served version's schema of the XRD that defines `kind`.
pub fn kind_schema(kind: &str) -> Value {
    xrd_schema(&xrd_file(kind))
}

/// The file of the XRD that defines `kind`: its plural, lower-cased.
pub fn xrd_file(kind: &str) -> String {
    let singular = kind.to_lowercase();
    let suffix = if singular.ends_with('s') { "es" } else { "s" };
    format!("{singular}{suffix}.yaml")
}

/// The messages of every FATAL result of a response, in order.
pub fn fatal(rsp: &RunFunctionResponse) -> Vec<String> {
    rsp.results
        .iter()
        .filter(|r| r.severity == Severity::Fatal as i32)
        .map(|r| r.message.clone())
        .collect()
}
