use serde_json::{Value, json};

use super::compose;
use crate::compose::fixtures::{
    self, observed_owner, request, run, sanitized_owned_secret, with_observed, with_required,
};
use crate::proto::v1::Status;
use crate::workload::cluster_gateway::client_tls;

fn gateway(spec: Value, status: Value) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway",
           "metadata": {"name": "fleet"}, "spec": spec, "status": status})
}

fn cluster(name: &str, pc: &str) -> Value {
    fixtures::cluster(name).provider_config(pc).build()
}

#[test]
fn an_unnamed_cluster_is_the_first_reachable_one_and_stays_chosen() {
    let clusters = [
        cluster("a-unreachable", ""),
        cluster("b", "b-pc"),
        cluster("c", "c-pc"),
    ];
    let req = with_required(request(gateway(json!({}), json!({}))), "clusters", &clusters);
    let out = run(compose, &req).unwrap();
    assert_eq!(out.status["clusterName"], "b");
    assert_eq!(
        out.resources["callers-policy"].object["spec"]["providerConfigRef"]["name"],
        "b-pc"
    );
    let kept = gateway(json!({}), json!({"clusterName": "c"}));
    let out = run(compose, &with_required(request(kept), "clusters", &clusters)).unwrap();
    assert_eq!(out.status["clusterName"], "c");
}

#[test]
fn the_address_comes_from_the_observed_gateway() {
    let xr = gateway(json!({"clusterName": "b"}), json!({}));
    let observed = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}],
                          "atProvider": {"manifest": {"status": {"addresses": [{"value": "203.0.113.9"}]}}}}});
    let req = with_observed(
        with_required(request(xr), "clusters", &[cluster("b", "b-pc")]),
        "gateway",
        &observed,
    );
    let out = run(compose, &req).unwrap();
    assert_eq!(out.status["address"], "203.0.113.9");
    assert_eq!(out.ready, Some(false), "the callers policy is not observed yet");
    let out = run(compose, &with_observed(req, "callers-policy", &observed)).unwrap();
    assert_eq!(out.ready, Some(true));
    assert_eq!(out.status["endpoints"]["openAI"], "http://203.0.113.9/v1");
}

#[test]
fn a_named_cluster_that_does_not_exist_is_reported() {
    let xr = gateway(json!({"clusterName": "nope"}), json!({}));
    let out = run(
        compose,
        &with_required(request(xr), "clusters", &[cluster("b", "b-pc")]),
    )
    .unwrap();
    let c = out.conditions.iter().find(|c| c.type_ == "GatewayReady").unwrap();
    assert_eq!((c.status, c.reason), (Status::ConditionFalse, "ClusterNotReady"));
    assert!(
        c.message
            .as_deref()
            .unwrap_or_default()
            .contains("spec.clusterName")
    );
    assert!(out.resources.is_empty());
    assert_eq!(out.ready, Some(false));
}

fn ready_object() -> Value {
    json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
}

/// A caller Secret's copy as provider-kubernetes reports it once filled, with `--sanitize-secrets`.
fn filled_copy() -> Value {
    json!({
        "metadata": {"finalizers": ["finalizer.managedresource.crossplane.io"], "generation": 2},
        "spec": {"references": [{"patchesFrom": {"name": "team-a"}}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"},
                                  {"type": "Synced", "status": "True", "observedGeneration": 2}],
                   "atProvider": {"manifest": sanitized_owned_secret(OWNER)}},
    })
}

const OWNER: &str = "inference-gateway-secret-owner";

fn with_auth() -> Value {
    gateway(
        json!({"clusterName": "b", "auth": {"apiKey": {"secretRefs": [{"name": "team-a"}, {"name": "team-b"}]}}}),
        json!({}),
    )
}

fn policy_spec(out: &crate::compose::Output) -> Value {
    out.resources["callers-policy"].object["spec"]["forProvider"]["manifest"]["spec"].clone()
}

#[test]
fn every_request_is_denied_until_a_callers_key_is_on_the_cluster() {
    let clusters = [cluster("b", "b-pc")];
    for xr in [gateway(json!({"clusterName": "b"}), json!({})), with_auth()] {
        let out = run(compose, &with_required(request(xr), "clusters", &clusters)).unwrap();
        let spec = policy_spec(&out);
        assert_eq!(spec["authorization"]["defaultAction"], "Deny", "{spec}");
        assert!(spec.get("apiKeyAuth").is_none());
        assert!(
            !out.resources.contains_key("gateway"),
            "no listener before the policy that guards it"
        );
        let auth = out.conditions.iter().find(|c| c.type_ == "CallerAuth").unwrap();
        assert_eq!(auth.status, Status::ConditionFalse);
        assert!(auth.message.as_deref().unwrap().contains("refused"));
    }
}

#[test]
fn caller_secrets_are_copied_by_reference_and_only_filled_copies_are_trusted() {
    let req = with_required(request(with_auth()), "clusters", &[cluster("b", "b-pc")]);
    let out = run(compose, &req).unwrap();
    for name in ["team-a", "team-b"] {
        let copy = &out.resources[&format!("callers-{name}")].object;
        assert_eq!(copy["metadata"]["namespace"], "modelplane-system");
        assert_eq!(copy["spec"]["forProvider"]["manifest"]["kind"], "Secret");
        assert!(copy["spec"]["forProvider"]["manifest"].get("data").is_none());
    }
    let owner = &out.resources["secret-owner"].object;
    assert_eq!(owner["spec"]["forProvider"]["manifest"]["kind"], "ConfigMap");
    assert_eq!(
        owner["spec"]["forProvider"]["manifest"]["metadata"]["name"],
        OWNER
    );
    let req = with_observed(
        with_observed(req, "callers-team-a", &filled_copy()),
        "callers-policy",
        &ready_object(),
    );
    let req = with_observed(req, "secret-owner", &observed_owner(OWNER));
    let out = run(compose, &req).unwrap();
    let copy = &out.resources["callers-team-a"].object;
    assert_eq!(
        copy["spec"]["forProvider"]["manifest"]["metadata"]["ownerReferences"][0]["uid"],
        crate::compose::fixtures::OWNER_UID,
        "deleting the gateway deletes the owner, and the cluster's garbage collector the copy"
    );
    assert_eq!(
        copy["spec"]["references"][0]["patchesFrom"],
        json!({"apiVersion": "v1", "kind": "Secret", "name": "team-a", "namespace": "modelplane-system",
               "fieldPath": "data"})
    );
    let spec = policy_spec(&out);
    assert_eq!(
        spec["apiKeyAuth"]["credentialRefs"],
        json!([{"group": "", "kind": "Secret", "name": "callers-team-a"}]),
        "team-b's copy is not filled yet"
    );
    assert_eq!(spec["apiKeyAuth"]["forwardClientIDHeader"], "x-modelplane-caller");
    assert_eq!(spec["apiKeyAuth"]["sanitize"], true);
    assert!(spec.get("authorization").is_none());
    assert!(out.resources.contains_key("gateway"), "the policy is in place");
}

#[test]
fn a_caller_secret_the_provider_cannot_read_is_named_by_its_field_with_the_providers_words() {
    // team-b was made in the team's namespace, not Modelplane's: provider-kubernetes cannot find it there.
    let mut refused = filled_copy();
    refused["spec"]["references"] = json!([{"patchesFrom": {"name": "team-b"}}]);
    refused["status"]["conditions"] = json!([{"type": "Synced", "status": "False", "observedGeneration": 2,
        "reason": "ReconcileError", "message": "cannot get referenced Secret modelplane-system/team-b: not found"}]);
    let req = with_required(request(with_auth()), "clusters", &[cluster("b", "b-pc")]);
    let req = with_observed(req, "callers-team-a", &filled_copy());
    let req = with_observed(req, "callers-team-b", &refused);
    let req = with_observed(req, "secret-owner", &observed_owner(OWNER));
    let out = run(compose, &req).unwrap();
    let auth = out.conditions.iter().find(|c| c.type_ == "CallerAuth").unwrap();
    assert_eq!(
        (auth.status, auth.reason),
        (Status::ConditionTrue, "SomeKeysPending")
    );
    assert_eq!(
        auth.message.as_deref().unwrap(),
        "1 of 2 caller Secrets in effect; waiting for spec.auth.apiKey.secretRefs[1] (Secret \
         modelplane-system/team-b): provider-kubernetes cannot copy it: cannot get referenced Secret \
         modelplane-system/team-b: not found"
    );
}

#[test]
fn a_caller_selector_is_never_resolved_so_every_request_stays_refused() {
    for auth in [
        json!({"secretSelector": {"matchLabels": {"modelplane.ai/inference-keys": "true"}}}),
        json!({"apiKey": {"secretSelector": {"matchLabels": {"modelplane.ai/inference-keys": "true"}}}}),
    ] {
        let xr = gateway(json!({"clusterName": "b", "auth": auth}), json!({}));
        let req = with_required(request(xr), "clusters", &[cluster("b", "b-pc")]);
        let out = run(compose, &req).unwrap();
        assert_eq!(policy_spec(&out)["authorization"]["defaultAction"], "Deny");
        assert!(
            out.warnings.iter().any(|w| w.contains("secretRefs")),
            "{:?}",
            out.warnings
        );
        assert!(
            req.required_resources.keys().all(|k| k == "clusters"),
            "no Secret is ever required"
        );
        assert!(out.requirements.values().all(|r| r.kind != "Secret"));
    }
}

#[test]
fn a_tls_gateway_listens_only_on_https_with_its_copied_certificate() {
    let xr = gateway(
        json!({"clusterName": "b", "hostname": "inference.example.com",
               "tls": {"certificateRefs": [{"name": "fleet-tls"}]}}),
        json!({}),
    );
    let req = with_observed(
        with_required(request(xr), "clusters", &[cluster("b", "b-pc")]),
        "callers-policy",
        &ready_object(),
    );
    let out = run(compose, &req).unwrap();
    let copy = &out.resources["certificate-fleet-tls"].object["spec"]["forProvider"]["manifest"];
    assert_eq!(copy["type"], "kubernetes.io/tls");
    let listeners = &out.resources["gateway"].object["spec"]["forProvider"]["manifest"]["spec"]["listeners"];
    assert_eq!(listeners.as_array().unwrap().len(), 1, "no plaintext listener");
    assert_eq!(listeners[0]["protocol"], "HTTPS");
    assert_eq!(listeners[0]["hostname"], "inference.example.com");
    assert_eq!(
        listeners[0]["tls"]["certificateRefs"][0]["name"],
        "certificate-fleet-tls"
    );
}

#[test]
fn bad_auth_and_tls_are_fatal_naming_the_field() {
    for (spec, field) in [
        (
            json!({"auth": {"secretRefs": [{"name": "a"}], "apiKey": {"secretRefs": [{"name": "b"}]}}}),
            "spec.auth.apiKey",
        ),
        (
            json!({"auth": {"secretRefs": [{"name": "A"}]}}),
            "spec.auth.secretRefs[0].name",
        ),
        (
            json!({"auth": {"apiKey": {"secretRefs": []}}}),
            "spec.auth.apiKey.secretRefs",
        ),
        (
            json!({"auth": {"apiKey": {"secretRefs": [{"name": "a"}, {"name": "a"}]}}}),
            "spec.auth.apiKey.secretRefs",
        ),
        (
            json!({"auth": {"apiKey": {"secretRefs": [{"name": "Not_A_Name"}]}}}),
            "spec.auth.apiKey.secretRefs[0].name",
        ),
        (json!({"auth": {}}), "spec.auth.secretRefs"),
        (json!({"auth": {"apiKey": {}}}), "spec.auth.apiKey.secretRefs"),
        (json!({"tls": {"certificateRefs": [{"name": "t"}]}}), "spec.tls"),
        (
            json!({"hostname": "h.example.com", "tls": {"certificateRefs": []}}),
            "spec.tls.certificateRefs",
        ),
    ] {
        let err = run(compose, &request(gateway(spec.clone(), json!({})))).unwrap_err();
        assert_eq!(err.path, field, "{spec}: {err:?}");
    }
}

const CLIENT_CA: &str = include_str!("../../../../tests/fixtures/tls/fleet-client-ca.pem");
/// A CA published before `CLIENT_CA` (any other valid CA will do).
const OLD_CA: &str = include_str!("../../../../tests/fixtures/tls/cluster-gateway-ca.pem");

/// A cluster whose gateway reports requiring client certificates under the CAs `trusted`.
fn cluster_trusting(name: &str, trusted: &[&str]) -> Value {
    let mut cluster = cluster(name, &format!("{name}-pc"));
    let fingerprints: Vec<String> = trusted
        .iter()
        .map(|pem| crate::api::ca::fingerprint(pem).unwrap())
        .collect();
    cluster["status"]["gateway"] =
        json!({"address": "198.51.100.7", "trustedClientAuthorities": fingerprints});
    cluster
}

/// The gateway on cluster `b`, its Gateway observed with (`took_proxy`) or without the EnvoyProxy that presents
/// the client certificate, and `CLIENT_CA` published on the cluster.
fn client_ca_request(
    before: &[&str],
    clusters: &[Value],
    took_proxy: bool,
) -> crate::proto::v1::RunFunctionRequest {
    let xr = gateway(
        json!({"clusterName": "b"}),
        json!({"clientCertificateAuthorities": before}),
    );
    let ready = json!([{"type": "Ready", "status": "True"}]);
    let mut manifest = json!({"status": {"addresses": [{"value": "203.0.113.9"}]}});
    if took_proxy {
        manifest["spec"] = json!({"infrastructure": {"parametersRef": {
            "group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": "fleet-gateway-proxy"}}});
    }
    let gateway = json!({"status": {"conditions": ready, "atProvider": {"manifest": manifest}}});
    let published = json!({"status": {"conditions": ready,
                                      "atProvider": {"manifest": {"data": {"ca.crt": CLIENT_CA}}}}});
    let req = with_required(request(xr), "clusters", clusters);
    with_observed(
        with_observed(req, "gateway", &gateway),
        "client-ca-published",
        &published,
    )
}

#[test]
fn the_client_ca_is_published_only_once_the_gateway_presents_certificates_under_it() {
    let clusters = [cluster_trusting("b", &[])];
    let out = run(compose, &client_ca_request(&[], &clusters, false)).unwrap();
    assert!(
        out.status.get("clientCertificateAuthorities").is_none(),
        "{:?}",
        out.status
    );
    let gateway = &out.resources["gateway"].object["spec"]["forProvider"]["manifest"];
    assert!(
        gateway["spec"]["infrastructure"].is_null(),
        "the EnvoyProxy is not on the cluster yet"
    );
    let client = |out: &crate::compose::Output| {
        let c = out
            .conditions
            .iter()
            .find(|c| c.type_ == "ClientCertificate")
            .unwrap();
        (c.status, c.reason, c.message.clone().unwrap_or_default())
    };
    assert_eq!(client(&out).0, Status::ConditionFalse);
    let out = run(compose, &client_ca_request(&[], &clusters, true)).unwrap();
    assert_eq!(out.status["clientCertificateAuthorities"], json!([CLIENT_CA]));
    let (status, reason, message) = client(&out);
    assert_eq!((status, reason), (Status::ConditionTrue, "Presented"));
    assert!(
        message.ends_with("required by 0 of 1 cluster gateways"),
        "{message}"
    );
    let gateway = &out.resources["gateway"].object["spec"]["forProvider"]["manifest"];
    assert_eq!(
        gateway["spec"]["infrastructure"]["parametersRef"]["name"],
        "fleet-gateway-proxy"
    );
}

/// The client certificate as observed: its spec names the CA `under`, and cert-manager has issued it for that
/// spec (`issued`) or is still at it.
fn with_certificate(
    req: crate::proto::v1::RunFunctionRequest,
    under: &str,
    issued: bool,
) -> crate::proto::v1::RunFunctionRequest {
    let unit = client_tls::issued_under(&crate::api::ca::fingerprint(under).unwrap());
    let manifest = json!({"spec": {"subject": {"organizationalUnits": [unit]}}});
    let observed = json!({
        "spec": {"forProvider": {"manifest": manifest}},
        "status": {"conditions": [{"type": "Ready", "status": if issued { "True" } else { "False" }}],
                   "atProvider": {"manifest": manifest}},
    });
    with_observed(req, "client-certificate", &observed)
}

fn certificate_under(out: &crate::compose::Output) -> Value {
    out.resources["client-certificate"].object["spec"]["forProvider"]["manifest"]["spec"]["subject"]
        ["organizationalUnits"][0]
        .clone()
}

fn unit(ca: &str) -> Value {
    json!(client_tls::issued_under(
        &crate::api::ca::fingerprint(ca).unwrap()
    ))
}

/// The rotation of the module's docs, step by step: at no step is the certificate presented under a CA some
/// cluster does not trust.
#[test]
fn a_new_client_ca_is_trusted_everywhere_before_the_certificate_moves_and_the_old_goes_after() {
    // 1. The CA changed; one cluster does not trust the new one yet: both published, the certificate stays.
    let halfway = [
        cluster_trusting("b", &[OLD_CA, CLIENT_CA]),
        cluster_trusting("c", &[OLD_CA]),
    ];
    let req = with_certificate(client_ca_request(&[OLD_CA], &halfway, true), OLD_CA, true);
    let out = run(compose, &req).unwrap();
    assert_eq!(
        out.status["clientCertificateAuthorities"],
        json!([CLIENT_CA, OLD_CA])
    );
    assert_eq!(certificate_under(&out), unit(OLD_CA));

    // 2. Every cluster trusts it: the certificate's spec moves to it; the old CA stays while it is reissued.
    let everywhere = [
        cluster_trusting("b", &[OLD_CA, CLIENT_CA]),
        cluster_trusting("c", &[OLD_CA, CLIENT_CA]),
    ];
    let moving = |under: &str, issued: bool| {
        let req = client_ca_request(&[CLIENT_CA, OLD_CA], &everywhere, true);
        run(compose, &with_certificate(req, under, issued)).unwrap()
    };
    let out = moving(OLD_CA, true);
    assert_eq!(certificate_under(&out), unit(CLIENT_CA));
    assert_eq!(
        out.status["clientCertificateAuthorities"],
        json!([CLIENT_CA, OLD_CA])
    );
    let message = out
        .conditions
        .iter()
        .find(|c| c.type_ == "ClientCertificate")
        .and_then(|c| c.message.clone())
        .unwrap();
    assert!(
        message.ends_with("reissuing the certificate under it"),
        "{message}"
    );
    // cert-manager has the new spec but has not issued for it yet.
    let out = moving(CLIENT_CA, false);
    assert_eq!(
        out.status["clientCertificateAuthorities"],
        json!([CLIENT_CA, OLD_CA])
    );

    // 3. Reissued under the new CA: the old one goes.
    let out = moving(CLIENT_CA, true);
    assert_eq!(out.status["clientCertificateAuthorities"], json!([CLIENT_CA]));
    assert_eq!(certificate_under(&out), unit(CLIENT_CA));
}

#[test]
fn the_first_certificate_waits_for_the_published_ca_and_is_issued_under_it() {
    let clusters = [cluster_trusting("b", &[])];
    let xr = gateway(json!({"clusterName": "b"}), json!({}));
    let out = run(compose, &with_required(request(xr), "clusters", &clusters)).unwrap();
    assert!(
        !out.resources.contains_key("client-certificate"),
        "no certificate before the CA it is issued under is known"
    );
    let out = run(compose, &client_ca_request(&[], &clusters, false)).unwrap();
    assert_eq!(certificate_under(&out), unit(CLIENT_CA));
}

#[test]
fn what_was_published_stays_while_the_current_ca_cannot_be_read_and_only_valid_cas_are_kept() {
    let clusters = [cluster_trusting("b", &[OLD_CA])];
    // The Gateway has not taken the EnvoyProxy (or its observation is lost): nothing new to say.
    let out = run(
        compose,
        &client_ca_request(&[OLD_CA, "not a certificate"], &clusters, false),
    )
    .unwrap();
    assert_eq!(out.status["clientCertificateAuthorities"], json!([OLD_CA]));
}
