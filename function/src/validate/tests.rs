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
            "InferenceGateway",
            "ModelCache",
            "ModelDeployment",
            "ModelEndpoint",
            "ModelService"
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

/// The seed deployment (examples/deployments/qwen3-coder.yaml) as Crossplane sends it, with a Worker.
fn gang() -> Value {
    let devices =
        json!({"devices": [{"name": "gpu", "count": 8, "selectors": [{"cel": "device.driver == 'x'"}]}]});
    let template = json!({"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.23.0"}]}});
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
        "metadata": {"name": "qwen3-coder", "namespace": "ml-team", "uid": "0"},
        "spec": {"replicas": 1, "template": {"spec": {"engines": [{"name": "qwen3-coder", "members": [
            {"role": "Leader", "nodeSelector": devices, "template": template},
            {"role": "Worker", "worker": {"nodes": 1}, "nodeSelector": devices, "template": template}]}]}}}})
}

/// The path and message of the first finding of checking `object`.
fn refused(object: &Value) -> String {
    match check(object) {
        Ok(()) => panic!("accepted: {object}"),
        Err(e) => format!("{e}"),
    }
}

#[test]
fn rules_deep_in_lists_and_maps_still_refuse_what_they_are_for() {
    assert_eq!(check(&gang()), Ok(()));
    // What the case is, how it breaks the gang, and the path and message of the refusal.
    type Case = (&'static str, fn(&mut Value), &'static str, &'static str);
    let cases: [Case; 6] = [
        (
            "a Worker without worker, two lists down",
            |o| {
                o.pointer_mut("/spec/template/spec/engines/0/members/1")
                    .unwrap()
                    .as_object_mut()
                    .unwrap()
                    .remove("worker");
            },
            "spec.template.spec.engines[0].members[1]",
            "a Worker needs worker.nodes",
        ),
        (
            "a Leader with worker",
            |o| o["spec"]["template"]["spec"]["engines"][0]["members"][0]["worker"] = json!({"nodes": 1}),
            "spec.template.spec.engines[0].members[0]",
            "only a Worker has worker",
        ),
        (
            "the container rule, five levels under the engine",
            |o| {
                o["spec"]["template"]["spec"]["engines"][0]["members"][1]["template"]["spec"]["containers"]
                    [0]["name"] = json!("main")
            },
            "spec.template.spec.engines[0].members[1].template.spec.containers",
            "the container must be named engine",
        ),
        (
            "a reserved label key, a map key the rule reads unescaped",
            |o| o["spec"]["template"]["metadata"] = json!({"labels": {"modelplane.ai/pool": "x"}}),
            "spec.template.metadata.labels",
            "the modelplane.ai/ label prefix is reserved",
        ),
        (
            "a reserved annotation on a member's pod template",
            |o| {
                o["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["metadata"] =
                    json!({"annotations": {"modelplane.ai/x": "y"}})
            },
            "spec.template.spec.engines[0].members[0].template.metadata.annotations",
            "the modelplane.ai/ annotation prefix is reserved",
        ),
        (
            "an engine of two Leaders",
            |o| {
                o["spec"]["template"]["spec"]["engines"][0]["members"][1] = json!({"role": "Leader",
                "template": {"spec": {"containers": [{"name": "engine", "image": "i"}]}}})
            },
            "spec.template.spec.engines[0]",
            "an engine is one Standalone member, or one Leader and one Worker",
        ),
    ];
    for (what, break_it, path, message) in cases {
        let mut object = gang();
        break_it(&mut object);
        let error = refused(&object);
        assert!(
            error.starts_with(&format!("{path}: {message}")),
            "{what}: {error}"
        );
    }
}

#[test]
fn a_rule_with_a_field_path_names_that_field() {
    let cluster = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
        "metadata": {"name": "onprem"},
        "spec": {"cluster": {"source": "Existing", "existing": {"secretRef": {"name": "k", "key": "kubeconfig"}}},
                 "nodePools": [{"name": "a", "className": "h200", "nodeCount": 1, "fabric": {"type": "EFA"}}]}});
    assert!(
        refused(&cluster).starts_with("spec.nodePools: fabric EFA needs cluster.source EKS"),
        "{}",
        refused(&cluster)
    );
}

/// Every leaf of `object` changed in ways rules care about, one at a time, and every field removed.
fn variants(object: &Value) -> Vec<Value> {
    fn leaves(value: &Value, at: String, out: &mut Vec<String>) {
        match value {
            Value::Object(fields) => fields.iter().for_each(|(k, v)| {
                leaves(
                    v,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                )
            }),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .for_each(|(i, v)| leaves(v, format!("{at}/{i}"), out)),
            _ => {}
        }
        out.push(at);
    }
    let mut paths = Vec::new();
    leaves(object, String::new(), &mut paths);
    let mut out = Vec::new();
    for path in paths.iter().filter(|p| p.starts_with("/spec/")) {
        let (parent, last) = path.rsplit_once('/').unwrap();
        let mut removed = object.clone();
        match removed.pointer_mut(parent) {
            Some(Value::Object(fields)) => {
                fields.remove(&last.replace("~1", "/").replace("~0", "~"));
            }
            Some(Value::Array(items)) => {
                items.remove(last.parse::<usize>().unwrap());
            }
            _ => continue,
        }
        out.push(removed);
        for replacement in [
            json!("Worker"),
            json!("modelplane.ai/x"),
            json!(""),
            json!(0),
            json!({}),
        ] {
            let mut changed = object.clone();
            *changed.pointer_mut(path).unwrap() = replacement;
            out.push(changed);
        }
    }
    out
}

#[test]
fn the_pruned_walkers_default_and_find_what_kube_cels_walkers_do() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut objects = vec![gang()];
    for dir in [
        "examples/deployments",
        "examples/clusters",
        "examples/classes",
        "examples/caches",
    ] {
        for entry in std::fs::read_dir(repo.join(dir)).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for document in serde_yaml::Deserializer::from_str(&text) {
                objects.push(serde::Deserialize::deserialize(document).unwrap());
            }
        }
    }
    let served = served().as_ref().unwrap();
    let (mut compared, mut refusals) = (0, 0);
    for object in &objects {
        let meta = type_meta(object);
        let (group, version) = meta.api_version.split_once('/').unwrap();
        let schema = &served
            .iter()
            .find(|s| s.group == group && s.version == version && s.kind == meta.kind)
            .unwrap_or_else(|| panic!("no XRD for {}", meta.kind))
            .schema;
        for variant in variants(object) {
            let (defaulted, by_kube_cel) = schema.defaulted_both_ways(&variant);
            assert_eq!(defaulted, by_kube_cel, "{variant}");
            let (mut ours, mut theirs) = schema.cel_findings_both_ways(&variant);
            ours.sort();
            theirs.sort();
            assert_eq!(ours, theirs, "{variant}");
            compared += 1;
            refusals += usize::from(!ours.is_empty());
        }
    }
    // The variants must break rules, or the comparison proves nothing.
    assert!(
        compared > 500 && refusals > 50,
        "{compared} variants, {refusals} refused"
    );
}

#[test]
fn a_prefill_decode_breach_is_refused_at_the_field_its_rule_names() {
    let text = include_str!("../../../examples/deployments/qwen3-235b-pd.yaml");
    let pd: Value = serde_yaml::from_str(text).unwrap();
    assert_eq!(check(&pd), Ok(()));
    let mut unified = pd.clone();
    unified["spec"]["template"]["spec"]["serving"]["mode"] = json!("Unified");
    assert!(
        refused(&unified).starts_with(
            "spec.template.spec.engines: an engine has a phase only when serving.mode is PrefillDecode"
        ),
        "{}",
        refused(&unified)
    );
    let mut unknown = pd.clone();
    unknown["spec"]["template"]["spec"]["engines"][1]["phase"] = json!("Both");
    assert!(
        refused(&unknown).contains("spec.template.spec.engines[1].phase: "),
        "{}",
        refused(&unknown)
    );
    let mut mode = pd;
    mode["spec"]["template"]["spec"]["serving"]["mode"] = json!("Split");
    assert!(
        refused(&mode).contains("spec.template.spec.serving.mode: "),
        "{}",
        refused(&mode)
    );
}

#[test]
fn an_accepted_composite_is_remembered_by_what_the_check_reads_and_nothing_else() {
    let on_the_wire =
        |object: &Value| composite_on_the_wire(&type_meta(object), &RawStruct::from_value(object).unwrap());
    let mut accepted = gang();
    accepted["metadata"]["name"] = json!("remembered-by-content");
    assert_eq!(on_the_wire(&accepted), Ok(()));

    // What moves on every write is not part of what was accepted: the same answer.
    let mut moved = accepted.clone();
    moved["metadata"]["resourceVersion"] = json!("42");
    moved["status"] = json!({"placedReplicas": 1});
    assert_eq!(on_the_wire(&moved), Ok(()));

    // Anything the check reads is: a bad spec, name or label after a good one is still refused.
    for (pointer, value) in [
        ("/spec/replicas", json!(-1)),
        ("/metadata/name", json!("Not_A_Name")),
        ("/metadata/labels", json!({"bad key!": "v"})),
    ] {
        let mut changed = moved.clone();
        match changed.pointer_mut(pointer) {
            Some(slot) => *slot = value,
            None => changed["metadata"]["labels"] = value,
        }
        assert!(on_the_wire(&changed).is_err(), "{pointer} was not checked again");
        // And a refusal is never remembered as an acceptance.
        changed["status"] = json!({"placedReplicas": 2});
        assert!(
            on_the_wire(&changed).is_err(),
            "{pointer} refused once, accepted after"
        );
    }
}
