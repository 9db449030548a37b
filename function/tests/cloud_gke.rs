//! GKE InferenceClusters end to end through the library, as `render` and `render --until-ready` run them:
//! upstream Modelplane's own GKE manifests (vendored under `fixtures/upstream-clouds/`) compose a whole cluster
//! on both stacks from `spec.cluster.gke.region` alone, and bad input is refused by field with nothing composed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;

use common::{fatal, read_documents, yaml_files};
use modelplane_function::{
    render::{self, Inputs, Outcome, Simulation},
    run_function,
};
use serde_json::{Value, json};

fn upstream() -> PathBuf {
    common::repo_root().join("function/tests/fixtures/upstream-clouds/docs/manifests")
}

/// Every document upstream's GKE docs ship: clusters, classes and the provider-upjet-gcp ClusterProviderConfig.
fn upstream_gke() -> Vec<Value> {
    let files = yaml_files(&upstream().join("concepts"))
        .into_iter()
        .chain(yaml_files(&upstream().join("getting-started/gke")))
        .chain([upstream().join("getting-started/clusterproviderconfig-gke.yaml")]);
    files.flat_map(|path| read_documents(&path)).collect()
}

fn gke_clusters() -> Vec<Value> {
    upstream_gke()
        .into_iter()
        .filter(|d| d["kind"] == "InferenceCluster" && d["spec"]["cluster"]["source"] == "GKE")
        .collect()
}

/// What a cluster's function call can require: every upstream class and the GCP provider config.
fn required() -> Vec<Value> {
    upstream_gke()
        .into_iter()
        .filter(|d| d["kind"] != "InferenceCluster")
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

fn until_ready(composite: &Value) -> Simulation {
    let inputs = Inputs {
        composite: composite.clone(),
        required: required(),
        ..Default::default()
    };
    runtime()
        .block_on(render::run_until_ready(&inputs, |req| async move {
            Ok(run_function(req))
        }))
        .unwrap()
}

fn kinds(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .skip(1)
        .filter_map(|d| d["kind"].as_str().map(str::to_owned))
        .collect()
}

fn charts(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .filter(|d| d["kind"] == "Release")
        .filter_map(|d| {
            d["spec"]["forProvider"]["chart"]["name"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

#[test]
fn upstreams_gke_clusters_come_up_from_the_region_alone() {
    let clusters = gke_clusters();
    assert!(clusters.len() >= 3, "{} upstream GKE clusters", clusters.len());
    for cluster in clusters {
        let name = cluster["metadata"]["name"].clone();
        let done = until_ready(&cluster);
        assert_eq!(
            done.outcome,
            Outcome::Ready,
            "{name}: waiting for {:?}",
            done.waiting()
        );
        let kinds = kinds(&done.documents);
        for kind in [
            "Network",
            "Subnetwork",
            "ServiceAccount",
            "ProjectIAMMember",
            "Cluster",
            "NodePool",
        ] {
            assert!(kinds.iter().any(|k| k == kind), "{name}: no {kind} in {kinds:?}");
        }
        let status = &done.documents[0]["status"];
        assert_eq!(status["cacheStorageClass"], "modelplane-rwx", "{name}");
        let pools = cluster["spec"]["nodePools"].as_array().unwrap();
        assert_eq!(status["pools"].as_array().unwrap().len(), pools.len(), "{name}");
    }
}

#[test]
fn a_gpu_pool_gets_its_class_hardware_zones_taint_and_autoscaling_range() {
    let cluster = gke_clusters()
        .into_iter()
        .find(|c| c["metadata"]["name"] == "starter")
        .unwrap();
    let done = until_ready(&cluster);
    let pool = done
        .documents
        .iter()
        .find(|d| {
            d["kind"] == "NodePool" && d["metadata"]["annotations"]["crossplane.io/external-name"] == "gpu-l4"
        })
        .unwrap();
    let p = &pool["spec"]["forProvider"];
    assert_eq!(p["location"], "us-central1");
    assert_eq!(p["nodeLocations"], json!(["us-central1-a"]));
    assert_eq!(p["autoscaling"]["totalMinNodeCount"], 0);
    assert_eq!(p["autoscaling"]["totalMaxNodeCount"], 2);
    assert_eq!(p["nodeConfig"]["machineType"], "g2-standard-8");
    assert_eq!(p["nodeConfig"]["guestAccelerator"][0]["type"], "nvidia-l4");
    assert_eq!(p["nodeConfig"]["labels"]["modelplane.ai/pool"], "gpu-l4");
    assert_eq!(p["nodeConfig"]["taint"][0]["key"], "nvidia.com/gpu");
    assert!(
        p["cluster"].as_str().unwrap().ends_with("/clusters/starter"),
        "{p}"
    );
    assert!(
        p["nodeConfig"]["serviceAccount"]
            .as_str()
            .unwrap()
            .ends_with(".iam.gserviceaccount.com")
    );
}

#[test]
fn the_dynamo_stack_on_gke_gets_grove_kai_and_one_model_express() {
    let mut cluster = gke_clusters().into_iter().next().unwrap();
    cluster["spec"]["stack"] = json!("Dynamo");
    let done = until_ready(&cluster);
    assert_eq!(done.outcome, Outcome::Ready, "waiting for {:?}", done.waiting());
    let charts = charts(&done.documents);
    assert!(
        charts.contains(&"grove-charts".to_owned()) && charts.contains(&"kai-scheduler".to_owned()),
        "{charts:?}"
    );
    let model_express = done
        .documents
        .iter()
        .filter(|d| d["spec"]["forProvider"]["manifest"]["kind"] == "Deployment")
        .filter(|d| d["spec"]["forProvider"]["manifest"]["metadata"]["name"] == "modelexpress-server")
        .count();
    assert_eq!(model_express, 1);
    // GKE puts the NVIDIA driver off the root filesystem; the DRA driver is told where.
    let dra = done
        .documents
        .iter()
        .find(|d| {
            d["kind"] == "Release" && d["spec"]["forProvider"]["chart"]["name"] == "dra-driver-nvidia-gpu"
        })
        .unwrap();
    assert_eq!(
        dra["spec"]["forProvider"]["values"]["nvidiaDriverRoot"],
        "/home/kubernetes/bin/nvidia"
    );
}

#[test]
fn without_the_gcp_provider_config_nothing_is_composed_and_the_field_is_named() {
    let cluster = gke_clusters().into_iter().next().unwrap();
    let classes_only: Vec<Value> = required()
        .into_iter()
        .filter(|d| d["kind"] == "InferenceClass")
        .collect();
    let rsp = common::render(&cluster, classes_only);
    let fatal = fatal(&rsp);
    assert!(
        fatal.len() == 1
            && fatal[0].contains(
                "spec.cluster.gke.credentials: ClusterProviderConfig \"default\" (gcp.m.upbound.io/v1beta1)"
            ),
        "{fatal:?}"
    );
    assert!(rsp.desired.iter().all(|d| d.resources.is_empty()));
}

#[test]
fn bad_gke_input_is_refused_by_field_with_nothing_composed() {
    let cluster = gke_clusters()
        .into_iter()
        .find(|c| c["metadata"]["name"] == "starter")
        .unwrap();
    let mut wrong_zone = cluster.clone();
    wrong_zone["spec"]["nodePools"][0]["zones"] = json!(["europe-west4-a"]);
    let mut digit_name = cluster.clone();
    digit_name["metadata"]["name"] = json!("1st-fleet");
    let mut classes = required();
    for class in classes
        .iter_mut()
        .filter(|d| d["metadata"]["name"] == "gke-l4-1x-g2")
    {
        class["spec"]["provisioning"]["gke"]["machineType"] = json!("a3-highgpu-8g");
    }
    for (case, composite, required, field) in [
        (
            "a zone of another region",
            &wrong_zone,
            required(),
            "spec.nodePools[0].zones[0]",
        ),
        ("a name GKE refuses", &digit_name, required(), "metadata.name"),
        (
            "a class whose machine comes with other GPUs",
            &cluster,
            classes,
            "spec.nodePools[0].className",
        ),
    ] {
        let rsp = common::render(composite, required);
        let fatal = fatal(&rsp);
        assert!(
            fatal.len() == 1 && fatal[0].contains(&format!("{field}: ")),
            "{case}: {fatal:?}"
        );
        assert!(rsp.desired.iter().all(|d| d.resources.is_empty()), "{case}");
    }
}
