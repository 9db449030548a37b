//! The provider-eks managed resources an EKS InferenceCluster composes are accepted by the CRDs provider-eks
//! installs, generated from the same `modelplane-eks-api` types (`CustomResourceExt::crd()`).

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod schema;

use kube::CustomResourceExt;
use modelplane_eks_api::{Cluster, ClusterProviderConfig, NodePool};
use modelplane_function::{
    compose::inference_cluster::{CONTROL_NAMESPACE, class_requirement},
    proto::v1::{Resource, Resources, RunFunctionRequest, State},
    run_function,
    wire::RawStruct,
};
use schema::{read_documents, repo_root, structural_problems};
use serde_json::Value;

fn composed_for(example: &str) -> Vec<Value> {
    let xr = read_documents(&repo_root().join("examples/clusters").join(example)).remove(0);
    let class = read_documents(&repo_root().join("examples/classes/eks-h200-8x.yaml")).remove(0);
    let resource = |v: &Value| Resource {
        resource: RawStruct::from_value(v),
        ..Default::default()
    };
    let mut req = RunFunctionRequest {
        observed: Some(State {
            composite: Some(resource(&xr)),
            ..Default::default()
        }),
        ..Default::default()
    };
    req.required_resources.insert(
        class_requirement("eks-h200-8x"),
        Resources {
            items: vec![resource(&class)],
        },
    );
    let rsp = run_function(req);
    assert!(rsp.results.is_empty(), "{:?}", rsp.results);
    rsp.desired
        .unwrap()
        .resources
        .into_values()
        .map(|r| r.resource.unwrap().to_json().unwrap())
        .collect()
}

fn crd_schema(
    crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> (String, Value) {
    let crd = serde_json::to_value(crd).unwrap();
    (
        crd["spec"]["names"]["kind"].as_str().unwrap().to_owned(),
        schema::version_schema(&crd),
    )
}

#[test]
fn every_composed_provider_eks_object_is_accepted_by_the_generated_crds() {
    let schemas = [
        crd_schema(Cluster::crd()),
        crd_schema(NodePool::crd()),
        crd_schema(ClusterProviderConfig::crd()),
    ];
    for example in ["eks-h200-us-east.yaml", "eks-h200-us-east-standard.yaml"] {
        let eks: Vec<Value> = composed_for(example)
            .into_iter()
            .filter(|o| o["apiVersion"] == modelplane_eks_api::API_VERSION)
            .collect();
        let kinds: Vec<&str> = eks.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds.iter().filter(|k| **k == "NodePool").count(),
            2,
            "system + gpu pool: {kinds:?}"
        );
        assert!(kinds.contains(&"Cluster"), "{kinds:?}");
        for object in &eks {
            let (_, schema) = schemas
                .iter()
                .find(|(kind, _)| object["kind"] == kind.as_str())
                .unwrap();
            let problems = structural_problems(schema, object);
            assert!(problems.is_empty(), "{example} {}: {problems:#?}", object["kind"]);
            let namespaced = object["kind"] != "ClusterProviderConfig";
            assert_eq!(
                object["metadata"]["namespace"].as_str() == Some(CONTROL_NAMESPACE),
                namespaced
            );
        }
    }
}

#[test]
fn the_generated_crds_reject_a_node_pool_without_scaling() {
    let (_, schema) = crd_schema(NodePool::crd());
    let mut pool = composed_for("eks-h200-us-east.yaml")
        .into_iter()
        .find(|o| o["kind"] == "NodePool")
        .unwrap();
    pool["spec"]["forProvider"]
        .as_object_mut()
        .unwrap()
        .remove("scaling");
    assert!(
        !structural_problems(&schema, &pool).is_empty(),
        "a missing required field must be caught"
    );
}
