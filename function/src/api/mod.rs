//! Typed views of Modelplane's composites, decoded straight from the request's `Struct` bytes.
//!
//! Each view declares only what a composer reads; unknown fields are skipped. Serde field paths become the
//! paths in FATAL messages, so field names here must match the XRD schemas in `package/configuration/`.

use std::collections::BTreeMap;

use serde::Deserialize;

pub mod cluster_view;
pub mod inference_class;
pub mod inference_cluster;
pub mod ledger;
pub mod model_cache;
pub mod model_deployment;
pub mod routing;

/// `apiVersion` and `kind`: enough to choose a composer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeMeta {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
}

/// The metadata composers use.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    pub namespace: Option<String>,
    pub uid: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Labels Crossplane puts on a legacy (claim-backed) composite: the name and namespace of the claim it serves.
pub const CLAIM_NAME_LABEL: &str = "crossplane.io/claim-name";
pub const CLAIM_NAMESPACE_LABEL: &str = "crossplane.io/claim-namespace";

impl ObjectMeta {
    /// Where this composite's namespaced resources belong: its own namespace (a Crossplane v2 namespaced XR), or,
    /// for a cluster-scoped legacy composite created for a claim, the claim's namespace. None for a cluster
    /// composite nobody claimed.
    pub fn effective_namespace(&self) -> Option<&str> {
        self.namespace
            .as_deref()
            .or_else(|| self.labels.get(CLAIM_NAMESPACE_LABEL).map(String::as_str))
            .filter(|ns| !ns.is_empty())
    }

    /// The name users know this composite by: a claim-backed composite is named `<claim>-<suffix>`, but
    /// references (a ModelDeployment's `modelCacheRef`) and the names of what it composes use the claim's name.
    pub fn effective_name(&self) -> &str {
        self.labels
            .get(CLAIM_NAME_LABEL)
            .filter(|name| !name.is_empty() && self.namespace.is_none())
            .unwrap_or(&self.name)
    }
}

/// A composite resource with spec type `S`.
#[derive(Debug, Deserialize)]
pub struct Composite<S> {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: S,
}
