//! Everything an EKS InferenceCluster composes, at every stage until it is whole, is accepted by the CRDs that
//! serve it: the provider-eks kinds by the CRDs provider-eks installs (generated from the same
//! `modelplane-eks-api` types), and Crossplane's Usage and activation policy and provider-kubernetes and
//! provider-helm kinds by their own CRDs (vendored under `fixtures/crds/`, see its SOURCES.md).

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod stages;

use std::{collections::BTreeMap, path::Path};

use common::{problems, read_documents, repo_root, structural_problems, yaml_files};
use modelplane_function::{
    compose::{inference_cluster::class_requirement, shared::CONTROL_NAMESPACE},
    render::RequestBuilder,
};
use serde_json::{Value, json};

/// Every object composed at every stage of bringing `xr` up, keyed by composition resource name.
fn every_stage(xr: &Value) -> Vec<BTreeMap<String, Value>> {
    let mut req = RequestBuilder::new(xr);
    for class in yaml_files(&repo_root().join("examples/classes")) {
        let class = read_documents(&class).remove(0);
        let name = class["metadata"]["name"].as_str().unwrap().to_owned();
        req = req.required(&class_requirement(&name), &[class]);
    }
    stages::every_stage(&req.build())
        .into_iter()
        .map(|rsp| {
            assert!(rsp.results.is_empty(), "{:?}", rsp.results);
            rsp.desired
                .unwrap()
                .resources
                .into_iter()
                .map(|(k, r)| (k, r.resource.unwrap().to_json().unwrap()))
                .collect()
        })
        .collect()
}

/// (apiVersion, kind) -> openAPIV3Schema, for every CRD an InferenceCluster's objects are checked against.
fn schemas() -> BTreeMap<(String, String), Value> {
    let mut crds: Vec<Value> = modelplane_provider_eks_crds();
    let vendored = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/crds");
    crds.extend(yaml_files(&vendored).iter().flat_map(|f| read_documents(f)));
    let mut found = BTreeMap::new();
    for crd in crds {
        let group = crd["spec"]["group"].as_str().unwrap().to_owned();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_owned();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let api_version = format!("{group}/{}", version["name"].as_str().unwrap());
            found.insert(
                (api_version, kind.clone()),
                version["schema"]["openAPIV3Schema"].clone(),
            );
        }
    }
    found
}

fn modelplane_provider_eks_crds() -> Vec<Value> {
    yaml_files(&repo_root().join("package/provider-eks/crds"))
        .iter()
        .flat_map(|f| read_documents(f))
        .collect()
}

fn stock_cluster() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "use1"},
           "spec": {"cluster": {"source": "EKS", "eks": {"region": "us-east-1"}},
                    "nodePools": [{"name": "gpu", "className": "eks-h200-8x", "nodeCount": 2, "maxNodeCount": 4,
                                   "zones": ["us-east-1a"], "fabric": {"type": "EFA"}}]}})
}

#[test]
fn every_object_of_every_stage_is_accepted_by_the_crd_that_serves_it() {
    let schemas = schemas();
    let mut examples: Vec<Value> = yaml_files(&repo_root().join("examples/clusters"))
        .iter()
        .flat_map(|f| read_documents(f))
        .filter(|c| c["spec"]["cluster"]["source"] == "EKS")
        .collect();
    examples.push(stock_cluster());
    let mut checked = BTreeMap::<String, usize>::new();
    for xr in &examples {
        for stage in every_stage(xr) {
            for (key, object) in &stage {
                let api_version = object["apiVersion"].as_str().unwrap().to_owned();
                let kind = object["kind"].as_str().unwrap().to_owned();
                let schema = schemas
                    .get(&(api_version.clone(), kind.clone()))
                    .unwrap_or_else(|| panic!("{key}: no CRD serves {api_version} {kind}"));
                let found = problems(schema, object, None);
                assert!(found.is_empty(), "{} {key}: {found:#?}", xr["metadata"]["name"]);
                *checked.entry(kind).or_default() += 1;
            }
        }
    }
    for kind in [
        "Network",
        "Role",
        "Cluster",
        "NodePool",
        "Addon",
        "PodIdentityAssociation",
        "FileSystem",
        "Usage",
        "ManagedResourceActivationPolicy",
        "Object",
        "Release",
        "ClusterProviderConfig",
    ] {
        assert!(checked.contains_key(kind), "no {kind} was checked: {checked:?}");
    }
}

#[test]
fn namespaced_kinds_sit_in_the_control_namespace_and_cluster_scoped_ones_in_none() {
    let stages = every_stage(&stock_cluster());
    for object in stages.last().unwrap().values() {
        let cluster_scoped = ["ClusterProviderConfig", "ManagedResourceActivationPolicy"]
            .contains(&object["kind"].as_str().unwrap());
        assert_eq!(
            object["metadata"]["namespace"].as_str() == Some(CONTROL_NAMESPACE),
            !cluster_scoped,
            "{object:#}"
        );
    }
}

#[test]
fn the_generated_crds_reject_a_node_pool_without_scaling() {
    let schemas = schemas();
    let stages = every_stage(&stock_cluster());
    let mut pool = stages.last().unwrap()["eks-nodepool-gpu"].clone();
    let schema = &schemas[&(modelplane_eks_api::API_VERSION.to_owned(), "NodePool".to_owned())];
    pool["spec"]["forProvider"]
        .as_object_mut()
        .unwrap()
        .remove("scaling");
    assert!(
        !structural_problems(schema, &pool).is_empty(),
        "a missing required field must be caught"
    );
}
