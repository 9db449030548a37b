//! Objects on a workload cluster, reached through provider-kubernetes.
//!
//! Everything Modelplane runs inside a fleet cluster is wrapped in a provider-kubernetes `Object`, which applies
//! the manifest through the cluster's provider config and reports the remote object's state back under
//! `status.atProvider.manifest`. That is how Crossplane users already reach remote clusters; there is no
//! transport of our own.

use crate::wire::tree::{Fields, Text, Tree, fields, tree};
use serde::{Deserialize, de::IgnoredAny};

use crate::{
    proto::v1::{Resource, RunFunctionRequest},
    sdk::request,
};

pub mod secret_copy;

pub const OBJECT_API_VERSION: &str = "kubernetes.m.crossplane.io/v1alpha1";
/// A provider's error can quote a whole response body; a status that repeats it keeps the start of it.
const MAX_PROVIDER_MESSAGE_CHARS: usize = 512;

/// A provider-kubernetes `Object` applying a manifest through a cluster-scoped provider config, built in one
/// go: `Object::new(manifest, provider_config)`, then what this Object says beyond that (its metadata, when it
/// is ready, what it may do to the remote object), then [`Object::build`]. The manifest is moved in, never
/// copied.
#[must_use]
pub struct Object {
    manifest: Tree,
    provider_config: Tree,
    metadata: Option<Tree>,
    readiness: Option<Tree>,
    policies: Option<Tree>,
    references: Option<Tree>,
}

impl Object {
    /// `manifest` applied through the `ClusterProviderConfig` named `provider_config`; provider-kubernetes' own
    /// readiness and every management policy until said otherwise.
    pub fn new(manifest: impl Into<Tree>, provider_config: &str) -> Self {
        Self {
            manifest: manifest.into(),
            provider_config: Tree::from(provider_config),
            metadata: None,
            readiness: None,
            policies: None,
            references: None,
        }
    }

    pub fn metadata(mut self, metadata: Tree) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// In `namespace` on the control plane, named by Crossplane.
    pub fn in_namespace(self, namespace: &'static str) -> Self {
        self.metadata(tree!({"namespace": namespace}))
    }

    /// Named `name` in `namespace` on the control plane.
    pub fn named(self, name: impl Into<Tree>, namespace: &'static str) -> Self {
        let name: Tree = name.into();
        self.metadata(tree!({"name": name, "namespace": namespace}))
    }

    /// Ready once the remote object is created: for objects with no status to wait on.
    pub fn ready_once_created(mut self) -> Self {
        self.readiness = Some(tree!({"policy": "SuccessfulCreate"}));
        self
    }

    /// Ready once `query` (CEL over the remote object, as `object`) holds.
    pub fn ready_when(mut self, query: impl Into<Text>) -> Self {
        let query: Text = query.into();
        self.readiness = Some(tree!({"policy": "DeriveFromCelQuery", "celQuery": query}));
        self
    }

    /// Ready once `query` holds where there is one, else once created.
    pub fn ready_on(self, query: Option<&'static str>) -> Self {
        match query {
            Some(query) => self.ready_when(query),
            None => self.ready_once_created(),
        }
    }

    /// Objects on the control plane whose fields the manifest is patched from (`spec.references`).
    pub fn references(mut self, references: Tree) -> Self {
        self.references = Some(references);
        self
    }

    /// What provider-kubernetes may do to the remote object (`spec.managementPolicies`).
    pub fn management_policies(mut self, policies: Tree) -> Self {
        self.policies = Some(policies);
        self
    }

    /// Deleting the Object (or its composite) leaves the remote object alone: management policies without
    /// `Delete`.
    pub fn keep_on_delete(self) -> Self {
        self.management_policies(tree!(KEEP_ON_DELETE))
    }

    /// Creates the remote object as the manifest says and deletes it with the Object, but never changes it: what
    /// others write into it (a Job's progress report) stays, and is observed.
    pub fn create_only(self) -> Self {
        self.management_policies(tree!(["Observe", "Create", "Delete"]))
    }

    /// Only reads the remote object: never creates, changes or deletes it.
    pub fn observe_only(self) -> Self {
        self.management_policies(tree!(["Observe"]))
    }

    pub fn build(self) -> Fields {
        let mut spec = Fields::with_capacity(5);
        spec.insert("forProvider", tree!({"manifest": self.manifest}));
        spec.insert(
            "providerConfigRef",
            tree!({"kind": "ClusterProviderConfig", "name": self.provider_config}),
        );
        if let Some(readiness) = self.readiness {
            spec.insert("readiness", readiness);
        }
        if let Some(policies) = self.policies {
            spec.insert("managementPolicies", policies);
        }
        if let Some(references) = self.references {
            spec.insert("references", references);
        }
        let mut object = fields!({"apiVersion": OBJECT_API_VERSION, "kind": "Object", "spec": spec});
        if let Some(metadata) = self.metadata {
            object.insert("metadata", metadata);
        }
        object
    }
}

/// A workload namespace on a cluster. Several composites share it (every deployment and cache of one team), so
/// none may delete it: the Object keeps it on delete, and it is ready once created.
pub fn namespace(namespace: &str, provider_config: &str) -> Object {
    let manifest = tree!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    Object::new(manifest, provider_config)
        .keep_on_delete()
        .ready_once_created()
}

/// Management policies without `Delete`: deleting the Object (or its composite) leaves the remote object alone.
const KEEP_ON_DELETE: [&str; 4] = ["Observe", "Create", "Update", "LateInitialize"];

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
    /// RFC 3339, as the provider wrote it; read through [`ConditionView::transitioned_at`].
    #[serde(rename = "lastTransitionTime", default)]
    pub last_transition_time: String,
}

impl ConditionView {
    /// What the provider said, to quote in a status: its message (else its reason), at most
    /// [`MAX_PROVIDER_MESSAGE_CHARS`] characters of it.
    pub fn provider_words(&self) -> String {
        let said = if self.message.is_empty() {
            &self.reason
        } else {
            &self.message
        };
        said.chars().take(MAX_PROVIDER_MESSAGE_CHARS).collect()
    }

    /// When the condition last changed status; None when absent or unreadable.
    pub fn transitioned_at(&self) -> Option<jiff::Timestamp> {
        self.last_transition_time.parse().ok()
    }
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
