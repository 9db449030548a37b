//! Crossplane 1.x style composites (`package/configuration-legacy`): the same function serves them.
//!
//! A legacy composite keeps Crossplane's fields directly under `spec` (`claimRef`, `compositionRef`,
//! `resourceRefs`, ...), is cluster-scoped, carries its claim's namespace as a label, and a namespaced kind's
//! composite is named `X<Kind>`.

use modelplane_function::{
    api::ObjectMeta,
    compose::served_kind,
    proto::v1::{Resource, Resources, RunFunctionRequest, Severity, State},
    run_function,
    wire::RawStruct,
};
use serde_json::{Value, json};

fn request(composite: Value) -> RunFunctionRequest {
    RunFunctionRequest {
        observed: Some(State {
            composite: Some(Resource {
                resource: RawStruct::from_value(&composite),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An InferenceClass as Crossplane 1.x sends it: legacy fields beside the XRD's own.
fn legacy_class(kind: &str) -> Value {
    json!({
        "apiVersion": "modelplane.ai/v1alpha1", "kind": kind,
        "metadata": {"name": "eks-l4-1x-7xkq2", "uid": "5d1c",
                     "labels": {"crossplane.io/claim-name": "eks-l4-1x", "crossplane.io/claim-namespace": "platform",
                                "crossplane.io/composite": "eks-l4-1x-7xkq2"}},
        "spec": {
            "claimRef": {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass",
                         "name": "eks-l4-1x", "namespace": "platform"},
            "compositionRef": {"name": "inferenceclasses.modelplane.ai"},
            "compositionRevisionRef": {"name": "inferenceclasses.modelplane.ai-1a2b3c"},
            "compositionUpdatePolicy": "Automatic",
            "resourceRefs": [],
            "writeConnectionSecretToRef": {"name": "eks-l4-1x", "namespace": "crossplane-system"},
            "devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 1,
                         "attributes": {"productName": {"string": "NVIDIA L4"}},
                         "capacity": {"memory": {"value": "23034Mi"}}}]
        }
    })
}

fn fatal_messages(kind: &str) -> Vec<String> {
    run_function(request(legacy_class(kind)))
        .results
        .into_iter()
        .filter(|r| r.severity == Severity::Fatal as i32)
        .map(|r| r.message)
        .collect()
}

#[test]
fn a_claim_backed_inference_class_composes_like_a_v2_one() {
    let rsp = run_function(request(legacy_class("InferenceClass")));
    assert!(
        rsp.results.iter().all(|r| r.severity != Severity::Fatal as i32),
        "{:?}",
        rsp.results
    );
    let desired = rsp
        .desired
        .and_then(|d| d.composite)
        .and_then(|c| c.resource)
        .unwrap();
    let desired = desired.to_json().unwrap();
    assert_eq!(
        desired["status"]["devices"],
        json!([{"name": "gpu", "count": 1, "claim": "DRA"}])
    );
}

#[test]
fn an_x_prefixed_legacy_composite_reaches_the_same_composer() {
    assert_eq!(fatal_messages("XInferenceClass"), Vec::<String>::new());
    assert_eq!(served_kind("XInferenceClass"), "InferenceClass");
}

#[test]
fn unknown_x_kinds_are_still_rejected_by_name() {
    let messages = fatal_messages("XUnknown");
    assert_eq!(messages.len(), 1);
    assert!(messages[0].contains("\"XUnknown\""), "{messages:?}");
    assert_eq!(served_kind("XUnknown"), "XUnknown");
}

#[test]
fn the_effective_namespace_is_the_claims_for_a_legacy_composite() {
    let legacy: ObjectMeta =
        serde_json::from_value(legacy_class("XModelDeployment")["metadata"].clone()).unwrap();
    assert_eq!(legacy.effective_namespace(), Some("platform"));
    let modern: ObjectMeta = serde_json::from_value(json!({"name": "m", "namespace": "ml-team"})).unwrap();
    assert_eq!(modern.effective_namespace(), Some("ml-team"));
    let cluster: ObjectMeta = serde_json::from_value(json!({"name": "c"})).unwrap();
    assert_eq!(cluster.effective_namespace(), None);
}

#[test]
fn the_effective_name_is_the_claims_for_a_legacy_composite() {
    let legacy: ObjectMeta = serde_json::from_value(legacy_class("XModelCache")["metadata"].clone()).unwrap();
    assert_eq!(legacy.effective_name(), "eks-l4-1x");
    // A namespaced (v2) composite is never claim-backed, whatever its labels say.
    let modern: ObjectMeta = serde_json::from_value(
        json!({"name": "m", "namespace": "ml-team", "labels": {"crossplane.io/claim-name": "other"}}),
    )
    .unwrap();
    assert_eq!(modern.effective_name(), "m");
}

fn legacy_cache() -> Value {
    json!({
        "apiVersion": "modelplane.ai/v1alpha1", "kind": "XModelCache",
        "metadata": {"name": "qwen3-coder-x8f2k",
                     "labels": {"crossplane.io/claim-name": "qwen3-coder", "crossplane.io/claim-namespace": "ml-team"}},
        "spec": {"claimRef": {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelCache",
                              "name": "qwen3-coder", "namespace": "ml-team"},
                 "compositionRef": {"name": "modelcaches.modelplane.ai"},
                 "huggingFace": {"repo": "Qwen/Qwen3-Coder-480B-A35B-Instruct", "sizeGiB": 1024},
                 "clusterSelector": {"matchLabels": {"region": "us-east"}}}
    })
}

#[test]
fn a_claim_backed_model_cache_looks_for_deployments_in_the_claims_namespace() {
    let rsp = run_function(request(legacy_cache()));
    assert!(
        rsp.results.iter().all(|r| r.severity != Severity::Fatal as i32),
        "{:?}",
        rsp.results
    );
    let requirements = rsp.requirements.unwrap().resources;
    let deployments = requirements
        .values()
        .find(|s| s.kind == "ModelDeployment")
        .unwrap();
    assert_eq!(deployments.namespace.as_deref(), Some("ml-team"));
}

#[test]
fn a_claim_backed_model_cache_composes_into_the_claims_namespace_under_the_claims_name() {
    let mut req = request(legacy_cache());
    let cluster = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
                         "metadata": {"name": "eks-a", "labels": {"region": "us-east"}},
                         "status": {"providerConfigName": "eks-a", "cacheStorageClass": "efs"}});
    for (name, objects) in [("clusters", vec![cluster]), ("deployments", vec![])] {
        let items = objects
            .iter()
            .map(|o| Resource {
                resource: RawStruct::from_value(o),
                ..Default::default()
            })
            .collect();
        req.required_resources
            .insert(name.to_owned(), Resources { items });
    }
    let rsp = run_function(req);
    assert!(
        rsp.results.iter().all(|r| r.severity != Severity::Fatal as i32),
        "{:?}",
        rsp.results
    );
    let composed: Vec<Value> = rsp
        .desired
        .unwrap()
        .resources
        .into_values()
        .map(|r| r.resource.unwrap().to_json().unwrap())
        .collect();
    assert!(!composed.is_empty());
    for object in &composed {
        // The provider-kubernetes Object lives on the control plane next to the claim.
        assert_eq!(object["metadata"]["namespace"], "ml-team", "{object}");
    }
    let volume = composed
        .iter()
        .map(|o| &o["spec"]["forProvider"]["manifest"])
        .find(|m| m["kind"] == "PersistentVolumeClaim")
        .unwrap();
    assert_eq!(volume["metadata"]["name"], "modelcache-qwen3-coder");
    assert_eq!(volume["metadata"]["namespace"], "ml-team");
}

#[test]
fn a_claim_backed_model_deployment_reads_its_cache_from_the_claims_namespace() {
    let seed: Value =
        serde_yaml::from_str(include_str!("../../examples/deployments/qwen3-coder.yaml")).unwrap();
    let mut composite = seed.clone();
    composite["kind"] = json!("XModelDeployment");
    composite["metadata"] = json!({"name": "qwen3-coder-p4v9z",
        "labels": {"crossplane.io/claim-name": "qwen3-coder", "crossplane.io/claim-namespace": "ml-team"}});
    composite["spec"]["claimRef"] = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
                                           "name": "qwen3-coder", "namespace": "ml-team"});
    let rsp = run_function(request(composite));
    assert!(
        rsp.results.iter().all(|r| r.severity != Severity::Fatal as i32),
        "{:?}",
        rsp.results
    );
    let requirements = rsp.requirements.unwrap().resources;
    let cache = requirements.values().find(|s| s.kind == "ModelCache").unwrap();
    assert_eq!(cache.namespace.as_deref(), Some("ml-team"));
}
