//! Objects on a workload cluster, reached through provider-kubernetes.
//!
//! Everything Modelplane runs inside a fleet cluster is wrapped in a provider-kubernetes `Object`, which applies
//! the manifest through the cluster's provider config and reports the remote object's state back under
//! `status.atProvider.manifest`. That is how Crossplane users already reach remote clusters; there is no
//! transport of our own.

use serde::{Deserialize, de::IgnoredAny};
use serde_json::{Map, Value, json};

use crate::wire::tree::{Fields, Text, Tree, fields, tree};

use crate::{
    proto::v1::{Resource, RunFunctionRequest},
    sdk::request,
};

pub mod secret_copy;

pub const OBJECT_API_VERSION: &str = "kubernetes.m.crossplane.io/v1alpha1";

/// Wraps `manifest` in an `Object` applied through the cluster-scoped provider config `provider_config`.
/// The manifest is moved in, never interpolated: `json!` serializes an interpolated value into a copy.
pub fn object(manifest: Value, provider_config: &str) -> Value {
    let mut for_provider = Map::new();
    for_provider.insert("manifest".to_owned(), manifest);
    let mut spec = Map::new();
    spec.insert("forProvider".to_owned(), Value::Object(for_provider));
    spec.insert(
        "providerConfigRef".to_owned(),
        json!({"kind": "ClusterProviderConfig", "name": provider_config}),
    );
    let mut object = Map::new();
    object.insert("apiVersion".to_owned(), Value::from(OBJECT_API_VERSION));
    object.insert("kind".to_owned(), Value::from("Object"));
    object.insert("spec".to_owned(), Value::Object(spec));
    Value::Object(object)
}

/// [`object`] with its `metadata` set, built as a tree in one go: a placed replica composes a dozen of these per
/// call. Ready once `ready_query` holds on the remote object (see [`ready_when`]), or once created without one.
pub fn tree_object_with(
    manifest: Tree,
    provider_config: &str,
    metadata: Tree,
    ready_query: Option<&'static str>,
) -> Fields {
    let readiness = match ready_query {
        Some(query) => tree!({"policy": "DeriveFromCelQuery", "celQuery": Text::Borrowed(query)}),
        None => tree!({"policy": "SuccessfulCreate"}),
    };
    let mut object = object_tree(manifest, provider_config, fields!({"readiness": readiness}));
    object.insert("metadata", metadata);
    object
}

/// A workload namespace on a cluster. Several composites share it (every deployment and cache of one team), so
/// none may delete it: the Object leaves `Delete` out of its management policies, and it is ready once created.
pub fn namespace_object(namespace: &str, provider_config: &str) -> Value {
    Value::Object(namespace_tree(namespace, provider_config).to_json_map())
}

/// [`namespace_object`] as a tree, for a placed replica to add its metadata to.
pub fn namespace_tree(namespace: &str, provider_config: &str) -> Fields {
    object_tree(
        tree!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        provider_config,
        fields!({"managementPolicies": KEEP_ON_DELETE, "readiness": {"policy": "SuccessfulCreate"}}),
    )
}

/// The Object's fields as a tree, `spec` holding `spec` besides the manifest and the provider config.
fn object_tree(manifest: Tree, provider_config: &str, mut spec: Fields) -> Fields {
    spec.insert("forProvider", tree!({"manifest": manifest}));
    spec.insert(
        "providerConfigRef",
        tree!({"kind": "ClusterProviderConfig", "name": provider_config}),
    );
    fields!({"apiVersion": OBJECT_API_VERSION, "kind": "Object", "spec": spec})
}

/// Management policies without `Delete`: deleting the Object (or its composite) leaves the remote object alone.
const KEEP_ON_DELETE: [&str; 4] = ["Observe", "Create", "Update", "LateInitialize"];

/// Sets `KEEP_ON_DELETE` on an Object.
pub fn keep_on_delete(object: &mut Value) {
    object["spec"]["managementPolicies"] = json!(KEEP_ON_DELETE);
}

/// Only reads the remote object: never creates, changes or deletes it.
pub fn observe_only(object: &mut Value) {
    object["spec"]["managementPolicies"] = json!(["Observe"]);
}

/// The Object is ready once `query` (CEL over the remote object, as `object`) holds.
pub fn ready_when(object: &mut Value, query: &str) {
    object["spec"]["readiness"] = json!({"policy": "DeriveFromCelQuery", "celQuery": query});
}

/// Whether the composed resource observed under `key` is Ready (for an Object, as its readiness policy decides).
pub fn observed_ready(req: &RunFunctionRequest, key: &str) -> bool {
    observed::<IgnoredAny>(request::observed_composed(req, key)).is_some_and(|o| o.is_ready())
}

/// The parts of an observed composed resource readiness is judged on.
#[derive(Debug, Deserialize)]
pub struct Observed<M> {
    #[serde(default = "ObservedStatus::empty")]
    pub status: ObservedStatus<M>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedStatus<M> {
    #[serde(default)]
    pub conditions: Vec<ConditionView>,
    /// For an `Object`: the remote object as last observed.
    pub at_provider: Option<AtProvider<M>>,
}

impl<M> ObservedStatus<M> {
    fn empty() -> Self {
        Self {
            conditions: Vec::new(),
            at_provider: None,
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct AtProvider<M> {
    pub manifest: Option<M>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ConditionView {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

impl<M> Observed<M> {
    /// Crossplane's own `Ready` condition on the composed resource.
    pub fn is_ready(&self) -> bool {
        self.condition("Ready").is_some_and(|c| c.status == "True")
    }

    pub fn condition(&self, type_: &str) -> Option<&ConditionView> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }

    /// The remote object inside an observed `Object`.
    pub fn manifest(&self) -> Option<&M> {
        self.status.at_provider.as_ref()?.manifest.as_ref()
    }
}

/// Reads an observed composed resource as `Observed<M>`; an unreadable one counts as not observed.
pub fn observed<'a, M: Deserialize<'a>>(resource: Option<&'a Resource>) -> Option<Observed<M>> {
    resource?.resource.as_ref()?.parse().ok()
}
