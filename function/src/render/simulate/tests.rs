use serde_json::{Value, json};

use super::*;
use crate::render::COMPOSITION_RESOURCE_NAME;

/// A composed resource as `render` prints it: with the annotation and `generateName` Crossplane adds.
fn composed(key: &str, api_version: &str, kind: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "spec": spec, "metadata": {
        "generateName": "us-east-", "namespace": "modelplane-system",
        "annotations": {COMPOSITION_RESOURCE_NAME: key}}})
}

fn object(key: &str, manifest: Value) -> Value {
    composed(
        key,
        OBJECT_API_VERSION,
        "Object",
        json!({"forProvider": {"manifest": manifest},
               "providerConfigRef": {"kind": "ClusterProviderConfig", "name": "us-east"}}),
    )
}

fn is_ready(observed: &Value) -> bool {
    crate::compose::remote::observed::<Value>(Some(&crate::compose::fixtures::resource(observed)))
        .is_some_and(|o| o.is_ready())
}

#[test]
fn every_kind_is_observed_ready_named_and_with_a_uid() {
    let observed = observe(&composed(
        "policy",
        "apiextensions.crossplane.io/v1alpha1",
        "Usage",
        json!({}),
    ));
    assert!(is_ready(&observed));
    let name = observed["metadata"]["name"].as_str().unwrap();
    assert!(
        name.starts_with("us-east-") && name.len() == "us-east-".len() + 5,
        "{name}"
    );
    assert_eq!(observed["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert_eq!(
        observed["metadata"]["annotations"][COMPOSITION_RESOURCE_NAME],
        "policy"
    );
}

#[test]
fn the_same_composition_observes_the_same_ids_and_different_objects_different_ones() {
    let network = |name: &str| {
        let mut n = composed(
            "eks-network",
            "eks.m.modelplane.ai/v1alpha1",
            "Network",
            json!({"forProvider": {"region": "us-east-1", "cidrBlock": "10.40.0.0/16",
                                   "zones": ["us-east-1a", "us-east-1b"]}}),
        );
        n["metadata"]["name"] = json!(name);
        observe(&n)
    };
    assert_eq!(network("a"), network("a"));
    assert_ne!(
        network("a")["status"]["atProvider"]["vpcId"],
        network("b")["status"]["atProvider"]["vpcId"]
    );
}

#[test]
fn a_network_reports_subnets_in_its_zones_and_cidr_and_a_security_group() {
    let observed = observe(&composed(
        "eks-network",
        "eks.m.modelplane.ai/v1alpha1",
        "Network",
        json!({"forProvider": {"region": "us-east-1", "cidrBlock": "10.40.0.0/16",
                               "zones": ["us-east-1a", "us-east-1b"]}}),
    ));
    let at: modelplane_eks_api::NetworkObservation =
        serde_json::from_value(observed["status"]["atProvider"].clone()).unwrap();
    let zones: Vec<&str> = at.private_subnets.iter().map(|s| s.zone.as_str()).collect();
    assert_eq!(zones, ["us-east-1a", "us-east-1b"]);
    assert!(
        at.private_subnets
            .iter()
            .all(|s| s.id.starts_with("subnet-0") && s.cidr_block.starts_with("10.40."))
    );
    assert_ne!(at.private_subnets[0].id, at.public_subnets[0].id);
    assert!(at.security_group_id.unwrap().starts_with("sg-0"));
}

#[test]
fn roles_clusters_and_file_systems_report_what_later_stages_read() {
    let role = observe(&composed(
        "eks-role-node",
        "eks.m.modelplane.ai/v1alpha1",
        "Role",
        json!({"forProvider": {"assumedBy": "ec2.amazonaws.com"}}),
    ));
    let arn = role["status"]["atProvider"]["arn"].as_str().unwrap();
    assert!(arn.starts_with(&format!("arn:aws:iam::{ACCOUNT}:role/")), "{arn}");

    let cluster = observe(&composed(
        "eks-cluster",
        "eks.m.modelplane.ai/v1alpha1",
        "Cluster",
        json!({"forProvider": {"region": "us-east-1", "version": "1.33"}}),
    ));
    let at = &cluster["status"]["atProvider"];
    assert_eq!(at["status"], "ACTIVE");
    assert!(at["endpoint"].as_str().unwrap().starts_with("https://"));
    assert_eq!(at["version"], "1.33");

    let file_system = observe(&composed(
        "eks-filesystem",
        "eks.m.modelplane.ai/v1alpha1",
        "FileSystem",
        json!({"forProvider": {"region": "us-east-1", "subnetIds": ["subnet-1", "subnet-2"],
                               "nfsSecurityGroupIds": ["sg-1"]}}),
    ));
    let at = &file_system["status"]["atProvider"];
    assert!(at["fileSystemId"].as_str().unwrap().starts_with("fs-0"));
    assert_eq!(at["mountTargets"].as_array().unwrap().len(), 2);
    assert_eq!(at["securityGroupId"], "sg-1");
}

#[test]
fn the_cluster_gateway_publishes_a_ca_the_function_trusts_and_gets_an_address() {
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": tls::PUBLISHED_CA, "namespace": "envoy-gateway-system"}});
    let observed = observe(&object("object-cluster-gateway-ca-published", manifest));
    assert_eq!(tls::published_ca(&observed).as_deref(), Some(SIMULATED_CA));

    let gateway = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                         "metadata": {"name": "cluster-gateway"}});
    let observed = observe(&object("object-cluster-gateway-gateway", gateway));
    let address = observed
        .pointer("/status/atProvider/manifest/status/addresses/0/value")
        .and_then(Value::as_str)
        .unwrap();
    assert!(address.starts_with("203.0.113."), "{address}");
}

#[test]
fn remote_objects_carry_their_manifest_with_a_uid_and_jobs_complete() {
    let manifest =
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "hydrate", "namespace": "ml"}});
    let observed = observe(&object("cache-hydrate", manifest));
    let remote = &observed["status"]["atProvider"]["manifest"];
    assert_eq!(remote["metadata"]["name"], "hydrate");
    assert_eq!(remote["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert_eq!(remote["status"]["conditions"][0]["type"], "Complete");
    assert!(is_ready(&observed));
}

#[test]
fn an_unreadable_provider_eks_spec_is_ready_without_ids() {
    let observed = observe(&composed(
        "eks-network",
        "eks.m.modelplane.ai/v1alpha1",
        "Network",
        json!({"forProvider": "not an object"}),
    ));
    assert_eq!(observed["status"]["atProvider"], json!({}));
}
