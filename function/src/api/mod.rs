//! Typed views of Modelplane's composites, decoded straight from the request's `Struct` bytes.
//!
//! Each view declares only what a composer reads; unknown fields are skipped. Serde field paths become the
//! paths in FATAL messages, so field names here must match the XRD schemas in `package/configuration/`.

use std::collections::BTreeMap;

use serde::Deserialize;

pub mod availability;
pub mod ca;
pub mod cluster_view;
pub mod inference_class;
pub mod inference_cluster;
pub mod ledger;
pub mod load_balancer;
pub mod model_cache;
pub mod model_deployment;
pub mod routing;

#[cfg(test)]
mod xrd_defaults_tests;

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

/// A composite resource with spec type `S`.
#[derive(Debug, Deserialize)]
pub struct Composite<S> {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: S,
}
