//! The fleet's front door: `InferenceGateway` (cluster-scoped), `ModelService` and `ModelEndpoint` (namespaced),
//! in the shapes of upstream Modelplane's fleet gateway (PR #425), still reading v0.3.1 manifests.
//!
//! A caller sends an ordinary OpenAI request with `model: <namespace>/<service>` to a gateway; the gateway picks
//! one of the ModelEndpoints the service selects, by priority tier and weight.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ObjectMeta, load_balancer::AddressSource};

/// The largest entry weight the ModelService XRD admits (`maximum`), which reduced route weights stay within.
pub const MAX_WEIGHT: u64 = 1_000_000;

/// Marks the standby endpoint of a deployment that may scale to zero. A ModelService routes it only while its
/// tier has no other ready endpoint: callers are told to wait only when nothing could answer them.
pub const STANDBY_LABEL: &str = "modelplane.ai/standby";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelServiceSpec {
    #[serde(default)]
    pub endpoints: Vec<EndpointEntry>,
    #[serde(default)]
    pub timeouts: Timeouts,
}

/// One entry of `spec.endpoints`: a label selection of ModelEndpoints in the service's namespace, or in another
/// one an InferenceGateway grants it ([`EndpointGrant`]).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EndpointEntry {
    /// Absent in v0.3.1 manifests; the composer names such an entry after its index.
    pub name: Option<String>,
    /// Our extension: absent, the service's own namespace (upstream's only choice).
    pub namespace: Option<String>,
    #[serde(default)]
    pub priority: u64,
    #[serde(default = "default_weight")]
    pub weight: u64,
    #[serde(default)]
    pub selector: MatchLabels,
}

fn default_weight() -> u64 {
    1
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchLabels {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

impl MatchLabels {
    /// An empty selector matches nothing here: a service that silently took every endpoint in the namespace
    /// would be a surprise, and the XRD requires at least one label anyway.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.match_labels.is_empty() && self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
}

/// Gateway API durations (`30s`, `5m`, `1h30m`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Timeouts {
    pub request: Option<String>,
    pub idle: Option<String>,
}

/// PR #425's endpoint (`origin`, `api`, `model`, `credential`), still reading v0.3.1's (`url`, `rewritePath`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelEndpointSpec {
    /// #425: scheme and host (and port), no path.
    pub origin: Option<String>,
    #[serde(default)]
    pub api: ApiSpec,
    /// v0.3.1: the whole URL; its path is the API prefix.
    pub url: Option<String>,
    /// v0.3.1: the prefix requests were rewritten to; with a path-less `url`, the API prefix is this plus `v1`.
    pub rewrite_path: Option<String>,
    /// The model name the backend expects, when it is not the `<namespace>/<service>` callers send.
    pub model: Option<String>,
    pub credential: Option<Credential>,
    /// Ours: the CA and name an https backend's certificate is checked against when no public CA signs it (a
    /// replica's cluster gateway). Without it the backend must present a publicly trusted certificate.
    pub tls: Option<EndpointTls>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointTls {
    /// Sent as SNI, and the name the certificate must be issued for.
    #[serde(default)]
    pub server_name: String,
    /// PEM of the one CA that signs the backend's certificate.
    #[serde(default)]
    pub ca_certificate: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ApiSpec {
    /// `OpenAI` (the XRD's default) or `Anthropic`: the AI Gateway schema the backend speaks.
    #[serde(default = "default_schema")]
    pub schema: String,
    pub prefix: Option<String>,
}

/// Without `api`, as without `api.schema`: the XRD defaults only the schema, so an endpoint with no `api` block
/// reaches the composer with none, and speaks the default schema all the same.
impl Default for ApiSpec {
    fn default() -> Self {
        Self {
            schema: default_schema(),
            prefix: None,
        }
    }
}

fn default_schema() -> String {
    "OpenAI".into()
}

/// A provider key, referenced in the endpoint's namespace and never copied through the function.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credential {
    #[serde(default)]
    pub method: String,
    pub api_key: Option<ApiKey>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKey {
    pub secret_ref: NameRef,
}

/// An object named in the one namespace its field's documentation fixes.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct NameRef {
    #[serde(default)]
    pub name: String,
}

/// The Secret key a provider key is read from, as Envoy AI Gateway's `APIKey` policy reads it.
pub const API_KEY_FIELD: &str = "apiKey";

/// Where an endpoint answers and under which API prefix, or the field at fault and why.
pub fn resolve_endpoint(spec: &ModelEndpointSpec) -> Result<(EndpointUrl, String), (&'static str, String)> {
    let (url, prefix) = resolve_url(spec)?;
    if let Some(tls) = &spec.tls {
        if !url.tls {
            return Err(("spec.tls", "is for an https backend; the origin is http".into()));
        }
        if tls.server_name.parse::<std::net::IpAddr>().is_ok() || !valid_host(&tls.server_name) {
            return Err((
                "spec.tls.serverName",
                format!("{:?} is not a DNS name", tls.server_name),
            ));
        }
        super::ca::valid_ca(&tls.ca_certificate).map_err(|why| ("spec.tls.caCertificate", why))?;
    }
    Ok((url, prefix))
}

fn resolve_url(spec: &ModelEndpointSpec) -> Result<(EndpointUrl, String), (&'static str, String)> {
    match (&spec.origin, &spec.url) {
        (Some(origin), None) => {
            let url = EndpointUrl::parse(origin).map_err(|why| ("spec.origin", why))?;
            if !url.path.is_empty() {
                return Err((
                    "spec.origin",
                    format!("{origin:?} has a path; put it in spec.api.prefix"),
                ));
            }
            let prefix = spec.api.prefix.clone().unwrap_or_else(|| "/v1".into());
            if !prefix.starts_with('/') {
                return Err(("spec.api.prefix", format!("{prefix:?} must start with /")));
            }
            Ok((url, prefix))
        }
        (None, Some(raw)) => {
            let url = EndpointUrl::parse(raw).map_err(|why| ("spec.url", why))?;
            let rewrite = spec.rewrite_path.as_deref().unwrap_or("/");
            if !rewrite.starts_with('/') {
                return Err(("spec.rewritePath", format!("{rewrite:?} must start with /")));
            }
            let prefix = match (&spec.api.prefix, url.path.is_empty()) {
                (Some(prefix), _) => prefix.clone(),
                (None, false) => url.path.clone(),
                (None, true) => format!("{}/v1", rewrite.trim_end_matches('/')),
            };
            Ok((url, prefix))
        }
        (Some(_), Some(_)) => Err((
            "spec.origin",
            "set spec.origin or spec.url (v0.3.1), not both".into(),
        )),
        (None, None) => Err(("spec.origin", "is required: the backend's scheme and host".into())),
    }
}

/// An InferenceGateway composite as the function reads it: its own XR, or one the fleet's other composites require.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct InferenceGateway {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: InferenceGatewaySpec,
    #[serde(default)]
    pub status: InferenceGatewayStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InferenceGatewaySpec {
    /// The InferenceCluster the gateway runs on; absent, the composer picks one and states it in status.
    pub cluster_name: Option<String>,
    pub hostname: Option<String>,
    /// Which ModelServices this gateway serves; absent, every one.
    pub service_selector: Option<MatchLabels>,
    pub tls: Option<GatewayTls>,
    pub auth: Option<GatewayAuth>,
    #[serde(default)]
    pub endpoint_grants: Vec<EndpointGrant>,
    /// Upstream's gateway implementation; Envoy Gateway serves either value (docs/routing.md says why).
    #[serde(default)]
    pub backend: GatewayBackend,
    pub envoy_gateway: Option<BackendSettings>,
    pub traefik: Option<BackendSettings>,
    #[serde(default)]
    pub gateway: GatewayListener,
}

/// Upstream's `spec.backend`: `EnvoyGateway` (its first InferenceGateway, and what runs here) or `Traefik` (what
/// its releases install).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, strum::IntoStaticStr)]
pub enum GatewayBackend {
    #[default]
    EnvoyGateway,
    Traefik,
}

/// `spec.envoyGateway` or `spec.traefik`: the implementation's chart version and where the gateway's address
/// comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct BackendSettings {
    pub version: Option<String>,
    #[serde(flatten)]
    pub address: AddressSource,
}

/// Upstream's `spec.gateway`: the listener's port. Absent, 80, or 443 with `spec.tls`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct GatewayListener {
    pub port: Option<u16>,
}

/// Cross-namespace routing the platform team allows (InferenceGateways are cluster-scoped: only it writes them):
/// ModelServices in `from` may select ModelEndpoints in `to`. A grant on any InferenceGateway holds fleet-wide.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct EndpointGrant {
    pub from: String,
    pub to: String,
}

impl InferenceGatewaySpec {
    /// The settings object of the chosen backend, with its path (`spec.traefik`).
    pub fn backend_settings(&self) -> (&'static str, Option<&BackendSettings>) {
        match self.backend {
            GatewayBackend::EnvoyGateway => ("spec.envoyGateway", self.envoy_gateway.as_ref()),
            GatewayBackend::Traefik => ("spec.traefik", self.traefik.as_ref()),
        }
    }

    /// The port the listener answers on: `spec.gateway.port`, else HTTP's or HTTPS's own.
    pub fn port(&self) -> u16 {
        let default = if self.tls.is_some() { 443 } else { 80 };
        self.gateway.port.unwrap_or(default)
    }

    /// Where callers reach the gateway at `address` (its hostname when it has one): scheme, host, and the port
    /// when it is not the scheme's own. No trailing slash.
    pub fn base_url(&self, address: &str) -> String {
        let (scheme, default) = if self.tls.is_some() {
            ("https", 443)
        } else {
            ("http", 80)
        };
        let host = self.hostname.as_deref().unwrap_or(address);
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        match self.port() {
            port if port == default => format!("{scheme}://{host}"),
            port => format!("{scheme}://{host}:{port}"),
        }
    }

    /// The namespaces, other than `from` itself, whose ModelEndpoints `from`'s ModelServices may select.
    pub fn granted_to<'a>(&'a self, from: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.endpoint_grants
            .iter()
            .filter(move |g| g.from == from && g.to != from)
            .map(|g| g.to.as_str())
    }
}

/// The certificate the gateway presents for its hostname: `kubernetes.io/tls` Secrets in the control plane's
/// `modelplane-system`, copied to the gateway's cluster by reference.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayTls {
    #[serde(default)]
    pub certificate_refs: Vec<NameRef>,
}

/// Who may call: upstream's docs put the caller Secrets directly under `auth`, its later XRD under `auth.apiKey`;
/// either is read (one of them at a time).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayAuth {
    #[serde(flatten)]
    pub keys: CallerKeys,
    pub api_key: Option<CallerKeys>,
}

/// Caller keys: every key of every listed Secret (in the control plane's `modelplane-system`) is one caller, its
/// name the caller's identity and its value the caller's API key.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallerKeys {
    #[serde(default)]
    pub secret_refs: Vec<NameRef>,
    /// Upstream's way to pick them, accepted but never resolved: resolving a selector means reading the Secrets,
    /// keys and all, through the function.
    pub secret_selector: Option<MatchLabels>,
}

impl GatewayAuth {
    /// The level the caller Secrets are set at, with its field path.
    pub fn callers(&self) -> (&'static str, &CallerKeys) {
        match &self.api_key {
            Some(keys) => ("spec.auth.apiKey", keys),
            None => ("spec.auth", &self.keys),
        }
    }
}

/// An InferenceGateway's status: written by its composer, read back by it (the cluster it chose, the client CAs
/// it published), by the ModelServices it serves (where it answers) and by every InferenceCluster (the client CAs
/// its gateway requires).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InferenceGatewayStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<GatewayEndpoints>,
    /// The CAs of the client certificates the gateway presents to cluster gateways, PEM: the current one, and
    /// the one before it while a cluster has not yet reported trusting the current one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_certificate_authorities: Vec<String>,
}

/// The base URLs callers use.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct GatewayEndpoints {
    #[serde(rename = "openAI")]
    pub open_ai: String,
}

/// What a ModelService reports: the model name callers send, where to send it, and its endpoints.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelServiceStatus {
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateways: Option<Vec<ServingGatewayStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<EndpointCounts>,
}

/// A gateway serving a ModelService, by name, and where it answers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServingGatewayStatus {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    pub address: String,
}

/// A ModelService's endpoints: matched, ready, and those every serving gateway's applied route lists.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EndpointCounts {
    pub total: usize,
    pub ready: usize,
    pub routed: Vec<String>,
}

/// An endpoint URL split into what an Envoy Gateway `Backend` and an `AIServiceBackend` need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointUrl {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// The path without a trailing slash; empty for `/`.
    pub path: String,
}

impl EndpointUrl {
    /// Parses `http(s)://host[:port][/path]`. The error says what is wrong, for a message naming `spec.url`.
    pub fn parse(url: &str) -> Result<Self, String> {
        let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!("{url:?} must start with http:// or https://"));
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.contains('@') || path.contains(['?', '#']) {
            return Err(format!(
                "{url:?} must not carry credentials, a query or a fragment; put a key in spec.credential"
            ));
        }
        let (host, port) = match authority.strip_prefix('[') {
            Some(bracketed) => match bracketed.split_once(']') {
                Some((host, "")) => (host, None),
                Some((host, after)) => (host, Some(after.strip_prefix(':').unwrap_or(after))),
                None => return Err(format!("{url:?}: unclosed [ in the host")),
            },
            None if authority.matches(':').count() > 1 => {
                return Err(format!("{url:?}: an IPv6 host must be in brackets"));
            }
            None => match authority.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        let port = match port {
            None => {
                if tls {
                    443
                } else {
                    80
                }
            }
            Some(port) => port
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{url:?}: port {port:?} is not a number in 1..65535"))?,
        };
        if !valid_host(host) {
            return Err(format!(
                "{url:?}: host {host:?} is not a DNS name or an IP address"
            ));
        }
        Ok(Self {
            tls,
            host: host.to_ascii_lowercase(),
            port,
            path: path.trim_end_matches('/').to_owned(),
        })
    }

    pub fn is_ip(&self) -> bool {
        self.host.parse::<std::net::IpAddr>().is_ok()
    }
}

fn valid_host(host: &str) -> bool {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::EndpointUrl;

    #[test]
    fn endpoint_urls_parse_into_host_port_and_path() {
        let parsed = EndpointUrl::parse("https://api.together.xyz/").unwrap();
        assert_eq!(
            parsed,
            EndpointUrl {
                tls: true,
                host: "api.together.xyz".into(),
                port: 443,
                path: String::new()
            }
        );
        let parsed = EndpointUrl::parse("http://10.0.0.7:8080/ml-team/qwen-0/v1").unwrap();
        assert_eq!(
            (parsed.port, parsed.path.as_str(), parsed.is_ip()),
            (8080, "/ml-team/qwen-0/v1", true)
        );
        assert!(EndpointUrl::parse("http://[fd00::1]:80").unwrap().is_ip());
    }

    #[test]
    fn malformed_endpoint_urls_are_refused_with_the_reason() {
        for (url, needle) in [
            ("ftp://x", "http:// or https://"),
            ("api.openai.com", "http:// or https://"),
            ("https://", "not a DNS name"),
            ("https://bad_host/", "not a DNS name"),
            ("https://h:0/", "port"),
            ("https://h:99999/", "port"),
            ("https://user:pw@h/", "credentials"),
            ("https://h/v1?key=x", "query"),
            ("http://fd00::1/", "brackets"),
        ] {
            let err = EndpointUrl::parse(url).unwrap_err();
            assert!(err.contains(needle), "{url}: {err}");
        }
    }
}
