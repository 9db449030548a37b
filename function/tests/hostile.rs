//! Hostile composites, each as one table row: what a user who may create a composite can send, and the FATAL
//! result the function must answer with instead of crashing, stalling or composing it.

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use modelplane_function::{
    compose::model_deployment::{CACHE, CLUSTERS},
    dispatch::run_function_until,
    limits::{Deadline, MAX_MESSAGE_BYTES, MAX_RESPONSE_BYTES},
    proto::v1::{RunFunctionRequest, RunFunctionResponse},
    render::RequestBuilder,
    run_function,
};
use prost::Message;
use serde_json::{Value, json};

fn yaml(path: &str) -> Value {
    common::read_documents(&common::repo_root().join(path)).remove(0)
}

fn request(xr: &Value, required: &[(&str, Vec<Value>)]) -> RunFunctionRequest {
    required
        .iter()
        .fold(RequestBuilder::new(xr), |req, (name, objects)| {
            req.required(name, objects)
        })
        .build()
}

fn cluster() -> Value {
    yaml("tests/fixtures/clusters/standard/eks-h200-us-west.yaml")
}

fn staged_cache() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelCache",
           "metadata": {"name": "qwen3-coder", "namespace": "ml-team"},
           "status": {"clusters": [{"cluster": "eks-h200-us-west", "phase": "Ready"}]}})
}

/// The seed deployment, answered with `clusters` (one ready cluster when empty) and a staged cache.
fn deployment(deployment: &Value, clusters: &[Value]) -> RequestBuilder {
    let clusters = if clusters.is_empty() {
        vec![cluster()]
    } else {
        clusters.to_vec()
    };
    RequestBuilder::new(deployment)
        .required(CLUSTERS, &clusters)
        .required(CACHE, &[staged_cache()])
}

fn deployment_request(md: &Value, clusters: Vec<Value>) -> RunFunctionRequest {
    deployment(md, &clusters).build()
}

fn seed() -> Value {
    yaml("examples/deployments/qwen3-coder.yaml")
}

/// The seed with every member's selector replaced by `cel`.
fn with_selector(cel: &str) -> Value {
    let mut md = seed();
    for member in md["spec"]["template"]["spec"]["engines"][0]["members"]
        .as_array_mut()
        .unwrap()
    {
        member["nodeSelector"]["devices"][0]["selectors"] = json!([{"cel": cel}]);
    }
    md
}

/// The first FATAL message of a response.
fn fatal(rsp: &RunFunctionResponse) -> Option<String> {
    common::fatal(rsp).into_iter().next()
}

const SELECTOR: &str = "spec.template.spec.engines[0].members[0].nodeSelector.devices[0].selectors[0].cel";

struct Case {
    name: &'static str,
    request: RunFunctionRequest,
    /// The FATAL message starts with this.
    fatal: String,
}

fn cases() -> Vec<Case> {
    let list = format!("[{}]", vec!["1"; 100].join(","));
    let mut huge_replicas = seed();
    huge_replicas["spec"]["replicas"] = json!(4_294_967_295u64);
    let mut fat_containers = seed();
    fat_containers["spec"]["replicas"] = json!(1000);
    fat_containers["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"]
        [0]["args"] = json!(["x".repeat(8 * 1024)]);
    let mut huge_kind = seed();
    huge_kind["kind"] = json!("K".repeat(5 * 1024 * 1024));
    let mut huge_engine = seed();
    huge_engine["spec"]["template"]["spec"]["engines"][0]["name"] = json!("e".repeat(5 * 1024 * 1024));
    let deep_parse_error = format!("{}1 +", "(".repeat(3000));
    let at = |reason: &str| format!("ModelDeployment ml-team/qwen3-coder: {SELECTOR}: {reason}");
    let whose = r#"engine "qwen3-coder" member Leader request "gpu": CEL selector"#;
    let failed = r#"engine "qwen3-coder" member Leader request "gpu": CEL selector failed on device "gpu":"#;
    vec![
        Case {
            name: "a selector chain deep enough to overflow a worker's stack",
            request: deployment_request(&with_selector(&format!("device{} == 1", ".a".repeat(3000))), vec![]),
            fatal: at(&format!("{whose} nests 3002 deep; the limit is 250")),
        },
        Case {
            name: "brackets nested 5000 deep",
            request: deployment_request(
                &with_selector(&format!("{}1{}", "[".repeat(5000), "]".repeat(5000))),
                vec![],
            ),
            fatal: at(&format!("{whose} nests brackets 5000 deep; the limit is 64")),
        },
        Case {
            name: "10^10 iterations of nested all()",
            request: deployment_request(
                &with_selector(&format!(
                    "{list}.all(a, {list}.all(b, {list}.all(c, {list}.all(d, {list}.all(e, a == e)))))"
                )),
                vec![],
            ),
            fatal: at(&format!("{whose} is estimated to cost")),
        },
        Case {
            name: "a parse error at nesting depth 3000 (a 44 MB message before)",
            request: deployment_request(&with_selector(&deep_parse_error), vec![]),
            fatal: at(&format!("{whose} nests brackets 3000 deep")),
        },
        Case {
            name: "a selector returning a string",
            request: deployment_request(&with_selector("device.driver"), vec![]),
            fatal: at(&format!(
                r#"{failed} returned String("gpu.nvidia.com"), not a bool"#
            )),
        },
        Case {
            name: "no such overload",
            request: deployment_request(&with_selector("device.driver + 1 == 2"), vec![]),
            fatal: at(failed),
        },
        Case {
            name: "a quantity that does not parse",
            request: deployment_request(
                &with_selector(r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("eight")) >= 0"#),
                vec![],
            ),
            fatal: at(failed),
        },
        Case {
            name: "an undeclared name",
            request: deployment_request(&with_selector("gpu.memory > 1"), vec![]),
            fatal: at(&format!(r#"{whose} names "gpu", but a selector sees only `device`"#)),
        },
        Case {
            name: "replicas: 4294967295 (a 171 GB allocation before)",
            request: deployment_request(&huge_replicas, vec![]),
            fatal: "ModelDeployment ml-team/qwen3-coder: spec.replicas: value is greater than the maximum of 1000"
                .into(),
        },
        Case {
            name: "replicas whose containers alone pass 4 MiB",
            request: deployment_request(&fat_containers, vec![]),
            fatal: "ModelDeployment ml-team/qwen3-coder: spec.replicas: 1000 replicas of this template compose at \
                    least"
                .into(),
        },
        Case {
            name: "a 5 MiB kind",
            request: deployment_request(&huge_kind, vec![]),
            fatal: r#"composite kind "KKKK"#.into(),
        },
        Case {
            name: "a 5 MiB engine name",
            request: deployment_request(&huge_engine, vec![]),
            fatal: "ModelDeployment ml-team/qwen3-coder: spec.template.spec.engines[0].name:".into(),
        },
    ]
    .into_iter()
    .chain(refused_by_the_xrds())
    .collect()
}

/// What `validate.rs` used to let through although the API server refuses it: the embedded XRDs refuse it now.
fn refused_by_the_xrds() -> Vec<Case> {
    let md = |edit: &dyn Fn(&mut Value)| {
        let mut md = seed();
        edit(&mut md);
        deployment_request(&md, vec![])
    };
    let engine = "spec.template.spec.engines[0]";
    let mut cache = yaml("examples/caches/qwen3-coder.yaml");
    cache["spec"]["huggingFace"]["sizeGiB"] = json!("eight");
    let cluster_with = |edit: &dyn Fn(&mut Value)| {
        let mut cluster = yaml("examples/clusters/eks-h200-us-east.yaml");
        edit(&mut cluster);
        request(&cluster, &[])
    };
    let refused = |subject: &str, path: &str| format!("{subject}: {path}: ");
    let seed_subject = "ModelDeployment ml-team/qwen3-coder";
    vec![
        Case {
            name: "replicas 1001",
            request: md(&|md| md["spec"]["replicas"] = json!(1001)),
            fatal: refused(seed_subject, "spec.replicas"),
        },
        Case {
            name: "copies 65",
            request: md(&|md| md["spec"]["template"]["spec"]["engines"][0]["copies"] = json!(65)),
            fatal: refused(seed_subject, &format!("{engine}.copies")),
        },
        Case {
            name: "a device count of 0",
            request: md(&|md| {
                md["spec"]["template"]["spec"]["engines"][0]["members"][0]["nodeSelector"]["devices"][0]["count"] =
                    json!(0)
            }),
            fatal: refused(
                seed_subject,
                &format!("{engine}.members[0].nodeSelector.devices[0].count"),
            ),
        },
        Case {
            name: "worker settings on a Leader",
            request: md(&|md| {
                md["spec"]["template"]["spec"]["engines"][0]["members"][0]["worker"] = json!({"nodes": 1})
            }),
            fatal: refused(seed_subject, &format!("{engine}.members[0]")),
        },
        Case {
            name: "a pod label value with spaces",
            request: md(&|md| md["spec"]["template"]["metadata"] = json!({"labels": {"team": "ml ops"}})),
            fatal: refused(seed_subject, "spec.template.metadata.labels"),
        },
        Case {
            name: "an empty composite name",
            request: md(&|md| md["metadata"]["name"] = json!("")),
            fatal: "ModelDeployment ml-team/: metadata.name: a name is required".into(),
        },
        Case {
            name: "control characters in the namespace",
            request: md(&|md| md["metadata"]["namespace"] = json!("ml\u{7}team")),
            fatal: "ModelDeployment ml\u{7}team/qwen3-coder: metadata.namespace:".into(),
        },
        Case {
            name: "a cache size that is not a number",
            request: request(&cache, &[]),
            fatal: refused("ModelCache ml-team/qwen3-coder", "spec.huggingFace.sizeGiB"),
        },
        Case {
            name: "an EKS cluster in region \"\"",
            request: cluster_with(&|c| c["spec"]["cluster"]["eks"]["region"] = json!("")),
            fatal: refused("InferenceCluster eks-h200-us-east", "spec.cluster.eks.region"),
        },
        Case {
            name: "a VPC CIDR of /99",
            request: cluster_with(&|c| {
                c["spec"]["cluster"]["eks"]["networking"] = json!({"vpcCidr": "10.0.0.0/99"})
            }),
            fatal: refused(
                "InferenceCluster eks-h200-us-east",
                "spec.cluster.eks.networking.vpcCidr",
            ),
        },
    ]
}

#[test]
fn hostile_composites_get_a_bounded_fatal_naming_the_field() {
    for case in cases() {
        let rsp = run_function(case.request);
        let message = fatal(&rsp).unwrap_or_else(|| panic!("{}: no FATAL in {:?}", case.name, rsp.results));
        assert!(
            message.starts_with(&case.fatal),
            "{}:\n  got  {}\n  want {}...",
            case.name,
            &message[..message.len().min(600)],
            case.fatal
        );
        assert!(
            message.len() <= MAX_MESSAGE_BYTES + 64,
            "{}: {} bytes",
            case.name,
            message.len()
        );
        assert!(rsp.encoded_len() <= MAX_RESPONSE_BYTES, "{}", case.name);
    }
}

#[test]
fn a_cluster_ledger_claiming_2_pow_53_nodes_does_not_wrap_the_pool_free() {
    // The largest count a Struct carries exactly, less the deployment's own holder: neither may wrap.
    let mut hostile = cluster();
    hostile["status"]["pools"][0]["allocatedNodes"] = json!(9_007_199_254_740_992u64);
    hostile["status"]["pools"][0]["holders"] =
        json!([{"deployment": "ml-team/qwen3-coder", "replica": 5, "nodes": 1}]);
    let rsp = run_function(deployment_request(&seed(), vec![hostile]));
    assert_eq!(fatal(&rsp), None);
    let status = rsp
        .desired
        .unwrap()
        .composite
        .unwrap()
        .resource
        .unwrap()
        .to_json()
        .unwrap()["status"]
        .clone();
    assert_eq!(status["placedReplicas"], 0, "{status}");
    assert_eq!(
        status["replicas"][0]["reason"], "InsufficientCapacity",
        "{status}"
    );
}

#[test]
fn a_fatal_response_is_held_to_the_response_limit_too() {
    // A desired state from earlier steps that is passed through: 5 MiB of it.
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "y".repeat(5 * 1024 * 1024)}});
    let req = deployment(&with_selector("device.driver"), &[])
        .desired("big", &big)
        .build();
    let rsp = run_function(req);
    assert!(rsp.encoded_len() <= MAX_RESPONSE_BYTES);
    assert!(fatal(&rsp).unwrap().contains("not a bool"), "{:?}", rsp.results);
}

#[test]
fn a_call_past_its_deadline_stops_with_a_fatal() {
    let rsp = run_function_until(
        deployment_request(&seed(), vec![]),
        Deadline::after(Duration::ZERO),
    );
    assert!(
        fatal(&rsp).unwrap().contains("the call ran past its deadline"),
        "{:?}",
        rsp.results
    );
}
