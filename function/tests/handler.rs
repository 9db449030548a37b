//! The RunFunction handler, called in-process: the contract Crossplane relies on, and what happens when a
//! composer misbehaves (composers injected through `run_with`).

// Helpers outside #[test] functions are test code too: a failed expectation there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;

use modelplane_function::{
    compose::{ComposeError, ComposeFn, ConditionType, Output, Reason},
    dispatch::{MAX_RESPONSE_BYTES, run_with},
    proto::v1::{
        Capability, Ready, Resource, ResourceSelector, RunFunctionRequest, RunFunctionResponse, Severity,
        State, Status, resource_selector::Match,
    },
    render::RequestBuilder,
    run_function,
    wire::{RawStruct, tree::Fields},
};
use prost::Message;
use serde_json::{Value, json};

fn example_class() -> Value {
    json!({
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "eks-h200-8x"},
        "spec": {"devices": [{
            "name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 8,
            "attributes": {"productName": {"string": "NVIDIA H200"}},
        }]},
    })
}

fn raw(value: Value) -> RawStruct {
    RawStruct::from_value(&value).expect("a JSON object")
}

/// A first call from a Crossplane before v2.2, which advertises no capabilities.
fn request(composite: Value) -> RunFunctionRequest {
    RequestBuilder::new(&composite)
        .tag("tag-1")
        .capabilities(&[])
        .build()
}

/// Keys in reverse order: valid, but not what an encoder that sorts or re-encodes would produce.
fn non_canonical_struct() -> RawStruct {
    let mut bytes = RawStruct::from_value(&json!({"spec": {"z": [1.5, null, true], "a": "ü"}}))
        .expect("object")
        .as_bytes()
        .to_vec();
    bytes.extend_from_slice(raw(json!({"kind": "Bucket"})).as_bytes());
    bytes.extend_from_slice(raw(json!({"apiVersion": "s3.aws.m.upbound.io/v1beta1"})).as_bytes());
    RawStruct::decode(bytes.as_slice()).expect("valid Struct bytes")
}

fn single_fatal(rsp: &RunFunctionResponse) -> String {
    match common::fatal(rsp).as_slice() {
        [message] => message.clone(),
        other => panic!("expected one FATAL result, got {other:?}"),
    }
}

#[test]
fn the_tag_is_echoed_and_a_60_second_ttl_is_set() {
    let rsp = run_function(request(example_class()));
    let meta = rsp.meta.expect("response meta");
    assert_eq!(meta.tag, "tag-1");
    assert_eq!(meta.ttl.map(|ttl| (ttl.seconds, ttl.nanos)), Some((60, 0)));
}

#[test]
fn desired_resources_from_earlier_steps_are_returned_byte_identical() {
    let mut req = request(example_class());
    let earlier = Resource {
        resource: Some(non_canonical_struct()),
        connection_details: BTreeMap::from([("password".into(), b"\x00\xffsecret".to_vec())]),
        ready: Ready::True as i32,
    };
    let sent = earlier.encode_to_vec();
    req.desired
        .as_mut()
        .expect("desired")
        .resources
        .insert("bucket".into(), earlier);
    let rsp = run_function(req);
    assert!(common::fatal(&rsp).is_empty());
    let desired = rsp.desired.expect("desired");
    assert_eq!(desired.resources.len(), 1);
    assert_eq!(desired.resources["bucket"].encode_to_vec(), sent);
}

#[test]
fn the_context_is_passed_through_unchanged() {
    let mut req = request(example_class());
    req.context = Some(non_canonical_struct());
    assert_eq!(run_function(req).context, Some(non_canonical_struct()));
}

#[test]
fn the_same_request_gives_byte_identical_responses() {
    let mut req = request(example_class());
    req.context = Some(non_canonical_struct());
    let first = run_function(req.clone()).encode_to_vec();
    let second = run_function(req).encode_to_vec();
    assert_eq!(first, second);
}

#[test]
fn a_request_without_a_composite_is_fatal() {
    let rsp = run_function(RunFunctionRequest::default());
    assert!(single_fatal(&rsp).contains("observed.composite"));
}

#[test]
fn an_unknown_kind_is_fatal_and_names_the_kind() {
    let rsp = run_function(request(
        json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceWidget"}),
    ));
    let message = single_fatal(&rsp);
    assert!(
        message.contains("InferenceWidget") && message.contains("InferenceClass"),
        "{message}"
    );
}

#[test]
fn a_wrong_api_version_is_fatal_and_names_it() {
    let mut class = example_class();
    class["apiVersion"] = json!("modelplane.ai/v1");
    let rsp = run_function(request(class));
    let message = single_fatal(&rsp);
    assert!(
        message.contains("\"modelplane.ai/v1\"") && message.contains("modelplane.ai/v1alpha1"),
        "{message}"
    );
}

#[test]
fn a_malformed_spec_is_fatal_and_names_the_field_path() {
    let mut class = example_class();
    class["spec"]["devices"][0]["count"] = json!("eight");
    let rsp = run_function(request(class));
    let message = single_fatal(&rsp);
    assert!(message.contains("InferenceClass eks-h200-8x"), "{message}");
    assert!(message.contains("spec.devices[0].count"), "{message}");
    assert!(rsp.desired.expect("desired").composite.is_none());
}

fn panics(_: &RunFunctionRequest, _: &RawStruct) -> Result<Output, ComposeError> {
    let devices: Vec<u32> = Vec::new();
    // An out-of-bounds index: the kind of bug a composer could ship.
    let _ = devices[usize::from(devices.is_empty())];
    Ok(Output::default())
}

/// A test composer's object, written as JSON.
fn object(value: Value) -> Fields {
    match value {
        Value::Object(map) => Fields::from(map),
        other => panic!("not an object: {other}"),
    }
}

fn succeeds(_: &RunFunctionRequest, _: &RawStruct) -> Result<Output, ComposeError> {
    let mut out = Output::default();
    out.compose(
        "config",
        object(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}})),
        true,
    );
    out.compose(
        "pending",
        object(json!({"apiVersion": "v1", "kind": "ConfigMap"})),
        false,
    );
    out.status.insert("phase".into(), json!("Composed"));
    out.requirements.insert(
        "class".into(),
        ResourceSelector {
            api_version: "modelplane.ai/v1alpha1".into(),
            kind: "InferenceClass".into(),
            r#match: Some(Match::MatchName("eks-h200-8x".into())),
            namespace: None,
        },
    );
    out.condition(
        ConditionType::Scheduled,
        Status::ConditionFalse,
        Reason::InsufficientCapacity,
        "no pool fits",
    );
    out.warnings.push("pool h200 is draining".into());
    out.ready = Some(false);
    Ok(out)
}

fn huge(_: &RunFunctionRequest, _: &RawStruct) -> Result<Output, ComposeError> {
    let mut out = Output::default();
    let blob = "x".repeat(MAX_RESPONSE_BYTES + 1);
    out.compose(
        "blob",
        object(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"blob": blob}})),
        true,
    );
    Ok(out)
}

const TEST_COMPOSERS: &[(&str, ComposeFn)] = &[("Panics", panics), ("Succeeds", succeeds), ("Huge", huge)];

fn xr(kind: &str) -> RunFunctionRequest {
    request(json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": kind, "metadata": {"name": "x"}}))
}

#[test]
fn a_panicking_composer_fails_only_its_own_request() {
    let rsp = run_with(TEST_COMPOSERS, xr("Panics"));
    let message = single_fatal(&rsp);
    assert!(message.contains("Panics x: internal error"), "{message}");
    assert!(message.contains("index out of bounds"), "{message}");
    assert_eq!(rsp.meta.expect("meta").tag, "tag-1");

    let next = run_with(TEST_COMPOSERS, xr("Succeeds"));
    assert!(common::fatal(&next).is_empty());
}

#[test]
fn a_composers_output_is_written_into_the_response() {
    let rsp = run_with(TEST_COMPOSERS, xr("Succeeds"));
    let desired = rsp.desired.expect("desired");
    assert_eq!(desired.resources["config"].ready, Ready::True as i32);
    assert_eq!(desired.resources["pending"].ready, Ready::Unspecified as i32);
    let config = desired.resources["config"]
        .resource
        .as_ref()
        .expect("object")
        .to_json()
        .expect("json");
    assert_eq!(config["data"], json!({"k": "v"}));

    let composite = desired.composite.expect("desired composite");
    assert_eq!(composite.ready, Ready::False as i32);
    let status = composite.resource.expect("object").to_json().expect("json");
    assert_eq!(status, json!({"status": {"phase": "Composed"}}));

    let requirements = rsp.requirements.expect("requirements").resources;
    assert_eq!(
        requirements["class"].r#match,
        Some(Match::MatchName("eks-h200-8x".into()))
    );
    assert_eq!(rsp.conditions.len(), 1);
    assert_eq!(
        (
            rsp.conditions[0].r#type.as_str(),
            rsp.conditions[0].status,
            rsp.conditions[0].message.as_deref()
        ),
        ("Scheduled", Status::ConditionFalse as i32, Some("no pool fits"))
    );
    let warnings: Vec<_> = rsp
        .results
        .iter()
        .filter(|r| r.severity == Severity::Warning as i32)
        .collect();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].message, "pool h200 is draining");
}

#[test]
fn a_response_over_4_mib_becomes_a_fatal_result_that_says_so() {
    let rsp = run_with(TEST_COMPOSERS, xr("Huge"));
    let message = single_fatal(&rsp);
    assert!(
        message.contains(&format!("over Crossplane's {MAX_RESPONSE_BYTES}-byte limit")),
        "{message}"
    );
    assert!(
        rsp.encoded_len() < 4096,
        "the FATAL response itself must be small"
    );
    assert_eq!(rsp.meta.expect("meta").tag, "tag-1");
    assert!(rsp.desired.is_none_or(|d| d.resources.is_empty()));
}

/// `xr(kind)` from a caller that advertises exactly `capabilities` (as Crossplane v2.2 and later do).
fn from_caller(kind: &str, capabilities: &[Capability]) -> RunFunctionRequest {
    let composite = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": kind, "metadata": {"name": "x"}});
    RequestBuilder::new(&composite)
        .tag("tag-1")
        .capabilities(capabilities)
        .build()
}

const EVERY_CAPABILITY: &[Capability] = &[
    Capability::Capabilities,
    Capability::RequiredResources,
    Capability::Credentials,
    Capability::Conditions,
    Capability::RequiredSchemas,
];

fn every_capability_but(missing: Capability) -> Vec<Capability> {
    EVERY_CAPABILITY
        .iter()
        .copied()
        .filter(|c| *c != missing)
        .collect()
}

#[test]
fn a_caller_advertising_every_capability_gets_requirements_and_conditions() {
    let rsp = run_with(TEST_COMPOSERS, from_caller("Succeeds", EVERY_CAPABILITY));
    assert!(common::fatal(&rsp).is_empty());
    assert!(
        rsp.requirements
            .expect("requirements")
            .resources
            .contains_key("class")
    );
    assert_eq!(rsp.conditions.len(), 1);
}

#[test]
fn a_caller_without_required_resources_gets_a_fatal_naming_them_not_a_partial_desired_state() {
    let without = every_capability_but(Capability::RequiredResources);
    let rsp = run_with(TEST_COMPOSERS, from_caller("Succeeds", &without));
    let message = single_fatal(&rsp);
    assert!(message.contains("required-resources capability"), "{message}");
    assert!(
        message.contains("class (modelplane.ai/v1alpha1 InferenceClass)"),
        "{message}"
    );
    // Nothing composed, nothing asked for: what the earlier steps desired goes back unchanged.
    assert_eq!(rsp.desired.expect("desired"), State::default());
    assert!(rsp.requirements.is_none());
    assert!(rsp.conditions.is_empty());
}

#[test]
fn a_real_composite_needing_classes_is_fatal_for_a_caller_that_cannot_fetch_them() {
    // The example as users write it; the composer asks for the InferenceClass its node pool names.
    let cluster: Value = serde_yaml::from_str(include_str!("../../examples/clusters/existing-onprem.yaml"))
        .expect("the example parses");
    let req = RequestBuilder::new(&cluster)
        .capabilities(&[Capability::Capabilities, Capability::Conditions])
        .build();
    let rsp = run_function(req);
    let message = single_fatal(&rsp);
    assert!(message.contains("InferenceClass"), "{message}");
    assert!(message.contains("required-resources capability"), "{message}");
}

#[test]
fn a_caller_without_conditions_gets_everything_but_conditions() {
    let without = every_capability_but(Capability::Conditions);
    let rsp = run_with(TEST_COMPOSERS, from_caller("Succeeds", &without));
    assert!(common::fatal(&rsp).is_empty());
    assert!(rsp.conditions.is_empty());
    assert_eq!(rsp.desired.expect("desired").resources.len(), 2);
    let huge = run_with(TEST_COMPOSERS, from_caller("Huge", &without));
    assert!(single_fatal(&huge).contains("byte limit"));
    assert!(huge.conditions.is_empty());
}

#[test]
fn a_caller_that_advertises_nothing_is_served_as_before() {
    // Crossplane before v2.2 sends no capabilities: the absence of one says nothing about it.
    let rsp = run_with(TEST_COMPOSERS, from_caller("Succeeds", &[]));
    assert!(common::fatal(&rsp).is_empty());
    assert!(rsp.requirements.is_some());
    assert_eq!(rsp.conditions.len(), 1);
}
