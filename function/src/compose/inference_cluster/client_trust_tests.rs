//! The cluster gateway's side of mutual TLS: which fleet client CAs it requires, from what, and what it reports.

use serde_json::{Value, json};

use super::*;
use crate::{compose::fixtures, proto::v1::Status, wire::RawStruct, workload::cluster_gateway::tls};

const CLUSTER_CA: &str = include_str!("../../../../tests/fixtures/tls/cluster-gateway-ca.pem");
const CLIENT_CA: &str = include_str!("../../../../tests/fixtures/tls/fleet-client-ca.pem");
const EXPIRED_CA: &str = include_str!("../../../../tests/fixtures/tls/expired-ca.pem");
const TRUST_KEY: &str = "object-cluster-gateway-client-cas";
const POLICY_KEY: &str = "object-cluster-gateway-client-policy";

fn existing() -> Value {
    existing_with(json!({}))
}

/// The cluster with `spec.gateway` set to `gateway`.
fn existing_with(gateway: Value) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "onprem"},
           "spec": {"stack": "Standard",
                    "cluster": {"source": "Existing", "existing": {
                        "secretRef": {"name": "onprem-kubeconfig", "namespace": "platform"},
                        "cache": {"storageClassName": "cephfs"}}},
                    "gateway": gateway,
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
    compose_for(&existing(), gateways, observed)
}

fn compose_for(xr: &Value, gateways: Option<&[Value]>, observed: &[(String, Value)]) -> Output {
    let xr = xr.clone();
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

/// The three ways no fleet CA is known: the gateways not fetched yet, none, or one that publishes none.
fn no_fleet_ca() -> Vec<Option<Vec<Value>>> {
    vec![None, Some(vec![]), Some(vec![gateway("fleet", json!([]))])]
}

#[test]
fn before_any_fleet_ca_the_gateway_requires_a_certificate_nobody_holds() {
    for gateways in no_fleet_ca() {
        let out = compose_with(gateways.as_deref(), &[]);
        assert!(out.resources.contains_key("object-cluster-gateway-gateway"));
        assert_eq!(required(&out).as_deref(), Some(REFUSE_ALL_CA.trim()));
        let policy = manifest(&out, POLICY_KEY).expect("the policy refusing every caller");
        assert_eq!(policy["spec"]["targetRefs"][0]["name"], "cluster-gateway");
        assert!(policy["spec"]["tls"]["clientValidation"]["optional"].is_null());
        assert!(out.warnings.iter().all(|w| !w.contains("beforeFleetClientCA")));
    }
}

#[test]
fn the_placeholder_is_a_ca_certificate_and_no_fleet_ca() {
    assert_eq!(valid_ca(REFUSE_ALL_CA), Ok(()));
    for fleet in [CLIENT_CA, CLUSTER_CA] {
        assert_ne!(fingerprint(fleet), fingerprint(REFUSE_ALL_CA));
    }
}

#[test]
fn an_opted_out_cluster_requires_nothing_until_a_fleet_ca_and_says_why() {
    let xr = existing_with(json!({"beforeFleetClientCA": "AdmitAll"}));
    for gateways in no_fleet_ca() {
        let out = compose_for(&xr, gateways.as_deref(), &[]);
        assert_eq!(required(&out), None);
        assert!(!out.resources.contains_key(POLICY_KEY));
        assert!(
            out.warnings
                .iter()
                .any(|w| w.contains("spec.gateway.beforeFleetClientCA is AdmitAll")),
            "{:?}",
            out.warnings
        );
    }
    // Once a CA is published the opt-out no longer matters.
    let out = compose_for(&xr, Some(&[gateway("fleet", json!([CLIENT_CA]))]), &[]);
    assert_eq!(required(&out).as_deref(), Some(CLIENT_CA.trim()));
}

#[test]
fn the_first_fleet_ca_replaces_the_placeholder() {
    let refusing = compose_with(None, &[]);
    let out = compose_with(Some(&[gateway("fleet", json!([CLIENT_CA]))]), &seen(&refusing));
    assert_eq!(required(&out).as_deref(), Some(CLIENT_CA.trim()));
}

/// The client-trust Objects of `out`, as the next call observes them (applied and read back).
fn seen(out: &Output) -> Vec<(String, Value)> {
    out.resources
        .iter()
        .filter(|(key, _)| key.starts_with("object-cluster-gateway-client"))
        .map(|(key, r)| {
            let mut object = Value::Object(r.object.to_map());
            object["status"] =
                json!({"atProvider": {"manifest": object["spec"]["forProvider"]["manifest"].clone()}});
            (key.clone(), object)
        })
        .collect()
}

#[test]
fn the_cluster_reports_whom_its_gateway_admits_as_applied() {
    let request =
        |observed: &[(String, Value)]| fixtures::cluster_request(&existing(), &[class()], observed).build();
    // Nothing applied yet: the Gateway may already answer, with no policy.
    assert_eq!(admits(&request(&[])), Admits::Anyone);
    let refusing = seen(&compose_with(None, &[]));
    assert_eq!(admits(&request(&refusing)), Admits::Nobody);
    assert!(
        applied_fingerprints(&request(&refusing)).is_empty(),
        "the placeholder is no fleet CA"
    );
    // The trust ConfigMap alone requires nothing.
    let trust_only: Vec<_> = refusing.iter().filter(|(k, _)| k == TRUST_KEY).cloned().collect();
    assert_eq!(admits(&request(&trust_only)), Admits::Anyone);
    let trusting = seen(&compose_with(Some(&[gateway("fleet", json!([CLIENT_CA]))]), &[]));
    assert_eq!(admits(&request(&trusting)), Admits::FleetGateways);
    assert_eq!(
        applied_fingerprints(&request(&trusting)),
        vec![fingerprint(CLIENT_CA).unwrap()]
    );
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
    let seen = seen(&compose_with(Some(&[gateway("fleet", json!([CLIENT_CA]))]), &[]));
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
    assert_eq!(required(&out).as_deref(), Some(REFUSE_ALL_CA.trim()));
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

#[test]
fn an_expired_ca_is_never_all_the_gateway_trusts() {
    // Published expired: refused as a fleet CA, so the placeholder stays.
    let out = compose_with(Some(&[gateway("fleet", json!([EXPIRED_CA]))]), &[]);
    assert_eq!(required(&out).as_deref(), Some(REFUSE_ALL_CA.trim()));
    // Applied while valid, expired since, and no gateway publishes: the placeholder, not the expired CA.
    let stale = seen(&compose_with(Some(&[gateway("fleet", json!([CLIENT_CA]))]), &[]))
        .into_iter()
        .map(|(key, mut object)| {
            if key == TRUST_KEY {
                for manifest in ["/spec/forProvider/manifest", "/status/atProvider/manifest"] {
                    object.pointer_mut(manifest).unwrap()["data"]["ca.crt"] = json!(EXPIRED_CA);
                }
            }
            (key, object)
        })
        .collect::<Vec<_>>();
    let out = compose_with(None, &stale);
    assert_eq!(required(&out).as_deref(), Some(REFUSE_ALL_CA.trim()));
    let req = fixtures::cluster_request(&existing(), &[class()], &stale).build();
    assert_eq!(admits(&req), Admits::Nobody);
    assert!(applied_fingerprints(&req).is_empty());
}

/// An observed cluster-gateway Object under `suffix`, its remote object `manifest` and `conditions`.
fn observed_gateway_object(suffix: &str, manifest: Value, conditions: Value) -> (String, Value) {
    let key = format!("object-cluster-gateway-{suffix}");
    let object = json!({"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
        "metadata": {"annotations": {"crossplane.io/composition-resource-name": key}},
        "spec": {"forProvider": {"manifest": {}}},
        "status": {"atProvider": {"manifest": manifest}, "conditions": conditions}});
    (key, object)
}

fn gateway_ready(out: &Output) -> (Status, &'static str, String) {
    let c = out.reported("GatewayReady");
    (c.status, c.reason, c.message.clone().unwrap_or_default())
}

#[test]
fn the_cluster_names_the_missing_link_before_its_replicas_can_be_published() {
    let addressed = observed_gateway_object(
        "gateway",
        json!({"status": {"addresses": [{"value": "203.0.113.7"}]}}),
        json!([]),
    );
    // No address yet.
    let (status, reason, message) = gateway_ready(&compose_with(None, &[]));
    assert_eq!((status, reason), (Status::ConditionFalse, "Provisioning"));
    assert!(message.starts_with("status.gateway is empty: "), "{message}");

    // An address, but the CA's ConfigMap is not there: cert-manager's CA Secret is missing, so trust-manager has
    // nothing to publish. The provider's own words are quoted, bounded.
    let refused = format!(
        "cannot get object: configmaps \"modelplane-cluster-gateway-ca\" not found{}",
        "!".repeat(4096)
    );
    let missing = observed_gateway_object(
        tls::CA_SUFFIX,
        json!(null),
        json!([{"type": "Synced", "status": "False", "reason": "ReconcileError", "message": refused}]),
    );
    let out = compose_with(None, &[addressed.clone(), missing]);
    let (status, reason, message) = gateway_ready(&out);
    assert_eq!((status, reason), (Status::ConditionFalse, "CertificatePending"));
    for named in [
        "status.gateway.caCertificate is empty",
        "ConfigMap modelplane-system/modelplane-cluster-gateway-ca",
        "CA Secret cert-manager/modelplane-cluster-gateway-ca",
        "Secret modelplane-system/cluster-gateway-tls",
        "(provider-kubernetes: cannot get object: configmaps \"modelplane-cluster-gateway-ca\" not found!",
    ] {
        assert!(message.contains(named), "{named:?} not in {message}");
    }
    assert!(
        message.len() < 1200,
        "the provider's words are bounded: {} bytes",
        message.len()
    );
    assert!(
        out.status["gateway"]["caCertificate"].is_null(),
        "{}",
        out.status["gateway"]
    );

    // What the ConfigMap holds is not a CA certificate: not trusted, so still pending.
    let bogus = observed_gateway_object(
        tls::CA_SUFFIX,
        json!({"data": {"ca.crt": "not a certificate"}}),
        json!([]),
    );
    let (_, reason, _) = gateway_ready(&compose_with(None, &[addressed.clone(), bogus]));
    assert_eq!(reason, "CertificatePending");

    // Published, but the client validation not held on the cluster yet: the gateway would answer anyone.
    let published =
        observed_gateway_object(tls::CA_SUFFIX, json!({"data": {"ca.crt": CLUSTER_CA}}), json!([]));
    let out = compose_with(None, &[addressed.clone(), published.clone()]);
    let (status, reason, message) = gateway_ready(&out);
    assert_eq!((status, reason), (Status::ConditionFalse, "ClientPolicyPending"));
    assert!(
        message.starts_with("status.gateway.admits is Anyone: "),
        "{message}"
    );
    assert!(
        message.contains("ClientTrafficPolicy modelplane-system/cluster-gateway-clients"),
        "{message}"
    );
    assert_eq!(out.status["gateway"]["caCertificate"], json!(CLUSTER_CA));

    // The placeholder's validation held: the gateway is ready for the fleet (it refuses everyone until a fleet
    // CA is trusted, which is the fleet gateway's to publish).
    let trust = observed_gateway_object(
        "client-cas",
        json!({"data": {"ca.crt": REFUSE_ALL_CA}}),
        json!([]),
    );
    let policy = observed_gateway_object("client-policy", json!({"kind": "ClientTrafficPolicy"}), json!([]));
    let out = compose_with(None, &[addressed.clone(), published.clone(), trust, policy]);
    assert_eq!(
        gateway_ready(&out),
        (Status::ConditionTrue, "Available", String::new())
    );
    assert_eq!(out.status["gateway"]["admits"], "Nobody");

    // A cluster that chose to admit anyone before a fleet CA is ready as it is.
    let chosen = existing_with(json!({"beforeFleetClientCA": "AdmitAll"}));
    let out = compose_for(&chosen, None, &[addressed, published]);
    assert_eq!(gateway_ready(&out).1, "Available");
    assert_eq!(out.status["gateway"]["admits"], "Anyone");
}
