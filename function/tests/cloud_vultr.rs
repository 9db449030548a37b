//! `spec.cluster.source: Vultr` end to end through the library: upstream Modelplane's Vultr manifests (vendored
//! under `fixtures/upstream-clouds/`) render; `render --until-ready` brings upstream's getting-started platform
//! to Ready on both stacks; every provider-upjet-vultr object composed fits the CRDs vendored under
//! `tests/crds/provider-upjet-vultr/` (CEL rules included); bad input is refused by field name with nothing
//! composed.

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use common::{fatal, problems, read_documents, repo_root, version_schema, yaml_files};
use modelplane_function::{
    compose::inference_cluster::class_requirement,
    render::{self, Inputs, Outcome, RequestBuilder, Simulation},
    run_function,
};
use serde_json::{Value, json};

fn manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream-clouds/docs/manifests")
}

/// Upstream's getting-started platform for Vultr: its class and its cluster.
fn platform() -> (Value, Value) {
    let docs = read_documents(&manifests().join("getting-started/vultr/platform.yaml"));
    let class = docs
        .iter()
        .find(|d| d["kind"] == "InferenceClass")
        .unwrap()
        .clone();
    let cluster = docs
        .iter()
        .find(|d| d["kind"] == "InferenceCluster")
        .unwrap()
        .clone();
    (class, cluster)
}

fn concepts() -> (Value, Value) {
    let class = read_documents(&manifests().join("concepts/inference-class-vultr-l40s.yaml")).remove(0);
    let cluster = read_documents(&manifests().join("concepts/inference-cluster-vultr.yaml")).remove(0);
    (class, cluster)
}

/// Runs `cluster` until it settles, its requirements answered with `class` and upstream's provider-upjet-vultr
/// ClusterProviderConfig.
fn until_ready(cluster: &Value, class: &Value) -> Simulation {
    let mut required = vec![class.clone()];
    required.extend(read_documents(
        &manifests().join("getting-started/clusterproviderconfig-vultr.yaml"),
    ));
    let inputs = Inputs {
        composite: cluster.clone(),
        required,
        ..Default::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime
        .block_on(render::run_until_ready(&inputs, |req| async move {
            Ok(run_function(req))
        }))
        .unwrap()
}

fn composed(simulation: &Simulation) -> Vec<Value> {
    simulation.documents[1..]
        .iter()
        .filter(|d| d["kind"] != "Result")
        .cloned()
        .collect()
}

fn with_stack(mut cluster: Value, stack: &str) -> Value {
    cluster["spec"]["stack"] = json!(stack);
    cluster
}

/// The vendored provider-upjet-vultr CRD schemas by (apiVersion, kind).
fn vultr_schemas() -> Vec<(String, String, Value)> {
    yaml_files(&repo_root().join("tests/crds/provider-upjet-vultr"))
        .iter()
        .flat_map(|path| read_documents(path))
        .map(|crd| {
            let group = crd["spec"]["group"].as_str().unwrap().to_owned();
            let version = crd["spec"]["versions"][0]["name"].as_str().unwrap();
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_owned();
            (format!("{group}/{version}"), kind, version_schema(&crd))
        })
        .collect()
}

#[test]
fn upstreams_vultr_cluster_renders_its_first_stage_without_a_fatal_result() {
    let (class, cluster) = concepts();
    let req = RequestBuilder::new(&cluster)
        .required(&class_requirement("vultr-l40s-1x"), &[class])
        .build();
    let rsp = run_function(req);
    assert_eq!(fatal(&rsp), Vec::<String>::new());
    let keys: Vec<String> = rsp.desired.unwrap().resources.into_keys().collect();
    assert!(keys.contains(&"activation-policy".to_owned()), "{keys:?}");
    assert!(
        !keys.iter().any(|k| k.starts_with("vultr-")),
        "nothing of the provider before its policy is seen: {keys:?}"
    );
}

#[test]
fn upstreams_getting_started_platform_reaches_ready_on_the_standard_stack() {
    let (class, cluster) = platform();
    let simulation = until_ready(&with_stack(cluster, "Standard"), &class);
    assert_eq!(simulation.outcome, Outcome::Ready);
    let status = &simulation.documents[0]["status"];
    assert_eq!(status["cacheStorageClass"], "modelplane-rwx-fs");
    assert_eq!(status["pools"][0]["name"], "gpu-l40s");
    let kinds: Vec<Value> = composed(&simulation).iter().map(|d| d["kind"].clone()).collect();
    for kind in ["VPC", "Kubernetes", "KubernetesNodePool", "Release"] {
        assert!(kinds.contains(&json!(kind)), "{kind}: {kinds:?}");
    }
    let charts: Vec<Value> = composed(&simulation)
        .iter()
        .filter(|d| d["kind"] == "Release")
        .map(|d| d["spec"]["forProvider"]["chart"]["name"].clone())
        .collect();
    assert!(charts.contains(&json!("lws")), "{charts:?}");
    assert!(!charts.contains(&json!("grove-charts")), "{charts:?}");
}

#[test]
fn upstreams_getting_started_platform_reaches_ready_on_dynamo_with_grove_kai_and_one_model_express() {
    let (class, cluster) = platform();
    let simulation = until_ready(&with_stack(cluster, "Dynamo"), &class);
    assert_eq!(simulation.outcome, Outcome::Ready);
    let documents = composed(&simulation);
    let charts: Vec<Value> = documents
        .iter()
        .filter(|d| d["kind"] == "Release")
        .map(|d| d["spec"]["forProvider"]["chart"]["name"].clone())
        .collect();
    for chart in ["grove-charts", "kai-scheduler", "csi-driver-nfs"] {
        assert!(charts.contains(&json!(chart)), "{chart}: {charts:?}");
    }
    let model_express_servers = documents
        .iter()
        .filter(|d| {
            let manifest = &d["spec"]["forProvider"]["manifest"];
            manifest["kind"] == "Deployment" && manifest["metadata"]["name"] == "modelexpress-server"
        })
        .count();
    assert_eq!(model_express_servers, 1);
    assert!(simulation.documents[0]["status"]["modelExpressAddress"].is_string());
}

#[test]
fn every_provider_object_composed_fits_the_vendored_crds() {
    let schemas = vultr_schemas();
    assert_eq!(schemas.len(), 3, "VPC, Kubernetes and KubernetesNodePool");
    let (class, cluster) = platform();
    let documents = composed(&until_ready(&cluster, &class));
    let mut checked = 0;
    for object in documents.iter().filter(|d| {
        d["apiVersion"]
            .as_str()
            .is_some_and(|v| v.contains(".vultr.m.upbound.io/"))
    }) {
        let (_, _, schema) = schemas
            .iter()
            .find(|(v, k, _)| object["apiVersion"] == json!(v) && object["kind"] == json!(k))
            .unwrap_or_else(|| panic!("no vendored CRD for {} {}", object["apiVersion"], object["kind"]));
        let mut object = object.clone();
        if let Some(map) = object.as_object_mut() {
            map.remove("status");
        }
        let found = problems(schema, &object, None);
        assert!(found.is_empty(), "{}: {found:#?}", object["kind"]);
        checked += 1;
    }
    assert_eq!(checked, 3, "the VPC, the cluster and one node pool");
    let policy = documents
        .iter()
        .find(|d| d["kind"] == "ManagedResourceActivationPolicy")
        .unwrap();
    let activated: Vec<&str> = policy["spec"]["activate"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for (api_version, kind, _) in &schemas {
        let crd = yaml_files(&repo_root().join("tests/crds/provider-upjet-vultr"))
            .iter()
            .flat_map(|p| read_documents(p))
            .find(|c| c["spec"]["names"]["kind"] == json!(kind))
            .unwrap();
        let name = crd["metadata"]["name"].as_str().unwrap().to_owned();
        assert!(
            activated.contains(&name.as_str()),
            "{api_version} {kind}: {activated:?}"
        );
    }
}

#[test]
fn bad_input_is_refused_by_field_name_with_nothing_composed() {
    let (class, cluster) = platform();
    let mut zoned = cluster.clone();
    zoned["spec"]["nodePools"][0]["zones"] = json!(["ewr-a"]);
    let mut cpu_class = class.clone();
    cpu_class["spec"]["provisioning"]["vultr"]["plan"] = json!("vc2-16c-64gb");
    let cases = [
        (
            zoned,
            class.clone(),
            "spec.nodePools[0].zones: Vultr node pools have no zones",
        ),
        (
            cluster,
            cpu_class,
            "spec.nodePools[0].className: InferenceClass \"l40s-1x\" has plan \"vc2-16c-64gb\", which is not a GPU plan",
        ),
    ];
    for (xr, class, says) in cases {
        let req = RequestBuilder::new(&xr)
            .required(&class_requirement("l40s-1x"), &[class])
            .build();
        let rsp = run_function(req);
        let fatal = fatal(&rsp);
        assert!(fatal.len() == 1 && fatal[0].contains(says), "{fatal:?}");
        let composed: Vec<&String> = rsp.desired.iter().flat_map(|d| d.resources.keys()).collect();
        assert!(composed.is_empty(), "{composed:?}");
    }
}
