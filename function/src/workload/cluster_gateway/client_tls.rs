//! Mutual TLS on the hop from the fleet gateway to a cluster gateway: the other direction of [`super::tls`]. A
//! cluster gateway's address is public (its load balancer), so without this anyone who found it would reach the
//! engines behind it and bypass the fleet gateway's callers, quotas and model routing.
//!
//! - **The fleet gateway's side** (composed by the InferenceGateway on the cluster it runs on): cert-manager issues,
//!   from the cluster's self-signed issuer, a fleet client CA, and from it the client certificate Envoy presents to
//!   every TLS backend ([`envoy_proxy`], attached to the fleet Gateway). Both private keys stay on that cluster.
//!   trust-manager republishes the CA's public certificate into a ConfigMap, which the InferenceGateway observes and
//!   reports in `status.clientCertificateAuthorities` once its Envoy presents the certificate.
//! - **Every cluster gateway** (composed by each InferenceCluster): the CAs of every InferenceGateway, in one
//!   ConfigMap, and an Envoy Gateway ClientTrafficPolicy that makes its HTTPS listener require and verify a client
//!   certificate under them. A cluster learns a CA only after the gateway presents certificates under it, so no
//!   request the fleet gateway sends is refused while the trust spreads. Before any InferenceGateway publishes a
//!   CA, the policy requires a certificate under [`REFUSE_ALL_CA`], which no caller can present, so engines placed
//!   early answer nobody; an InferenceCluster may opt out (`spec.gateway.beforeFleetClientCA: AdmitAll`).

use crate::wire::tree::{Tree, tree};

use super::{
    CLUSTER_GATEWAY,
    tls::{self, CA_KEY},
};
use crate::workload::well_known::GATEWAY_NAMESPACE;

/// The fleet client CA: its Certificate and Secret (in cert-manager's namespace, where trust-manager reads sources
/// and a ClusterIssuer its CA), its ClusterIssuer, its Bundle, and the ConfigMap the Bundle writes.
pub const CLIENT_CA: &str = "modelplane-fleet-client-ca";
/// The client certificate's Secret, next to the fleet Gateway: Envoy Gateway reads an EnvoyProxy's client
/// certificate from the EnvoyProxy's own namespace.
pub const CLIENT_CERTIFICATE: &str = "fleet-gateway-client";
/// The EnvoyProxy the fleet Gateway names in `spec.infrastructure.parametersRef`.
pub const FLEET_PROXY: &str = "fleet-gateway-proxy";
/// On each cluster gateway: the ConfigMap of every fleet client CA it trusts, and the policy requiring one.
pub const TRUSTED_CLIENT_CAS: &str = "modelplane-fleet-client-cas";
pub const CLIENT_POLICY: &str = "cluster-gateway-clients";
/// The CA a cluster gateway trusts while it trusts no fleet gateway's: generated once with its private key written
/// to /dev/null, so no client certificate under it exists. Requiring a certificate under it refuses every caller
/// at the TLS handshake, by the same ClientTrafficPolicy that later names the fleet CAs, so there is no moment
/// where a listener, route or later policy could override a separate deny. It is a public certificate: knowing it
/// grants nothing.
pub const REFUSE_ALL_CA: &str = include_str!("refuse-all-ca.pem");
/// At most this many CAs are trusted at once: each InferenceGateway publishes one, two while one rotates.
pub const MAX_TRUSTED_CAS: usize = 16;
/// The readiness of a cert-manager Certificate: issued for its current spec. Right after a spec change the old
/// Ready condition still stands until cert-manager looks again; its `observedGeneration` tells them apart.
pub const CERTIFICATE_READY: &str = "has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True' && has(c.observedGeneration) && c.observedGeneration == object.metadata.generation)";
/// The readiness of the published CA: trust-manager wrote it.
pub const CA_PUBLISHED: &str = "has(object.data) && 'ca.crt' in object.data";

/// The fleet client CA's Certificate, made as each cluster's CA is (ten years, a new ECDSA key when reissued).
pub fn client_ca() -> Tree {
    tls::ca_certificate(CLIENT_CA, "Modelplane fleet gateway client CA")
}

pub fn client_issuer() -> Tree {
    tls::ca_issuer(CLIENT_CA)
}

/// The organizational unit that names the CA a client certificate is to be issued under (`sha256:<hex>`, cut to
/// fit X.520's 64 characters). cert-manager reissues a Certificate whose spec changed, but not one whose CA did,
/// so changing this is how the certificate moves to a new CA, and only once every cluster trusts it.
pub fn issued_under(ca_fingerprint: &str) -> String {
    let hex = ca_fingerprint.trim_start_matches("sha256:");
    format!("modelplane-ca-{}", &hex[..hex.len().min(32)])
}

/// The certificate the fleet gateway presents: client auth only, so it cannot serve as any gateway's. `ca` is
/// [`issued_under`] of the CA it is to be issued under.
pub fn client_certificate(ca: &str) -> Tree {
    tree!({
        "apiVersion": tls::CERT_MANAGER_API, "kind": "Certificate",
        "metadata": {"name": CLIENT_CERTIFICATE, "namespace": GATEWAY_NAMESPACE},
        "spec": {
            "secretName": CLIENT_CERTIFICATE,
            "commonName": "modelplane-fleet-gateway",
            "subject": {"organizationalUnits": [ca]},
            "usages": ["client auth", "digital signature"],
            "privateKey": tls::private_key(),
            "issuerRef": tls::issuer_ref(CLIENT_CA),
        },
    })
}

/// Publishes the CA's public certificate alone into the gateway's namespace.
pub fn client_ca_bundle() -> Tree {
    tls::publishing_bundle(CLIENT_CA)
}

/// The published CA, to observe.
pub fn published_client_ca() -> Tree {
    tree!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CLIENT_CA, "namespace": GATEWAY_NAMESPACE}})
}

/// The fleet Envoy's settings: present the client certificate on every TLS connection to a backend. A server
/// that asks for none (a public provider's API) gets none.
pub fn envoy_proxy() -> Tree {
    tree!({
        "apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "EnvoyProxy",
        "metadata": {"name": FLEET_PROXY, "namespace": GATEWAY_NAMESPACE},
        "spec": {"backendTLS": {"clientCertificateRef": {"group": "", "kind": "Secret", "name": CLIENT_CERTIFICATE}}},
    })
}

/// What the fleet Gateway names to take [`envoy_proxy`]'s settings.
pub fn parameters_ref() -> Tree {
    tree!({"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": FLEET_PROXY})
}

/// On a cluster gateway: the ConfigMap of the CAs it trusts (one PEM bundle, in the key Envoy Gateway reads) and
/// the policy that makes its listener require a client certificate under one of them.
pub fn trust(cas: &[String]) -> [Tree; 2] {
    let bundle = cas.join("\n");
    [
        tree!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": TRUSTED_CLIENT_CAS, "namespace": GATEWAY_NAMESPACE},
            "data": {CA_KEY: bundle},
        }),
        tree!({
            "apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "ClientTrafficPolicy",
            "metadata": {"name": CLIENT_POLICY, "namespace": GATEWAY_NAMESPACE},
            "spec": {
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": CLUSTER_GATEWAY}],
                "tls": {"clientValidation": {
                    "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": TRUSTED_CLIENT_CAS}],
                }},
            },
        }),
    ]
}
