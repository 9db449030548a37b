use serde_json::json;

use super::*;

fn type_meta(object: &Value) -> TypeMeta {
    serde_json::from_value(object.clone()).unwrap()
}

fn check(object: &Value) -> Result<(), ComposeError> {
    composite(&type_meta(object), object)
}

#[test]
fn every_embedded_xrd_loads() {
    let served = served().as_ref().unwrap();
    let kinds: Vec<&str> = served.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "InferenceClass",
            "InferenceCluster",
            "ModelCache",
            "ModelDeployment"
        ]
    );
}

#[test]
fn kinds_no_xrd_defines_pass_to_the_composer_lookup() {
    assert_eq!(
        check(&json!({"apiVersion": "x.org/v1", "kind": "Gadget"})),
        Ok(())
    );
}

#[test]
fn metadata_is_checked_as_the_api_server_checks_it() {
    let object = |metadata: Value| json!({"apiVersion": "x.org/v1", "kind": "Gadget", "metadata": metadata});
    let findings = |metadata: Value| metadata::check(object(metadata).get("metadata"));
    assert_eq!(
        findings(json!({"name": "a.b-c", "namespace": "ns", "labels": {"x.io/k": "v_1.2"}})),
        []
    );
    assert_eq!(findings(json!({"name": ""}))[0].0, "metadata.name");
    assert_eq!(findings(json!({"name": "-a"}))[0].0, "metadata.name");
    assert_eq!(
        findings(json!({"name": "a", "namespace": "ml\u{7}team"}))[0].0,
        "metadata.namespace"
    );
    assert_eq!(
        findings(json!({"name": "a", "labels": {"k": "has space"}}))[0].0,
        "metadata.labels.k"
    );
    assert_eq!(
        findings(json!({"name": "a", "labels": {"Bad_/k": "v"}}))[0].0,
        "metadata.labels.Bad_/k"
    );
    let huge = "x".repeat(300 * 1024);
    assert_eq!(
        findings(json!({"name": "a", "annotations": {"k": huge}}))[0].0,
        "metadata.annotations"
    );
}
