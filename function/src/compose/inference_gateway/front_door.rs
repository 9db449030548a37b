//! What the fleet gateway puts in front of every route: who may call (Envoy Gateway's API-key auth, keys copied
//! from control-plane Secrets by reference) and the certificate it presents (also copied by reference). Nothing
//! here reads a Secret: the function only names them.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::{
    api::routing::{InferenceGatewaySpec, MAX_GATEWAY_SECRETS, NameRef},
    compose::{
        ComposeError, inference_cluster::CONTROL_NAMESPACE, model_service::is_dns_label, remote::secret_copy,
    },
};

/// The gateway's own name on its cluster, where routes attach.
pub use crate::compose::model_service::route::{GATEWAY_NAME, GATEWAY_NAMESPACE};
/// The header Envoy Gateway stamps the authenticated caller's identity onto (the key's name in its Secret), so
/// engines and usage records can tell tenants apart. It is removed from the request before anything else can set
/// it (`sanitize`), so a caller cannot claim another's identity.
pub const CALLER_HEADER: &str = "x-modelplane-caller";
/// OpenAI clients send `Authorization: Bearer <key>`; Anthropic clients send `x-api-key`.
const KEY_HEADERS: [&str; 2] = ["Authorization", "x-api-key"];
const CALLERS_POLICY: &str = "inference-gateway-callers";

/// Checks what the XRD's schema and CEL rules check, so a gateway that never passed an API server fails naming the
/// field instead of composing a listener with no certificate or a policy nobody can pass.
pub fn validate(spec: &InferenceGatewaySpec) -> Result<(), ComposeError> {
    if let Some(auth) = &spec.auth {
        let (at, keys) = auth.callers();
        if auth.api_key.is_some()
            && (auth.keys.secret_selector.is_some() || !auth.keys.secret_refs.is_empty())
        {
            return Err(ComposeError::new(
                "spec.auth.apiKey",
                "caller Secrets are set both here and directly under spec.auth; keep one",
            ));
        }
        if keys.secret_selector.is_none() || !keys.secret_refs.is_empty() {
            names(&format!("{at}.secretRefs"), &keys.secret_refs)?;
        }
    }
    if let Some(tls) = &spec.tls {
        if spec.hostname.is_none() {
            return Err(ComposeError::new(
                "spec.tls",
                "needs spec.hostname: the certificate is presented for that name",
            ));
        }
        names("spec.tls.certificateRefs", &tls.certificate_refs)?;
    }
    Ok(())
}

fn names(field: &str, refs: &[NameRef]) -> Result<(), ComposeError> {
    if refs.is_empty() || refs.len() > MAX_GATEWAY_SECRETS {
        return Err(ComposeError::new(
            field,
            format!(
                "lists {} Secrets; between 1 and {MAX_GATEWAY_SECRETS}",
                refs.len()
            ),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, r) in refs.iter().enumerate() {
        if !is_dns_label(&r.name) {
            return Err(ComposeError::new(
                format!("{field}[{i}].name"),
                format!(
                    "{:?} must be a Secret name of at most 63 lower-case letters, digits and '-'",
                    r.name
                ),
            ));
        }
        if !seen.insert(&r.name) {
            return Err(ComposeError::new(
                format!("{field}[{i}].name"),
                format!("{:?} is listed twice", r.name),
            ));
        }
    }
    Ok(())
}

/// One Secret to copy onto the gateway's cluster: its composed-resource key, its name there, and the control-plane
/// Secret it is copied from.
pub struct SecretToCopy {
    pub key: String,
    pub remote_name: String,
    pub source: String,
    pub secret_type: &'static str,
}

/// The caller Secrets, then the certificate Secrets, to copy.
pub fn copies(spec: &InferenceGatewaySpec) -> (Vec<SecretToCopy>, Vec<SecretToCopy>) {
    let copy = |prefix: &str, secret_type, r: &NameRef| SecretToCopy {
        key: format!("{prefix}-{}", r.name),
        remote_name: format!("{prefix}-{}", r.name),
        source: r.name.clone(),
        secret_type,
    };
    let callers = spec
        .auth
        .iter()
        .flat_map(|a| &a.callers().1.secret_refs)
        .map(|r| copy("callers", "Opaque", r))
        .collect();
    let certificates = spec
        .tls
        .iter()
        .flat_map(|t| &t.certificate_refs)
        .map(|r| copy("certificate", "kubernetes.io/tls", r))
        .collect();
    (callers, certificates)
}

/// The reference that copies every key of a control-plane Secret (a caller list, or a certificate and its key).
pub fn whole_secret(copy: &SecretToCopy) -> Value {
    secret_copy::reference(CONTROL_NAMESPACE, &copy.source, "data")
}

/// Who may call. With callers whose keys are on the cluster, Envoy Gateway's API-key auth over their Secrets: a
/// request without one of those keys gets 401. With none (no `spec.auth`, or no key copied yet), every request is
/// denied: the front door is never open while its keys are on their way.
pub fn callers_policy(filled: &[&str]) -> Value {
    let mut spec = json!({
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}],
    });
    if filled.is_empty() {
        spec["authorization"] = json!({"defaultAction": "Deny"});
    } else {
        let refs: Vec<Value> = filled
            .iter()
            .map(|name| json!({"group": "", "kind": "Secret", "name": name}))
            .collect();
        spec["apiKeyAuth"] = json!({
            "credentialRefs": refs,
            "extractFrom": [{"headers": KEY_HEADERS}],
            "forwardClientIDHeader": CALLER_HEADER,
            "sanitize": true,
        });
    }
    json!({
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "SecurityPolicy",
        "metadata": {"name": CALLERS_POLICY, "namespace": GATEWAY_NAMESPACE},
        "spec": spec,
    })
}

/// The gateway's listener: HTTPS only when it has a certificate (no plaintext listener at all, so no key ever
/// crosses the network in the clear), else HTTP. Routes attach from the namespaces of the services they serve;
/// which services a gateway serves is decided by its `serviceSelector` where routes are composed.
pub fn gateway(hostname: Option<&str>, certificates: &[SecretToCopy]) -> Value {
    let mut listener = if certificates.is_empty() {
        json!({"name": "http", "protocol": "HTTP", "port": 80})
    } else {
        let refs: Vec<Value> = certificates
            .iter()
            .map(|c| json!({"group": "", "kind": "Secret", "name": c.remote_name}))
            .collect();
        json!({"name": "https", "protocol": "HTTPS", "port": 443,
               "tls": {"mode": "Terminate", "certificateRefs": refs}})
    };
    listener["allowedRoutes"] = json!({"namespaces": {"from": "All"}});
    if let Some(hostname) = hostname {
        listener["hostname"] = json!(hostname);
    }
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE},
        "spec": {"gatewayClassName": crate::stack::routing::GATEWAY_CLASS, "listeners": [listener]},
    })
}
