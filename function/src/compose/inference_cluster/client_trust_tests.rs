//! The cluster gateway's side of mutual TLS: which fleet client CAs it requires, from what, and what it reports.

use serde_json::{Value, json};

use super::*;
use crate::{compose::fixtures, wire::RawStruct};

const CLUSTER_CA: &str = include_str!("../../../../tests/fixtures/tls/cluster-gateway-ca.pem");
const CLIENT_CA: &str = include_str!("../../../../tests/fixtures/tls/fleet-client-ca.pem");
const TRUST_KEY: &str = "object-cluster-gateway-client-cas";
const POLICY_KEY: &str = "object-cluster-gateway-client-policy";

fn existing() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "onprem"},
           "spec": {"stack": "Standard",
                    "cluster": {"source": "Existing", "existing": {
                        "secretRef": {"name": "onprem-kubeconfig", "namespace": "platform"},
                        "cache": {"storageClassName": "cephfs"}}},
                    "nodePools": [{"name": "gpu", "className": "eks-h200-8x", "nodeCount": 4}]}})
}

fn class() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass", "metadata": {"name": "eks-h200-8x"},
           "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                                 "count": 8}]}})
}

fn gateway(name: &str, cas: Value) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway", "metadata": {"name": name},
           "spec": {}, "status": {"clusterName": "onprem", "clientCertificateAuthorities": cas}})
}

/// One call of the cluster's composition with `gateways` answered (`None`: not fetched yet) and `observed`.
fn compose_with(gateways: Option<&[Value]>, observed: &[(String, Value)]) -> Output {
    let xr = existing();
    let mut req = fixtures::cluster_request(&xr, &[class()], observed).build();
    if let Some(gateways) = gateways {
        req = fixtures::with_required(req, GATEWAYS, gateways);
    }
    super::super::compose(&req, &RawStruct::from_value(&xr).unwrap()).unwrap()
}

fn manifest(out: &Output, key: &str) -> Option<Value> {
    out.resources
        .get(key)
        .map(|r| r.object["spec"]["forProvider"]["manifest"].clone())
}

fn required(out: &Output) -> Option<String> {
    manifest(out, TRUST_KEY).map(|m| m["data"]["ca.crt"].as_str().unwrap().to_owned())
}

#[test]
fn the_gateway_requires_nothing_until_a_fleet_gateway_publishes_a_ca() {
    for gateways in [None, Some(&[][..]), Some(&[gateway("fleet", json!([]))][..])] {
        let out = compose_with(gateways, &[]);
        assert!(out.resources.contains_key("object-cluster-gateway-gateway"));
        assert_eq!(required(&out), None);
        assert!(!out.resources.contains_key(POLICY_KEY));
    }
}

#[test]
fn every_gateways_ca_is_required_once_by_a_policy_on_the_cluster_gateway() {
    let gateways = [
        gateway("fleet", json!([CLIENT_CA])),
        gateway("eu", json!([CLUSTER_CA, CLIENT_CA])),
    ];
    let out = compose_with(Some(&gateways), &[]);
    let bundle = required(&out).unwrap();
    assert_eq!(split_bundle(&bundle, 16).len(), 2, "each CA once: {bundle}");
    assert!(bundle.contains(CLIENT_CA.trim()) && bundle.contains(CLUSTER_CA.trim()));
    let policy = manifest(&out, POLICY_KEY).unwrap();
    assert_eq!(policy["kind"], "ClientTrafficPolicy");
    assert_eq!(policy["spec"]["targetRefs"][0]["name"], "cluster-gateway");
    assert_eq!(
        policy["spec"]["tls"]["clientValidation"]["caCertificateRefs"],
        json!([{"group": "", "kind": "ConfigMap", "name": "modelplane-fleet-client-cas"}])
    );
    assert!(
        policy["spec"]["tls"]["clientValidation"]["optional"].is_null(),
        "a certificate is required, not merely checked when sent"
    );
}

#[test]
fn once_required_a_certificate_stays_required_when_no_gateway_says_otherwise() {
    let first = compose_with(Some(&[gateway("fleet", json!([CLIENT_CA]))]), &[]);
    let seen: Vec<(String, Value)> = first
        .resources
        .iter()
        .filter(|(key, _)| key.starts_with("object-cluster-gateway-client"))
        .map(|(key, r)| (key.clone(), Value::Object(r.object.to_map())))
        .collect();
    // The gateways cannot be read, or the one there was is gone: the cluster keeps what it required.
    for gateways in [None, Some(&[][..])] {
        let out = compose_with(gateways, &seen);
        assert_eq!(required(&out).as_deref(), Some(CLIENT_CA.trim()));
        assert!(out.resources.contains_key(POLICY_KEY));
    }
}

#[test]
fn what_a_gateway_publishes_that_is_not_one_ca_certificate_is_never_trusted() {
    let huge = "A".repeat(1 << 20);
    let two = format!("{CLIENT_CA}\n{CLUSTER_CA}");
    let hostile = gateway("evil", json!(["not a certificate", huge, two, ""]));
    let out = compose_with(Some(std::slice::from_ref(&hostile)), &[]);
    assert_eq!(required(&out), None);
    let out = compose_with(Some(&[hostile, gateway("fleet", json!([CLIENT_CA]))]), &[]);
    assert_eq!(required(&out).as_deref(), Some(CLIENT_CA.trim()));
}

#[test]
fn the_cluster_reports_the_fingerprints_of_what_its_gateway_holds() {
    let observed_trust = json!({"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
        "metadata": {"annotations": {"crossplane.io/composition-resource-name": TRUST_KEY}},
        "spec": {"forProvider": {"manifest": {}}},
        "status": {"atProvider": {"manifest": {"data": {"ca.crt": format!("{CLIENT_CA}\n{CLUSTER_CA}")}}}}});
    let xr = existing();
    let req = fixtures::cluster_request(&xr, &[class()], &[(TRUST_KEY.to_owned(), observed_trust)]).build();
    let reported = applied_fingerprints(&req);
    assert_eq!(
        reported,
        vec![fingerprint(CLIENT_CA).unwrap(), fingerprint(CLUSTER_CA).unwrap()]
    );
    assert!(reported.iter().all(|f| f.len() == "sha256:".len() + 64));
    assert_ne!(reported[0], reported[1]);
}
