use serde_json::{Value, json};

use super::{CopyState, reference, secret_copy};
use crate::compose::fixtures::resource;

fn refs() -> Vec<Value> {
    vec![reference("modelplane-system", "callers", "data")]
}

/// The Object as provider-kubernetes leaves it after creating the remote Secret.
fn created(data: Value) -> Value {
    json!({
        "metadata": {"finalizers": ["finalizer.managedresource.crossplane.io"], "generation": 1},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}],
            "atProvider": {"manifest": {"apiVersion": "v1", "kind": "Secret", "data": data}},
        },
    })
}

fn copy(observed: Option<&Value>) -> (Value, CopyState) {
    let observed = observed.map(resource);
    secret_copy(
        "callers",
        "modelplane-system",
        "Opaque",
        "use1",
        refs(),
        observed.as_ref(),
    )
}

#[test]
fn a_new_copy_is_created_empty_and_without_references() {
    let (object, state) = copy(None);
    assert_eq!(state, CopyState::Creating);
    assert!(object["spec"].get("references").is_none());
    assert!(object["spec"].get("managementPolicies").is_none());
    assert!(object["spec"]["forProvider"]["manifest"].get("data").is_none());
    assert_eq!(object["spec"]["forProvider"]["manifest"]["kind"], "Secret");
}

#[test]
fn references_wait_for_the_finalizer_so_the_provider_never_writes_a_resolved_spec() {
    let mut observed = created(json!({"redacted": null}));
    observed["metadata"]["finalizers"] = json!([]);
    let (object, state) = copy(Some(&observed));
    assert_eq!(state, CopyState::Creating);
    assert!(object["spec"].get("references").is_none());
}

#[test]
fn a_provider_that_does_not_sanitize_secrets_gets_no_reference() {
    // No data at all: an empty Secret observed as it is, which only an unsanitizing provider reports.
    for data in [Value::Null, json!({}), json!({"apiKey": "c2stdGVzdA=="})] {
        let (object, state) = copy(Some(&created(data.clone())));
        assert_eq!(state, CopyState::Unsanitized, "{data}");
        assert!(object["spec"].get("references").is_none(), "{data}");
        assert!(state.waiting().unwrap().contains("--sanitize-secrets"));
    }
}

#[test]
fn a_sanitized_copy_gets_its_references_and_loses_create() {
    let (object, state) = copy(Some(&created(json!({"redacted": null}))));
    assert_eq!(state, CopyState::Filling, "the references are not applied yet");
    assert_eq!(object["spec"]["references"], json!(refs()));
    assert_eq!(object["spec"]["managementPolicies"], json!(["Observe", "Update"]));
    assert!(object["spec"]["forProvider"]["manifest"].get("data").is_none());
}

#[test]
fn a_copy_is_filled_once_ready_for_the_generation_that_carries_the_references() {
    let mut observed = created(json!({"redacted": null}));
    observed["spec"]["references"] = json!(refs());
    observed["metadata"]["generation"] = json!(2);
    assert_eq!(
        copy(Some(&observed)).1,
        CopyState::Filling,
        "Ready is from generation 1"
    );
    observed["status"]["conditions"][0]["observedGeneration"] = json!(2);
    let (object, state) = copy(Some(&observed));
    assert_eq!(state, CopyState::Filled);
    assert_eq!(state.waiting(), None);
    assert_eq!(object["spec"]["references"], json!(refs()));
}

#[test]
fn references_name_a_field_inside_the_manifest() {
    let r = reference("ml-team", "together-api-key", "data.apiKey");
    assert_eq!(r["patchesFrom"]["fieldPath"], "data.apiKey");
    assert_eq!(r["toFieldPath"], "data.apiKey");
    assert_eq!(r["patchesFrom"]["namespace"], "ml-team");
}
