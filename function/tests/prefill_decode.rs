//! Prefill/decode disaggregation through the whole function (`run_function`, as Crossplane calls it): a
//! ModelDeployment breaking one of the XRD's PrefillDecode rules is a FATAL naming the field, before anything is
//! composed; and what a PrefillDecode replica puts on a cluster is accepted by the vendored CRDs: its gang
//! workloads by every LeaderWorkerSet and Grove release we support (structure, CEL, undeclared fields), its
//! InferencePool and HTTPRoute by every GAIE and Gateway API release, on both stacks.

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{fatal, problems, read_documents, repo_root, yaml_files};
use modelplane_function::{
    compose::model_deployment::{CACHE, CLUSTERS},
    proto::v1::RunFunctionResponse,
    render::RequestBuilder,
    run_function,
};
use serde_json::{Value, json};

const EXAMPLE: &str = "examples/deployments/qwen3-235b-pd.yaml";

fn document(path: &str) -> Value {
    read_documents(&repo_root().join(path)).remove(0)
}

/// The example with both engines a Leader and one Worker, so both phases are gangs.
fn both_gangs() -> Value {
    let mut xr = document(EXAMPLE);
    for engine in xr["spec"]["template"]["spec"]["engines"].as_array_mut().unwrap() {
        let mut leader = engine["members"][0].clone();
        leader["role"] = json!("Leader");
        let mut worker = leader.clone();
        worker["role"] = json!("Worker");
        worker["worker"] = json!({"nodes": 1});
        engine["members"] = json!([leader, worker]);
    }
    xr
}

fn run(xr: &Value, stack: &str, cluster: &str) -> RunFunctionResponse {
    let mut cluster = document(&format!("tests/fixtures/clusters/{stack}/{cluster}.yaml"));
    cluster["status"]["pools"][0]["nodeCount"] = json!(4);
    cluster["status"]["gateway"] = common::reachable_gateway("203.0.113.7");
    let req = RequestBuilder::new(xr)
        .required(CLUSTERS, &[cluster])
        .required(CACHE, &[])
        .build();
    run_function(req)
}

/// The manifests composed for the workload cluster.
fn manifests(rsp: &RunFunctionResponse) -> Vec<Value> {
    assert_eq!(fatal(rsp), Vec::<String>::new());
    rsp.desired
        .as_ref()
        .unwrap()
        .resources
        .values()
        .map(|r| r.resource.as_ref().unwrap().to_json().unwrap())
        .map(|o| o["spec"]["forProvider"]["manifest"].clone())
        .filter(|m| m.is_object())
        .collect()
}

/// The vendored CRD releases a workload cluster may run, under `tests/crds/` (files, or folders of files).
const LEADER_WORKER_SET: &[&str] = &["lws-leaderworkerset.yaml"];
const POD_CLIQUE_SET: &[&str] = &[
    "grove-podcliqueset.yaml",
    "grove-podcliqueset-v0.1.0-alpha.6.yaml",
];
const ROUTING: &[&str] = &[
    "routing/gaie/v1.0.1",
    "routing/gaie/v1.6.0",
    "routing/gateway-api/v1.4.1",
    "routing/gateway-api/v1.5.1",
];

/// Every served schema of the manifest's kind and version in `sources`.
fn schemas(sources: &[&str], manifest: &Value) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    for source in sources {
        let path = repo_root().join("tests/crds").join(source);
        let files = if path.is_dir() {
            yaml_files(&path)
        } else {
            vec![path]
        };
        for file in files {
            for crd in read_documents(&file) {
                if crd["spec"]["names"]["kind"] != manifest["kind"] {
                    continue;
                }
                for version in crd["spec"]["versions"].as_array().unwrap() {
                    let served = format!(
                        "{}/{}",
                        crd["spec"]["group"].as_str().unwrap(),
                        version["name"].as_str().unwrap()
                    );
                    if served == manifest["apiVersion"] {
                        found.push((
                            file.display().to_string(),
                            version["schema"]["openAPIV3Schema"].clone(),
                        ));
                    }
                }
            }
        }
    }
    found
}

fn assert_accepted(manifest: &Value, sources: &[&str], releases: usize) {
    let kind = &manifest["kind"];
    let schemas = schemas(sources, manifest);
    assert_eq!(schemas.len(), releases, "{kind}: vendored releases");
    for (file, schema) in schemas {
        let found = problems(&schema, manifest, None);
        assert!(found.is_empty(), "{kind} against {file}: {found:#?}");
    }
}

#[test]
fn both_phases_as_gangs_are_accepted_by_every_vendored_workload_and_routing_crd_on_both_stacks() {
    for (stack, cluster, gang, crds) in [
        (
            "standard",
            "eks-h200-us-west",
            "LeaderWorkerSet",
            LEADER_WORKER_SET,
        ),
        ("dynamo", "eks-h200-us-east", "PodCliqueSet", POD_CLIQUE_SET),
    ] {
        let composed = manifests(&run(&both_gangs(), stack, cluster));
        let gangs: Vec<&Value> = composed.iter().filter(|m| m["kind"] == gang).collect();
        assert_eq!(gangs.len(), 2, "{stack}: a gang per phase");
        for workload in gangs {
            let text = workload.to_string();
            assert!(text.contains("llm-d.ai/role"), "{stack}: role labels");
            assert_accepted(workload, crds, crds.len());
        }
        let decode = composed
            .iter()
            .find(|m| m["kind"] == gang && m["metadata"]["name"].as_str().unwrap().ends_with("decode"))
            .unwrap();
        assert!(decode.to_string().contains("pd-sidecar"), "{stack}");
        for kind in ["InferencePool", "HTTPRoute"] {
            let routing: Vec<&Value> = composed.iter().filter(|m| m["kind"] == kind).collect();
            assert_eq!(routing.len(), 1, "{stack}: one {kind} for both phases");
            assert_accepted(routing[0], ROUTING, 2);
        }
    }
}

#[test]
fn the_example_composes_on_both_stacks_without_a_fatal_and_its_deployments_are_labelled_by_role() {
    for (stack, cluster) in [("standard", "eks-h200-us-west"), ("dynamo", "eks-h200-us-east")] {
        let composed = manifests(&run(&document(EXAMPLE), stack, cluster));
        let mut roles: Vec<&str> = composed
            .iter()
            .filter(|m| {
                m["kind"] == "Deployment"
                    && m["spec"]["template"]["metadata"]["labels"]["llm-d.ai/role"].is_string()
            })
            .map(|m| {
                m["spec"]["template"]["metadata"]["labels"]["llm-d.ai/role"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        roles.sort_unstable();
        assert_eq!(roles, ["decode", "prefill"], "{stack}");
    }
}

#[test]
fn a_deployment_breaking_a_prefill_decode_rule_is_a_fatal_naming_the_engines_and_composes_nothing() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit, &str); 5] = [
        (
            "one engine",
            |xr| {
                xr["spec"]["template"]["spec"]["engines"]
                    .as_array_mut()
                    .unwrap()
                    .pop();
            },
            "exactly two engines",
        ),
        (
            "two Prefill engines",
            |xr| xr["spec"]["template"]["spec"]["engines"][1]["phase"] = json!("Prefill"),
            "exactly one engine with phase Prefill",
        ),
        (
            "no Decode engine",
            |xr| {
                xr["spec"]["template"]["spec"]["engines"][1]
                    .as_object_mut()
                    .unwrap()
                    .remove("phase");
            },
            "exactly one engine with phase Decode",
        ),
        (
            "a phase under Unified serving",
            |xr| xr["spec"]["template"]["spec"]["serving"]["mode"] = json!("Unified"),
            "only when serving.mode is PrefillDecode",
        ),
        (
            "a phase with no serving block",
            |xr| {
                xr["spec"]["template"]["spec"]
                    .as_object_mut()
                    .unwrap()
                    .remove("serving");
            },
            "only when serving.mode is PrefillDecode",
        ),
    ];
    for (what, edit, message) in cases {
        let mut xr = document(EXAMPLE);
        edit(&mut xr);
        let rsp = run(&xr, "standard", "eks-h200-us-west");
        let fatal = fatal(&rsp);
        assert!(
            fatal.len() == 1
                && fatal[0].contains("spec.template.spec.engines: ")
                && fatal[0].contains(message),
            "{what}: {fatal:?}"
        );
        assert!(
            rsp.desired.as_ref().is_none_or(|d| d.resources.is_empty()),
            "{what}: composed"
        );
    }
}
