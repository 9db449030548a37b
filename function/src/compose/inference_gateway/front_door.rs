//! What the fleet gateway puts in front of every route: who may call (Envoy Gateway's API-key auth, keys copied
//! from control-plane Secrets by reference) and the certificate it presents (also copied by reference). Nothing
//! here reads a Secret: the function only names them.

use crate::wire::tree::{Tree, fields, tree};

use crate::{
    api::routing::{InferenceGatewaySpec, NameRef},
    compose::{remote::secret_copy, shared::CONTROL_NAMESPACE},
};

use crate::{compose::shared::GATEWAY_NAME, workload::well_known::GATEWAY_NAMESPACE};

/// The header Envoy Gateway stamps the authenticated caller's identity onto (the key's name in its Secret), so
/// engines and usage records can tell tenants apart. It is removed from the request before anything else can set
/// it (`sanitize`), so a caller cannot claim another's identity.
pub const CALLER_HEADER: &str = "x-modelplane-caller";
/// OpenAI clients send `Authorization: Bearer <key>`; Anthropic clients send `x-api-key`.
const KEY_HEADERS: [&str; 2] = ["Authorization", "x-api-key"];
const CALLERS_POLICY: &str = "inference-gateway-callers";

/// One Secret to copy onto the gateway's cluster: its composed-resource key, its name there, the control-plane
/// Secret it is copied from and the spec field that names it.
pub struct SecretToCopy {
    pub key: String,
    pub remote_name: String,
    pub source: String,
    pub field: String,
    pub secret_type: &'static str,
}

/// The caller Secrets, then the certificate Secrets, to copy.
pub fn copies(spec: &InferenceGatewaySpec) -> (Vec<SecretToCopy>, Vec<SecretToCopy>) {
    let copy = |prefix: &str, secret_type, field: String, r: &NameRef| SecretToCopy {
        key: format!("{prefix}-{}", r.name),
        remote_name: format!("{prefix}-{}", r.name),
        source: r.name.clone(),
        field,
        secret_type,
    };
    let callers = spec
        .auth
        .iter()
        .flat_map(|a| {
            let (path, keys) = a.callers();
            keys.secret_refs
                .iter()
                .enumerate()
                .map(move |(i, r)| (format!("{path}.secretRefs[{i}]"), r))
        })
        .map(|(field, r)| copy("callers", "Opaque", field, r))
        .collect();
    let certificates = spec
        .tls
        .iter()
        .flat_map(|t| t.certificate_refs.iter().enumerate())
        .map(|(i, r)| {
            copy(
                "certificate",
                "kubernetes.io/tls",
                format!("spec.tls.certificateRefs[{i}]"),
                r,
            )
        })
        .collect();
    (callers, certificates)
}

/// The reference that copies every key of a control-plane Secret (a caller list, or a certificate and its key).
pub fn whole_secret(copy: &SecretToCopy) -> Tree {
    secret_copy::reference(CONTROL_NAMESPACE, &copy.source, "data")
}

/// Who may call. With callers whose keys are on the cluster, Envoy Gateway's API-key auth over their Secrets: a
/// request without one of those keys gets 401. With none (no `spec.auth`, or no key copied yet), every request is
/// denied: the front door is never open while its keys are on their way.
pub fn callers_policy(filled: &[&str]) -> Tree {
    let mut spec = fields!({
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}],
    });
    if filled.is_empty() {
        spec.insert("authorization", tree!({"defaultAction": "Deny"}));
    } else {
        let refs: Vec<Tree> = filled
            .iter()
            .map(|name| tree!({"group": "", "kind": "Secret", "name": *name}))
            .collect();
        spec.insert(
            "apiKeyAuth",
            tree!({
                "credentialRefs": refs,
                "extractFrom": [{"headers": KEY_HEADERS}],
                "forwardClientIDHeader": CALLER_HEADER,
                "sanitize": true,
            }),
        );
    }
    tree!({
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "SecurityPolicy",
        "metadata": {"name": CALLERS_POLICY, "namespace": GATEWAY_NAMESPACE},
        "spec": spec,
    })
}

/// The gateway's listener, on `spec.gateway.port` (else the scheme's own): HTTPS only when it has a certificate
/// (no plaintext listener at all, so no key ever crosses the network in the clear), else HTTP. Routes attach from the namespaces of the services they serve;
/// which services a gateway serves is decided by its `serviceSelector` where routes are composed. With
/// `parameters_ref`, Envoy Gateway takes the proxy's settings from that object (the fleet's client certificate).
pub fn gateway(
    spec: &InferenceGatewaySpec,
    certificates: &[SecretToCopy],
    parameters_ref: Option<Tree>,
) -> Tree {
    let port = spec.port();
    let mut listener = if certificates.is_empty() {
        fields!({"name": "http", "protocol": "HTTP", "port": port})
    } else {
        let refs: Vec<Tree> = certificates
            .iter()
            .map(|c| tree!({"group": "", "kind": "Secret", "name": &c.remote_name}))
            .collect();
        fields!({"name": "https", "protocol": "HTTPS", "port": port,
                 "tls": {"mode": "Terminate", "certificateRefs": refs}})
    };
    listener.insert("allowedRoutes", tree!({"namespaces": {"from": "All"}}));
    if let Some(hostname) = spec.hostname.as_deref() {
        listener.insert("hostname", hostname);
    }
    let mut spec = fields!({"gatewayClassName": crate::workload::cluster_gateway::GATEWAY_CLASS, "listeners": [listener]});
    if let Some(parameters_ref) = parameters_ref {
        spec.insert("infrastructure", tree!({"parametersRef": parameters_ref}));
    }
    tree!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE},
        "spec": spec,
    })
}
