//! The ModelDeployment XRD's CEL rules, compiled and evaluated with kube-cel as an API server would: every
//! rule compiles, the examples pass, and each rule rejects what it is there to reject.

// A test that cannot read its own fixtures should stop right there.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use kube_cel::{CompiledSchema, Validator, compile_schema};
use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

fn schema() -> Value {
    yaml("package/configuration/xrds/modeldeployments.yaml")["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn rules_in(schema: &Value) -> usize {
    match schema {
        Value::Object(map) => {
            let here = map
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            here + map
                .iter()
                .filter(|(k, _)| *k != "x-kubernetes-validations")
                .map(|(_, v)| rules_in(v))
                .sum::<usize>()
        }
        Value::Array(items) => items.iter().map(rules_in).sum(),
        _ => 0,
    }
}

fn compiled_rules(node: &CompiledSchema, errors: &mut Vec<String>) -> usize {
    errors.extend(node.compilation_errors().iter().map(|e| format!("{e:?}")));
    node.validations.len()
        + node
            .properties
            .values()
            .map(|c| compiled_rules(c, errors))
            .sum::<usize>()
        + node.items.as_deref().map_or(0, |c| compiled_rules(c, errors))
        + node
            .additional_properties
            .as_deref()
            .map_or(0, |c| compiled_rules(c, errors))
}

fn errors(object: &Value) -> Vec<String> {
    match Validator::new().validate(&schema(), object, None) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

fn seed() -> Value {
    yaml("examples/deployments/qwen3-coder.yaml")
}

#[test]
fn every_rule_in_the_xrd_compiles() {
    let schema = schema();
    let mut failures = Vec::new();
    let compiled = compiled_rules(&compile_schema(&schema), &mut failures);
    assert!(failures.is_empty(), "rules that do not compile: {failures:#?}");
    assert_eq!(compiled, rules_in(&schema), "every rule in the YAML was compiled");
    assert!(compiled >= 8);
}

#[test]
fn the_examples_pass_every_rule() {
    for example in [
        "examples/deployments/qwen3-coder.yaml",
        "examples/deployments/qwen3-small.yaml",
        PREFILL_DECODE,
    ] {
        assert_eq!(errors(&yaml(example)), Vec::<String>::new(), "{example}");
    }
}

const PREFILL_DECODE: &str = "examples/deployments/qwen3-235b-pd.yaml";

/// The example's `spec.template.spec`.
fn replica(md: &mut Value) -> &mut Value {
    &mut md["spec"]["template"]["spec"]
}

#[test]
fn the_prefill_decode_rules_reject_what_they_are_for_and_only_that() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit, &str); 6] = [
        (
            "a third engine",
            |md| {
                let mut third = replica(md)["engines"][0].clone();
                third["name"] = json!("extra");
                third.as_object_mut().unwrap().remove("phase");
                replica(md)["engines"].as_array_mut().unwrap().push(third);
            },
            "exactly two engines",
        ),
        (
            "a lone prefill engine",
            |md| {
                replica(md)["engines"].as_array_mut().unwrap().pop();
            },
            "exactly two engines",
        ),
        (
            "two Decode engines",
            |md| replica(md)["engines"][0]["phase"] = json!("Decode"),
            "exactly one engine with phase Prefill",
        ),
        (
            "an engine without a phase",
            |md| {
                replica(md)["engines"][0].as_object_mut().unwrap().remove("phase");
            },
            "exactly one engine with phase Prefill",
        ),
        (
            "Unified serving with phases",
            |md| replica(md)["serving"]["mode"] = json!("Unified"),
            "only when serving.mode is PrefillDecode",
        ),
        (
            "phases and no serving block (Unified)",
            |md| {
                replica(md).as_object_mut().unwrap().remove("serving");
            },
            "only when serving.mode is PrefillDecode",
        ),
    ];
    for (what, edit, want) in cases {
        let mut md = yaml(PREFILL_DECODE);
        edit(&mut md);
        let got = errors(&md);
        assert!(
            got.iter().any(|e| e.contains(want)),
            "{what}: want {want:?}, got {got:#?}"
        );
    }
    // Unified without phases, spelled out or by default, passes; so does an empty serving block (mode defaults).
    let mut unified = yaml("examples/deployments/qwen3-small.yaml");
    replica(&mut unified)["serving"] = json!({"mode": "Unified"});
    assert_eq!(errors(&unified), Vec::<String>::new());
    let defaulted = kube_cel::apply_defaults(
        &schema(),
        &json!({"spec": {"template": {"spec": {"serving": {}}}}}),
    );
    assert_eq!(
        defaulted["spec"]["template"]["spec"]["serving"]["mode"],
        "Unified"
    );
}

#[test]
fn each_rule_rejects_what_it_is_for() {
    struct Case {
        name: &'static str,
        reason: &'static str,
        edit: fn(&mut Value),
        want: &'static str,
    }
    let engine = "/spec/template/spec/engines/0";
    let cases = [
        Case {
            name: "leader-without-worker",
            reason: "a Leader alone is not an engine",
            edit: |md| {
                md["spec"]["template"]["spec"]["engines"][0]["members"]
                    .as_array_mut()
                    .unwrap()
                    .pop();
            },
            want: "an engine is one Standalone member, or one Leader and one Worker",
        },
        Case {
            name: "standalone-plus-worker",
            reason: "a Standalone member takes no workers",
            edit: |md| {
                md["spec"]["template"]["spec"]["engines"][0]["members"][0]["role"] = json!("Standalone")
            },
            want: "an engine is one Standalone member, or one Leader and one Worker",
        },
        Case {
            name: "no-device-requests",
            reason: "an engine that requests no devices cannot be scheduled",
            edit: |md| {
                for member in md["spec"]["template"]["spec"]["engines"][0]["members"]
                    .as_array_mut()
                    .unwrap()
                {
                    member.as_object_mut().unwrap().remove("nodeSelector");
                }
            },
            want: "at least one member must request devices",
        },
        Case {
            name: "container-not-named-engine",
            reason: "the one container must be named engine",
            edit: |md| {
                md["spec"]["template"]["spec"]["engines"][0]["members"][1]["template"]["spec"]["containers"]
                    [0]["name"] = json!("vllm")
            },
            want: "the container must be named engine",
        },
        Case {
            name: "worker-without-nodes",
            reason: "a Worker says how many nodes it spans",
            edit: |md| {
                md["spec"]["template"]["spec"]["engines"][0]["members"][1]
                    .as_object_mut()
                    .unwrap()
                    .remove("worker");
            },
            want: "a Worker needs worker.nodes",
        },
        Case {
            name: "reserved-label-on-the-deployment",
            reason: "modelplane.ai/ labels are Modelplane's",
            edit: |md| md["spec"]["template"]["metadata"] = json!({"labels": {"modelplane.ai/serving": "x"}}),
            want: "the modelplane.ai/ label prefix is reserved",
        },
        Case {
            name: "reserved-annotation-on-a-member",
            reason: "the prefix is reserved on member metadata too",
            edit: |md| {
                md["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["metadata"] =
                    json!({"annotations": {"modelplane.ai/pool": "gpu"}})
            },
            want: "the modelplane.ai/ annotation prefix is reserved",
        },
    ];
    assert!(seed().pointer(engine).is_some());
    for case in cases {
        let mut md = seed();
        (case.edit)(&mut md);
        let got = errors(&md);
        assert!(
            got.iter().any(|e| e.contains(case.want)),
            "{}: {}\nwant an error containing {:?}, got {got:#?}",
            case.name,
            case.reason,
            case.want
        );
    }
}
