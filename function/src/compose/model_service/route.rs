//! The Envoy AI Gateway objects one ModelService puts on a fleet gateway's cluster: per routed endpoint an Envoy
//! Gateway `Backend` (where to connect, with TLS for https) and an `AIServiceBackend` (it speaks OpenAI under a
//! path prefix), and one `AIGatewayRoute` matching the request's model name.

use std::collections::BTreeSet;

use serde_json::Value;

use super::weights::Backend;
use crate::{
    api::routing::{API_KEY_FIELD, EndpointTls, EndpointUrl},
    compose::shared::GATEWAY_NAME,
    proto::v1::Resource,
    wire::tree::{Tree, fields, tree},
};

use crate::workload::well_known::GATEWAY_NAMESPACE;
/// Envoy AI Gateway copies the body's `model` into this header before routing.
pub const MODEL_HEADER: &str = "x-ai-eg-model";

/// A routed endpoint: the weights module's backend plus what the ModelEndpoint says about reaching it.
pub struct Routed<'a> {
    pub backend: &'a Backend,
    /// The ModelEndpoint's namespace on the control plane: the service's, or one granted to it.
    pub namespace: &'a str,
    pub url: &'a EndpointUrl,
    /// The OpenAI API prefix on the backend (`/v1` unless the URL or `rewritePath` says otherwise).
    pub prefix: String,
    /// The AI Gateway schema the backend speaks (`OpenAI`, `Anthropic`).
    pub schema: &'a str,
    pub model_override: Option<&'a str>,
    /// The provider key, in a Secret of the endpoint's namespace on the control plane.
    pub api_key: Option<&'a str>,
    /// The private CA and server name an https backend is checked against (a replica's cluster gateway).
    pub tls: Option<&'a EndpointTls>,
}

/// The Secret on the gateway's cluster that holds an endpoint's provider key, copied there by reference
/// ([`remote::secret_copy`](crate::compose::remote::secret_copy)) so the key never passes through the function.
pub fn api_key_secret_name(name: &str) -> String {
    format!("{name}-api-key")
}

/// The ConfigMap on the gateway's cluster that owns the service's key copies there
/// ([`remote::secret_copy::copy_owner`](crate::compose::remote::secret_copy::copy_owner)).
pub fn secret_owner_name(service: &str) -> String {
    format!("{service}-secret-owner")
}

/// `secret` is the endpoint's Secret in its namespace on the control plane; its `apiKey` is what is sent.
pub fn api_key_reference(namespace: &str, secret: &str) -> Tree {
    crate::compose::remote::secret_copy::reference(namespace, secret, &format!("data.{API_KEY_FIELD}"))
}

/// Makes the gateway send the endpoint's key (as `Authorization: Bearer`) on every request to it.
pub fn api_key_policy(name: &str, namespace: &str) -> Tree {
    tree!({
        "apiVersion": "aigateway.envoyproxy.io/v1beta1",
        "kind": "BackendSecurityPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": "APIKey",
            "apiKey": {"secretRef": {"name": api_key_secret_name(name)}},
            "targetRefs": [{"group": "aigateway.envoyproxy.io", "kind": "AIServiceBackend", "name": name}],
        },
    })
}

/// Name of the objects composed for `endpoint` under `service`: readable when short, hashed to fit a DNS label
/// when not (two long names sharing a prefix still differ).
pub fn backend_name(service: &str, endpoint: &str) -> String {
    let full = format!("{service}-{endpoint}");
    // A granted namespace's endpoint (`<namespace>/<name>`) is always hashed: `a-b-c` could be the service's own
    // endpoint `b-c` or namespace `b`'s endpoint `c`.
    if full.len() <= 63 && !endpoint.contains('/') {
        return full;
    }
    let digest = fnv1a(full.as_bytes());
    let full = full.replace('/', "-");
    let mut head: String = full.chars().take(63 - 9).collect();
    while head.ends_with('-') {
        head.pop();
    }
    format!("{head}-{digest:08x}")
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, &b| {
        (hash ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The ConfigMap on the gateway's cluster holding the CA a backend with a private CA is checked against.
pub fn ca_config_map_name(name: &str) -> String {
    format!("{name}-ca")
}

/// The CA of a backend with a private one, in the key Envoy Gateway reads a trust anchor from.
pub fn ca_config_map(name: &str, namespace: &str, tls: &EndpointTls) -> Tree {
    tree!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": ca_config_map_name(name), "namespace": namespace},
        "data": {crate::workload::cluster_gateway::tls::CA_KEY: &tls.ca_certificate},
    })
}

pub fn backend(name: &str, namespace: &str, url: &EndpointUrl, private_ca: Option<&EndpointTls>) -> Tree {
    let endpoint = if url.is_ip() {
        tree!({"ip": {"address": &url.host, "port": url.port}})
    } else {
        tree!({"fqdn": {"hostname": &url.host, "port": url.port}})
    };
    let mut spec = fields!({"endpoints": [endpoint]});
    match (url.tls, private_ca) {
        // A cluster gateway: trusted only under its own cluster's CA, for the name that CA issued it.
        (true, Some(tls)) => {
            let tls = tree!({
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": ca_config_map_name(name)}],
                "sni": &tls.server_name,
            });
            spec.insert("tls", tls);
        }
        // An external provider presents a publicly trusted certificate for its own name.
        (true, None) => {
            let mut tls = fields!({"wellKnownCACertificates": "System"});
            if !url.is_ip() {
                tls.insert("sni", &url.host);
            }
            spec.insert("tls", tls);
        }
        (false, _) => {}
    }
    tree!({
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "Backend",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

pub fn service_backend(name: &str, namespace: &str, schema: &str, prefix: &str) -> Tree {
    tree!({
        "apiVersion": "aigateway.envoyproxy.io/v1beta1",
        "kind": "AIServiceBackend",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schema": {"name": schema, "prefix": prefix},
            "backendRef": {"group": "gateway.envoyproxy.io", "kind": "Backend", "name": name},
        },
    })
}

/// The backend names the route lists as last applied on the gateway's cluster (the observed Object's
/// manifest), empty when it is not observed.
pub fn applied_backends(observed: Option<&Resource>) -> BTreeSet<String> {
    let Some(object) = observed
        .and_then(|r| r.resource.as_ref())
        .and_then(|r| r.to_json().ok())
    else {
        return BTreeSet::new();
    };
    object
        .pointer("/status/atProvider/manifest/spec/rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|rule| rule["backendRefs"].as_array())
        .flatten()
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect()
}

/// The route answering `model: <namespace>/<service>`. Only composed with at least one backend: a route with
/// none would answer every request with an error instead of the model being absent from `/v1/models`.
pub fn ai_gateway_route(
    service: &str,
    namespace: &str,
    model: &str,
    routed: &[Routed<'_>],
    request_timeout: &str,
) -> Tree {
    let backend_refs: Vec<Tree> = routed
        .iter()
        .map(|r| {
            let mut reference = fields!({
                "name": backend_name(service, &r.backend.endpoint),
                "priority": r.backend.priority,
                "weight": r.backend.weight,
            });
            if let Some(model) = r.model_override {
                reference.insert("modelNameOverride", model);
            }
            Tree::from(reference)
        })
        .collect();
    tree!({
        "apiVersion": "aigateway.envoyproxy.io/v1beta1",
        "kind": "AIGatewayRoute",
        "metadata": {"name": service, "namespace": namespace},
        "spec": {
            "parentRefs": [{
                "group": "gateway.networking.k8s.io", "kind": "Gateway",
                "name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE,
            }],
            "rules": [{
                "matches": [{"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": model}]}],
                "backendRefs": backend_refs,
                "timeouts": {"request": request_timeout},
                "modelsOwnedBy": namespace,
            }],
            "llmRequestCosts": [
                {"metadataKey": "llm_input_token", "type": "InputToken"},
                {"metadataKey": "llm_output_token", "type": "OutputToken"},
                {"metadataKey": "llm_total_token", "type": "TotalToken"},
            ],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::backend_name;

    #[test]
    fn backend_names_fit_a_dns_label_and_stay_distinct() {
        assert_eq!(backend_name("qwen", "qwen-use1-0"), "qwen-qwen-use1-0");
        let long_a = backend_name(&"s".repeat(40), &format!("{}-a", "e".repeat(40)));
        let long_b = backend_name(&"s".repeat(40), &format!("{}-b", "e".repeat(40)));
        assert_ne!(long_a, long_b);
        assert!(long_a.len() <= 63 && long_b.len() <= 63);
    }
}
