use serde_json::{Value, json};

use super::{CopyOwner, CopyState, Object, copy_owner, reference, retire_dropped, secret_copy};
use crate::{
    compose::{
        Output,
        fixtures::{OWNER_UID, request, resource, sanitized_owned_secret},
    },
    wire::tree::Tree,
};

fn refs() -> Vec<Value> {
    vec![reference("modelplane-system", "callers", "data").to_json()]
}

/// The Object as it is composed, read as JSON.
fn composed(object: Object) -> Value {
    Value::Object(object.build().to_json_map())
}

fn owner() -> CopyOwner {
    CopyOwner {
        name: "gw-secret-owner".into(),
        uid: OWNER_UID.into(),
    }
}

/// The Object as provider-kubernetes leaves it after creating the remote Secret, owned by [`owner`]: it dates
/// only `Synced` with the generation it reconciled.
fn created(data: Value) -> Value {
    let mut remote = sanitized_owned_secret("gw-secret-owner");
    remote["data"] = data;
    json!({
        "metadata": {"finalizers": ["finalizer.managedresource.crossplane.io"], "generation": 1},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"},
                           {"type": "Synced", "status": "True", "observedGeneration": 1}],
            "atProvider": {"manifest": remote},
        },
    })
}

fn copy_owned_by(owner: Option<&CopyOwner>, observed: Option<&Value>) -> (Value, CopyState) {
    let observed = observed.map(resource);
    let (object, state) = secret_copy(
        "callers",
        "modelplane-system",
        "Opaque",
        "use1",
        refs().into_iter().map(Tree::from).collect(),
        owner,
        observed.as_ref(),
    );
    (composed(object), state)
}

fn copy(observed: Option<&Value>) -> (Value, CopyState) {
    copy_owned_by(Some(&owner()), observed)
}

/// The owner's Object as provider-kubernetes reports the remote ConfigMap, with any UID.
fn observed_owner(name: &str, uid: Value) -> Value {
    json!({"status": {"atProvider": {"manifest": {"apiVersion": "v1", "kind": "ConfigMap",
                                                  "metadata": {"name": name, "uid": uid}}}}})
}

#[test]
fn the_owner_is_a_configmap_deleted_with_its_composite_and_known_by_its_observed_uid() {
    let (object, known) = copy_owner("gw-secret-owner", "modelplane-system", "use1", None);
    let object = composed(object);
    assert_eq!(known, None, "no UID before the ConfigMap is observed");
    assert_eq!(object["spec"]["forProvider"]["manifest"]["kind"], "ConfigMap");
    assert!(
        object["spec"].get("managementPolicies").is_none(),
        "every policy, Delete included: deleting the composite deletes the ConfigMap"
    );
    let seen = resource(&observed_owner("gw-secret-owner", json!(OWNER_UID)));
    let (_, known) = copy_owner("gw-secret-owner", "modelplane-system", "use1", Some(&seen));
    assert_eq!(known, Some(owner()));
}

#[test]
fn an_owner_observed_under_another_name_or_with_a_strange_uid_is_not_trusted() {
    let long = "a".repeat(65);
    for (name, uid) in [
        ("other", json!(OWNER_UID)),
        ("gw-secret-owner", json!("")),
        ("gw-secret-owner", json!(long)),
        ("gw-secret-owner", json!("uid\"}, {\"x")),
        ("gw-secret-owner", json!(7)),
    ] {
        let seen = resource(&observed_owner(name, uid.clone()));
        let (_, known) = copy_owner("gw-secret-owner", "modelplane-system", "use1", Some(&seen));
        assert_eq!(known, None, "{name} {uid}");
    }
}

#[test]
fn a_copy_names_its_owner_and_gets_no_key_until_the_remote_secret_carries_it() {
    let (object, state) = copy_owned_by(None, None);
    assert_eq!(state, CopyState::Creating);
    assert!(
        object["spec"]["forProvider"]["manifest"]["metadata"]
            .get("ownerReferences")
            .is_none()
    );

    let mut observed = created(json!({"redacted": null}));
    let (object, state) = copy_owned_by(None, Some(&observed));
    assert_eq!(state, CopyState::AwaitingOwner, "no owner known");
    assert!(object["spec"].get("references").is_none());
    assert!(state.waiting().unwrap().contains("owner ConfigMap"));

    observed["status"]["atProvider"]["manifest"]["metadata"] = json!({});
    let (object, state) = copy(Some(&observed));
    assert_eq!(state, CopyState::AwaitingOwner, "the owner is not applied yet");
    assert!(object["spec"].get("references").is_none());
    assert_eq!(
        object["spec"]["forProvider"]["manifest"]["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "gw-secret-owner", "uid": OWNER_UID}])
    );
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
fn a_copy_is_filled_once_synced_for_the_generation_that_carries_the_references() {
    let mut observed = created(json!({"redacted": null}));
    observed["spec"]["references"] = json!(refs());
    observed["metadata"]["generation"] = json!(2);
    assert_eq!(
        copy(Some(&observed)).1,
        CopyState::Filling,
        "Synced is from generation 1; Ready, undated, says nothing about the references"
    );
    observed["status"]["conditions"][1]["observedGeneration"] = json!(2);
    let (object, state) = copy(Some(&observed));
    assert_eq!(state, CopyState::Filled);
    assert_eq!(state.waiting(), None);
    assert_eq!(object["spec"]["references"], json!(refs()));
}

#[test]
fn a_copy_whose_references_the_provider_refuses_says_why_in_its_words() {
    let mut observed = created(json!({"redacted": null}));
    observed["spec"]["references"] = json!(refs());
    observed["metadata"]["generation"] = json!(2);
    let refused = json!({"type": "Synced", "status": "False", "reason": "ReconcileError", "observedGeneration": 2,
                         "message": "cannot resolve references: secrets \"callers\" not found"});
    // Ready stays True (the remote Secret exists): only Synced says the references failed.
    observed["status"]["conditions"][1] = refused;
    let (object, state) = copy(Some(&observed));
    assert_eq!(
        state.waiting().as_deref(),
        Some("provider-kubernetes cannot copy it: cannot resolve references: secrets \"callers\" not found")
    );
    assert_eq!(
        object["spec"]["references"],
        json!(refs()),
        "still asked for: it fills once the Secret exists"
    );

    // A failure of the generation before the references says nothing about them.
    observed["status"]["conditions"][1]["observedGeneration"] = json!(1);
    assert_eq!(copy(Some(&observed)).1, CopyState::Filling);
    // A provider quoting a whole response body is cut to a status's length.
    observed["status"]["conditions"][1]["observedGeneration"] = json!(2);
    observed["status"]["conditions"][1]["message"] = json!("x".repeat(10_000));
    let CopyState::Refused(message) = copy(Some(&observed)).1 else {
        panic!("refused")
    };
    assert_eq!(message.len(), 512);
}

#[test]
fn references_name_a_field_inside_the_manifest() {
    let r = reference("ml-team", "together-api-key", "data.apiKey").to_json();
    assert_eq!(r["patchesFrom"]["fieldPath"], "data.apiKey");
    assert_eq!(r["toFieldPath"], "data.apiKey");
    assert_eq!(r["patchesFrom"]["namespace"], "ml-team");
}

/// A copy in its fill step as Crossplane observes it (kind, namespace and all).
fn filling(name: &str) -> Value {
    json!({
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
        "metadata": {"name": format!("gw-{name}"), "namespace": "modelplane-system",
                     "finalizers": ["finalizer.managedresource.crossplane.io"]},
        "spec": {
            "forProvider": {"manifest": {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                                         "metadata": {"name": name, "namespace": "modelplane-system"}}},
            "providerConfigRef": {"kind": "ClusterProviderConfig", "name": "use1"},
            "references": refs(),
            "managementPolicies": ["Observe", "Update"],
        },
    })
}

fn retire(observed: &[(&str, Value)], desired: &[&str]) -> Output {
    let mut req = request(
        json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway",
                                 "metadata": {"name": "gw"}}),
    );
    let resources = &mut req.observed.get_or_insert_with(Default::default).resources;
    for (key, object) in observed {
        resources.insert((*key).to_owned(), resource(object));
    }
    let mut out = Output::default();
    for key in desired {
        out.compose(*key, crate::wire::tree::fields!({"kind": "Object"}), true);
    }
    retire_dropped(&mut out, &req, &["use1"]);
    out
}

#[test]
fn a_dropped_copy_is_retired_with_every_policy_and_no_reference_so_its_deletion_reaches_the_cluster() {
    let mut retired_already = filling("old");
    retired_already["spec"]["managementPolicies"] = json!(["*"]);
    retired_already["spec"]
        .as_object_mut()
        .unwrap()
        .remove("references");
    let mut other = filling("tls");
    other["spec"]["forProvider"]["manifest"]["kind"] = json!("ConfigMap");
    let mut gone = filling("on-a-cluster-gone");
    gone["spec"]["providerConfigRef"]["name"] = json!("deleted-cluster");
    let out = retire(
        &[
            ("kept", filling("kept")),
            ("dropped", filling("dropped")),
            ("retired", retired_already),
            ("configmap", other),
            ("gone", gone),
        ],
        &["kept"],
    );
    assert_eq!(
        out.resources.keys().collect::<Vec<_>>(),
        ["dropped", "kept"],
        "a copy already retired, one on a cluster not reached now, and anything that is not a copy in its fill \
         step, is left out"
    );
    let retired = &out.resources["dropped"];
    assert!(retired.ready);
    assert_eq!(
        Value::Object(retired.object.to_map()),
        json!({
            "apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
            "metadata": {"namespace": "modelplane-system"},
            "spec": {
                "forProvider": {"manifest": {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                                             "metadata": {"name": "dropped", "namespace": "modelplane-system"}}},
                "providerConfigRef": {"kind": "ClusterProviderConfig", "name": "use1"},
                "managementPolicies": ["*"],
            },
        })
    );
    assert_eq!(
        out.resources["kept"].object["kind"], "Object",
        "a wanted copy is the composer's own"
    );
}
