//! The identity provider-kubernetes and provider-helm reach the cluster as.
//!
//! A mk8s kubeconfig carries only the endpoint and CA: Nebius authenticates every Kubernetes client through its
//! IAM, and no API mints a service account key server-side. So, as upstream Modelplane does, the service account
//! that provisions the cluster reaches it too: its key is the credentials Secret of the provider-upjet-nebius
//! provider config the cluster names, read from that config (a required resource), and layered on the
//! kubeconfig as a `NebiusServiceAccountCredentials` identity.

use serde_json::Value;

use crate::wire::tree::{Tree, tree};

use super::super::{
    components::KEY_KUBERNETES_PROVIDER_CONFIG, observed::Observed, provision, upjet::UpjetCluster,
};
use crate::{
    api::inference_cluster::{NebiusCluster, ProviderConfigRef},
    compose::ComposeError,
    proto::v1::RunFunctionRequest,
    sdk::request,
};

/// The requirement the provider config arrives under: the one every cloud's credentials are fetched by.
pub const REQUIREMENT: &str = provision::CREDENTIALS_REQUIREMENT;
/// The identity type provider-kubernetes and provider-helm know Nebius service account keys by.
pub const IDENTITY_TYPE: &str = "NebiusServiceAccountCredentials";
/// Where the spec names the provider config.
const FIELD: &str = <NebiusCluster as UpjetCluster>::CREDENTIALS_FIELD;

/// A key of a Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    pub name: String,
    pub namespace: String,
    pub key: String,
}

impl SecretRef {
    /// The `identity` block of a provider-kubernetes or provider-helm ClusterProviderConfig.
    pub fn as_identity(&self) -> Tree {
        tree!({"type": IDENTITY_TYPE, "source": "Secret",
               "secretRef": {"name": &self.name, "namespace": &self.namespace, "key": &self.key}})
    }
}

/// The provider config's credentials Secret. Before Crossplane has been asked for the config (a config it found
/// missing is refused before this, by `provision::Credentials::check`), the identity the composed
/// provider-kubernetes config already carries; `None` when neither is known (the cluster's own MRs cannot authenticate then either, so nothing is
/// installed on it). A config that does not keep its key in a Secret cannot lend it, and is refused by name.
pub fn identity(
    req: &RunFunctionRequest,
    seen: &Observed,
    credentials: &ProviderConfigRef,
) -> Result<Option<SecretRef>, ComposeError> {
    let found = request::required_resources(req, REQUIREMENT)
        .and_then(|items| items.first())
        .and_then(|r| r.resource.as_ref())
        .and_then(|raw| raw.to_json().ok());
    match found {
        Some(config) => from_config(&config, credentials).map(Some),
        None => Ok(seen
            .spec_field(KEY_KUBERNETES_PROVIDER_CONFIG, "/spec/identity/secretRef")
            .and_then(|r| {
                Some(SecretRef {
                    name: r["name"].as_str()?.to_owned(),
                    namespace: r["namespace"].as_str()?.to_owned(),
                    key: r["key"].as_str()?.to_owned(),
                })
            })),
    }
}

fn from_config(config: &Value, credentials: &ProviderConfigRef) -> Result<SecretRef, ComposeError> {
    let what = format!("{} {:?}", credentials.kind.as_str(), credentials.name);
    let source = config
        .pointer("/spec/credentials/source")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if source != "Secret" {
        return Err(ComposeError::new(
            FIELD,
            format!(
                "{what} takes its credentials from {source:?}; Modelplane reaches a mk8s cluster as that \
                 service account and needs its key in a Secret: set spec.credentials.source: Secret"
            ),
        ));
    }
    let reference = &config["spec"]["credentials"]["secretRef"];
    // A ClusterProviderConfig names the Secret's namespace; a ProviderConfig's Secret is in its own.
    let namespace = reference["namespace"]
        .as_str()
        .or_else(|| config.pointer("/metadata/namespace").and_then(Value::as_str));
    match (reference["name"].as_str(), namespace, reference["key"].as_str()) {
        (Some(name), Some(namespace), Some(key)) if !name.is_empty() && !key.is_empty() => Ok(SecretRef {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            key: key.to_owned(),
        }),
        _ => Err(ComposeError::new(
            FIELD,
            format!(
                "{what} names no credentials Secret (spec.credentials.secretRef name, namespace and key)"
            ),
        )),
    }
}
