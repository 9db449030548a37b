//! TLS on the hop from the fleet gateway to a cluster gateway, which may cross the internet. Each workload cluster
//! is its own certificate authority: cert-manager issues, from a self-signed issuer, a CA certificate, and from that
//! CA the cluster gateway's serving certificate for [`SERVER_NAME`], the name the fleet gateway sends as SNI. Both
//! private keys are generated on the cluster and never leave it. Only the CA's public certificate travels:
//! trust-manager republishes `ca.crt` alone into a ConfigMap, which the InferenceCluster observes and reports in
//! its status, and each endpoint's Backend on the fleet gateway's cluster trusts exactly that CA.
//!
//! Why a ConfigMap and not the CA's Secret: observing the Secret would put its `tls.key` into an Object's status
//! (provider-kubernetes redacts it only with `--sanitize-secrets`, and then `ca.crt` is gone too).

use serde_json::Value;

use crate::wire::tree::{Tree, tree};

use crate::{
    api::ca::valid_ca,
    stack::{StackObject, components::CERT_MANAGER},
    workload::well_known::GATEWAY_NAMESPACE,
};

/// The name the cluster gateway's certificate is issued for and the fleet gateway asks for. It resolves
/// nowhere: the fleet gateway connects to the gateway's address and only sends this name, and every cluster has
/// its own CA, so one cluster's certificate is never trusted for another.
pub const SERVER_NAME: &str = "cluster-gateway.modelplane.internal";
/// The `kubernetes.io/tls` Secret the cluster gateway's HTTPS listener serves, next to the Gateway.
pub const SERVING_SECRET: &str = "cluster-gateway-tls";
/// The CA: its Certificate and Secret (in cert-manager's namespace, which is trust-manager's trust namespace and
/// where a ClusterIssuer reads its CA from), its ClusterIssuer, its trust-manager Bundle and the ConfigMap the
/// Bundle writes into the gateway's namespace.
const CA: &str = "modelplane-cluster-gateway-ca";
/// The ConfigMap trust-manager publishes the CA's public certificate in, in the gateway's namespace.
pub const PUBLISHED_CA: &str = CA;
pub(super) const SELF_SIGNED_ISSUER: &str = "modelplane-selfsigned";
/// The key of the CA's public certificate, in the CA's Secret and in the published ConfigMap alike.
pub const CA_KEY: &str = "ca.crt";
/// The suffix of the observed ConfigMap's object in the cluster-gateway component.
pub const CA_SUFFIX: &str = "ca-published";
/// Ten years: the fleet side trusts this CA and nothing else, so it rotates rarely; the serving certificate under
/// it renews every 60 days (cert-manager's default 90-day life, renewed at two thirds).
const CA_DURATION: &str = "87600h";
pub(super) const CERT_MANAGER_API: &str = "cert-manager.io/v1";

pub(super) fn issuer_ref(name: &str) -> Tree {
    tree!({"group": "cert-manager.io", "kind": "ClusterIssuer", "name": name})
}

/// ECDSA P-256, a new key on every renewal.
pub(super) fn private_key() -> Tree {
    tree!({"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"})
}

/// The CA chain, the serving certificate, the Bundle that publishes the CA, and the published ConfigMap, read.
pub fn objects() -> Vec<StackObject> {
    vec![
        StackObject::created(
            "issuer-selfsigned",
            tree!({
                "apiVersion": CERT_MANAGER_API, "kind": "ClusterIssuer",
                "metadata": {"name": SELF_SIGNED_ISSUER},
                "spec": {"selfSigned": {}},
            }),
        ),
        StackObject::created("ca", ca_certificate(CA, "Modelplane cluster gateway CA")),
        StackObject::created("issuer-ca", ca_issuer(CA)),
        StackObject::created(
            "serving-certificate",
            tree!({
                "apiVersion": CERT_MANAGER_API, "kind": "Certificate",
                "metadata": {"name": SERVING_SECRET, "namespace": GATEWAY_NAMESPACE},
                "spec": {
                    "secretName": SERVING_SECRET,
                    "dnsNames": [SERVER_NAME],
                    "usages": ["server auth", "digital signature"],
                    "privateKey": private_key(),
                    "issuerRef": issuer_ref(CA),
                },
            }),
        ),
        StackObject::created("ca-bundle", publishing_bundle(CA)),
        StackObject::observed(
            CA_SUFFIX,
            tree!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CA, "namespace": GATEWAY_NAMESPACE}}),
            "has(object.data) && 'ca.crt' in object.data",
        ),
    ]
}

/// A self-signed CA Certificate `name` (its Secret of the same name in cert-manager's namespace, where a
/// ClusterIssuer reads a CA from), living [`CA_DURATION`].
pub fn ca_certificate(name: &str, common_name: &str) -> Tree {
    tree!({
        "apiVersion": CERT_MANAGER_API, "kind": "Certificate",
        "metadata": {"name": name, "namespace": CERT_MANAGER.namespace},
        "spec": {
            "isCA": true,
            "commonName": common_name,
            "secretName": name,
            "duration": CA_DURATION,
            "privateKey": private_key(),
            "issuerRef": issuer_ref(SELF_SIGNED_ISSUER),
        },
    })
}

/// The ClusterIssuer `name` signing with the CA [`ca_certificate`] made under that name.
pub fn ca_issuer(name: &str) -> Tree {
    tree!({
        "apiVersion": CERT_MANAGER_API, "kind": "ClusterIssuer",
        "metadata": {"name": name},
        "spec": {"ca": {"secretName": name}},
    })
}

/// A trust-manager Bundle republishing `ca.crt` alone of the CA Secret `name` (in cert-manager's namespace, the
/// trust namespace) as the ConfigMap `name` in the gateway's namespace: the public certificate travels, the key
/// stays in its Secret.
pub fn publishing_bundle(name: &str) -> Tree {
    tree!({
        "apiVersion": "trust.cert-manager.io/v1alpha1", "kind": "Bundle",
        "metadata": {"name": name},
        "spec": {
            "sources": [{"secret": {"name": name, "key": CA_KEY}}],
            "target": {
                "configMap": {"key": CA_KEY},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": GATEWAY_NAMESPACE}},
            },
        },
    })
}

/// The HTTPS listener of the cluster gateway: the only one it has, so no replica is reachable in plaintext.
pub fn listener() -> Tree {
    tree!({
        "name": "https", "protocol": "HTTPS", "port": 443,
        "tls": {"mode": "Terminate", "certificateRefs": [{"group": "", "kind": "Secret", "name": SERVING_SECRET}]},
        "allowedRoutes": {"namespaces": {"from": "All"}},
    })
}

/// The CA certificate the published ConfigMap holds, as observed (`status.atProvider.manifest` of its Object):
/// one PEM certificate that parses as a trust anchor, or nothing. Whatever else a ConfigMap of that name holds is
/// not trusted.
pub fn published_ca(observed_object: &Value) -> Option<String> {
    let pem = observed_object
        .pointer("/status/atProvider/manifest/data")?
        .get(CA_KEY)?
        .as_str()?;
    valid_ca(pem).ok().map(|()| pem.to_owned())
}
