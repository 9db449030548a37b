//! The XRDs in `package/configuration/xrds/` do what an API server would do with them: their CEL rules compile
//! (kube-cel), accept the examples and reject what the API forbids, and the serde types the composers read
//! produce only fields the XRDs declare.

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod stages;

use common::{problems, read_documents, repo_root, yaml_files};
use modelplane_function::api::{
    Composite, inference_class::InferenceClassSpec, inference_cluster::InferenceClusterSpec,
};
use serde_json::{Value, json};

fn cluster_schema() -> Value {
    common::kind_schema("InferenceCluster")
}

fn class_schema() -> Value {
    common::kind_schema("InferenceClass")
}

#[test]
fn the_platform_kinds_are_cluster_scoped_v2_xrds() {
    for kind in ["InferenceCluster", "InferenceClass", "InferenceGateway"] {
        let xrd = common::xrd(&common::xrd_file(kind));
        assert_eq!(xrd["apiVersion"], "apiextensions.crossplane.io/v2", "{kind}");
        assert_eq!(xrd["spec"]["scope"], "Cluster", "{kind}");
    }
}

fn cluster(spec: Value) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "c"}, "spec": spec})
}

fn eks_spec() -> Value {
    json!({"stack": "Dynamo", "cluster": {"source": "EKS", "eks": {"region": "us-east-1",
               "clusterRoleArn": "arn:aws:iam::123456789012:role/c", "nodeRoleArn": "arn:aws:iam::123456789012:role/n"}},
           "nodePools": [{"name": "gpu", "className": "eks-h200-8x", "nodeCount": 2}]})
}

fn assert_rejected(schema: &Value, object: &Value, old: Option<&Value>, needle: &str) {
    let found = problems(schema, object, old);
    assert!(
        found.iter().any(|p| p.contains(needle)),
        "expected a problem containing {needle:?}, got {found:#?}"
    );
}

#[test]
fn every_cel_rule_in_both_xrds_compiles() {
    for schema in [cluster_schema(), class_schema()] {
        let compiled = kube_cel::compile_schema(&schema);
        assert!(!compiled.has_errors(), "{:#?}", compiled.compilation_errors());
    }
}

#[test]
fn every_example_validates_against_its_xrd() {
    let root = repo_root().join("examples");
    let mut checked = 0;
    for (dir, schema) in [("clusters", cluster_schema()), ("classes", class_schema())] {
        for file in yaml_files(&root.join(dir)) {
            for doc in read_documents(&file) {
                let found = problems(&schema, &doc, None);
                assert!(found.is_empty(), "{}: {found:#?}", file.display());
                checked += 1;
            }
        }
    }
    assert!(checked >= 4, "only {checked} examples found");
}

#[test]
fn stack_defaults_to_standard() {
    let mut spec = eks_spec();
    spec.as_object_mut().unwrap().remove("stack");
    let defaulted = kube_cel::apply_defaults(&cluster_schema(), &cluster(spec));
    assert_eq!(defaulted["spec"]["stack"], "Standard");
    assert_eq!(
        defaulted["spec"]["nodePools"][0]["fabric"],
        Value::Null,
        "no fabric object is invented"
    );
}

#[test]
fn changing_the_stack_is_rejected_and_keeping_it_is_not() {
    let schema = cluster_schema();
    let old = cluster(eks_spec());
    let mut changed = eks_spec();
    changed["stack"] = json!("Standard");
    assert_rejected(&schema, &cluster(changed), Some(&old), "stack is immutable");
    let mut scaled = eks_spec();
    scaled["nodePools"][0]["nodeCount"] = json!(3);
    assert_eq!(
        problems(&schema, &cluster(scaled), Some(&old)),
        Vec::<String>::new()
    );
}

#[test]
fn dropping_the_stack_of_a_dynamo_cluster_is_a_change_to_standard() {
    let mut dropped = eks_spec();
    dropped.as_object_mut().unwrap().remove("stack");
    assert_rejected(
        &cluster_schema(),
        &cluster(dropped),
        Some(&cluster(eks_spec())),
        "stack is immutable",
    );
}

#[test]
fn an_unknown_stack_is_rejected() {
    let mut spec = eks_spec();
    spec["stack"] = json!("Triton");
    assert_rejected(&cluster_schema(), &cluster(spec), None, "/spec/stack");
}

#[test]
fn source_rules_require_the_matching_block_and_only_it() {
    let schema = cluster_schema();
    let cases = [
        (json!({"source": "EKS"}), "eks is required when source is EKS"),
        (
            json!({"source": "Existing"}),
            "existing is required when source is Existing",
        ),
        (
            json!({"source": "Existing", "eks": {"region": "us-east-1"},
                   "existing": {"secretRef": {"name": "k"}}}),
            "eks is only allowed when source is EKS",
        ),
        (json!({}), "eks is required when source is EKS"),
    ];
    for (source, message) in cases {
        let mut spec = eks_spec();
        spec["cluster"] = source;
        assert_rejected(&schema, &cluster(spec), None, message);
    }
}

#[test]
fn node_pool_rules_reject_duplicates_bad_bounds_and_unzoned_capacity_blocks() {
    let schema = cluster_schema();
    let pool = |extra: Value| {
        let mut p = json!({"name": "gpu", "className": "eks-h200-8x", "nodeCount": 2});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };
    let cases = [
        (
            json!([pool(json!({})), pool(json!({}))]),
            "node pool names must be unique",
        ),
        (
            json!([pool(json!({"minNodeCount": 3}))]),
            "minNodeCount must not exceed nodeCount",
        ),
        (
            json!([pool(json!({"maxNodeCount": 1}))]),
            "nodeCount must not exceed maxNodeCount",
        ),
        (
            json!([pool(
                json!({"capacityBlock": {"capacityReservationId": "cr-0abc"}})
            )]),
            "a capacityBlock needs exactly one zone",
        ),
        (json!([pool(json!({"name": "system"}))]), "system is reserved"),
        (json!([pool(json!({"name": "GPU"}))]), "/spec/nodePools/0/name"),
    ];
    for (pools, message) in cases {
        let mut spec = eks_spec();
        spec["nodePools"] = pools;
        assert_rejected(&schema, &cluster(spec), None, message);
    }
}

#[test]
fn efa_and_capacity_blocks_need_an_eks_cluster() {
    let existing = json!({"source": "Existing", "existing": {"secretRef": {"name": "k"}}});
    let mut efa = eks_spec();
    efa["cluster"] = existing.clone();
    efa["nodePools"][0]["fabric"] = json!({"type": "EFA"});
    assert_rejected(
        &cluster_schema(),
        &cluster(efa),
        None,
        "fabric EFA needs cluster.source EKS",
    );
    let mut block = eks_spec();
    block["cluster"] = existing;
    block["nodePools"][0]["zones"] = json!(["us-east-1a"]);
    block["nodePools"][0]["capacityBlock"] = json!({"capacityReservationId": "cr-0abc"});
    assert_rejected(
        &cluster_schema(),
        &cluster(block),
        None,
        "capacityBlock needs cluster.source EKS",
    );
}

#[test]
fn an_eks_cluster_needs_only_a_region_and_defaults_to_a_public_endpoint() {
    let schema = cluster_schema();
    let mut spec = eks_spec();
    spec["cluster"]["eks"] = json!({"region": "us-west-2"});
    let xr = cluster(spec);
    assert_eq!(problems(&schema, &xr, None), Vec::<String>::new());
    // The API server defaults the inside of an object its `default: {}` created; kube-cel's defaulting makes
    // one pass, so a second pass stands in for that.
    let defaulted = kube_cel::apply_defaults(&schema, &kube_cel::apply_defaults(&schema, &xr));
    let eks = &defaulted["spec"]["cluster"]["eks"];
    assert_eq!(eks["networking"]["endpointPublicAccess"], true);
    assert_eq!(
        eks["credentials"],
        json!({"type": "ClusterProviderConfig", "name": "default"})
    );
}

#[test]
fn networking_rejects_a_cidr_that_is_not_one_and_a_closed_endpoint() {
    let schema = cluster_schema();
    for cidr in ["10.0.0.0", "10.0.0.0/8", "fd00::/48", "ten"] {
        let mut spec = eks_spec();
        spec["cluster"]["eks"]["networking"] = json!({"vpcCidr": cidr});
        assert_rejected(&schema, &cluster(spec), None, "must be an IPv4 CIDR");
    }
    let mut closed = eks_spec();
    closed["cluster"]["eks"]["networking"] = json!({"endpointPublicAccess": false});
    assert_rejected(
        &schema,
        &cluster(closed),
        None,
        "at least one of endpointPublicAccess",
    );
}

#[test]
fn a_version_field_is_not_part_of_the_api() {
    let mut spec = eks_spec();
    spec["cluster"]["eks"]["version"] = json!("1.34");
    assert_rejected(
        &cluster_schema(),
        &cluster(spec),
        None,
        ".spec.cluster.eks.version: field not declared",
    );
}

fn class(devices: Value) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass", "metadata": {"name": "x"},
           "spec": {"devices": devices, "provisioning": {"eks": {"instanceType": "g6.xlarge"}}}})
}

fn gpu() -> Value {
    json!({"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 1,
           "attributes": {"productName": {"string": "NVIDIA L4"}}, "capacity": {"memory": {"value": "24Gi"}}})
}

#[test]
fn class_rules_reject_what_the_scheduler_cannot_evaluate() {
    let schema = class_schema();
    assert_eq!(
        problems(&schema, &class(json!([gpu()])), None),
        Vec::<String>::new()
    );
    let with = |field: &str, value: Value| {
        let mut d = gpu();
        d[field] = value;
        json!([d])
    };
    let cases = [
        (json!([gpu(), gpu()]), "device names must be unique"),
        (
            with("attributes", json!({"arch": {"string": "Ada", "int": 9}})),
            "exactly one of string",
        ),
        (
            with("attributes", json!({"compute-capability": {"int": 9}})),
            "C identifiers",
        ),
        (
            with("capacity", json!({"memory": {"value": "lots"}})),
            "must be a Kubernetes quantity",
        ),
        (
            with("driver", json!("")),
            "a DRA device needs driver and deviceClassName",
        ),
        (with("count", json!(0)), "/spec/devices/0/count"),
        (json!([]), "/spec/devices"),
    ];
    for (devices, message) in cases {
        assert_rejected(&schema, &class(devices), None, message);
    }
}

#[test]
fn synthetic_devices_need_no_driver() {
    let host_memory = json!({"name": "memory", "claim": "Synthetic", "count": 1,
                             "capacity": {"size": {"value": "2Ti"}}});
    assert_eq!(
        problems(&class_schema(), &class(json!([gpu(), host_memory])), None),
        Vec::<String>::new()
    );
}

/// Whatever the composers' typed views read back out of an example serializes to fields the XRD declares,
/// so the serde names and the schema names cannot drift apart.
#[test]
fn serde_types_round_trip_the_examples_through_the_xrd_schemas() {
    let root = repo_root().join("examples");
    for file in yaml_files(&root.join("clusters")) {
        for doc in read_documents(&file) {
            let typed: Composite<InferenceClusterSpec> = serde_json::from_value(doc).unwrap();
            let back = json!({"spec": serde_json::to_value(&typed.spec).unwrap()});
            assert_eq!(
                problems(&cluster_schema(), &back, None),
                Vec::<String>::new(),
                "{}",
                file.display()
            );
        }
    }
    for file in yaml_files(&root.join("classes")) {
        for doc in read_documents(&file) {
            let typed: Composite<InferenceClassSpec> = serde_json::from_value(doc).unwrap();
            let back = json!({"spec": serde_json::to_value(&typed.spec).unwrap()});
            assert_eq!(
                problems(&class_schema(), &back, None),
                Vec::<String>::new(),
                "{}",
                file.display()
            );
        }
    }
}

/// The status the composer writes is one the XRD declares: Crossplane applies it to the status subresource,
/// where undeclared fields would be pruned and the ModelDeployment composer would never see them.
#[test]
fn the_status_the_composer_writes_is_declared_by_the_xrd() {
    use modelplane_function::render::RequestBuilder;
    // What the examples' render commands require: the classes, and the clouds' provider configs.
    let required: Vec<Value> = ["examples/classes", "examples/install"]
        .iter()
        .flat_map(|dir| yaml_files(&repo_root().join(dir)))
        .flat_map(|file| read_documents(&file))
        .collect();
    for file in yaml_files(&repo_root().join("examples/clusters")) {
        let xr = read_documents(&file).remove(0);
        let req = RequestBuilder::new(&xr).answered_from(&required).build();
        // Bring the cluster up with everything observed ready, so the status lists pools and their devices.
        let rsp = stages::every_stage(&req).pop().unwrap();
        let desired = rsp
            .desired
            .unwrap()
            .composite
            .unwrap()
            .resource
            .unwrap()
            .to_json()
            .unwrap();
        let status = &desired["status"];
        assert_eq!(
            status["pools"][0]["devices"][0]["name"],
            "gpu",
            "{}",
            file.display()
        );
        let found = problems(&cluster_schema(), &json!({"status": status}), None);
        assert_eq!(found, Vec::<String>::new(), "{}", file.display());
    }
}
