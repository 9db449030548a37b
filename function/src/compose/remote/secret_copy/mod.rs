//! A Secret on a workload cluster whose data provider-kubernetes copies from Secrets on the control plane, by
//! `spec.references[].patchesFrom`, so a key never passes through the function.
//!
//! A reference alone is not enough. provider-kubernetes (v1.3.0, `internal/controller/namespaced/object`) resolves
//! references at the start of every observation, reading the referenced Secret from the control plane, and patches
//! the value into the Object it holds in memory; any write of the Object's spec after that persists the key there
//! (its open issue #223). It writes the spec twice: when it adds its finalizer, and before it creates the remote
//! object. The spec is what Crossplane sends back to this function as observed state. And it writes the remote
//! Secret, data included, into `status.atProvider.manifest`, unless it runs with `--sanitize-secrets`.
//!
//! So a copy goes in two steps:
//! 1. **Create**: the Secret is composed empty, without references, and provider-kubernetes creates it and adds its
//!    finalizer; nothing secret exists yet to be written anywhere.
//! 2. **Fill**: once the remote Secret exists, the finalizer is on, and the observed status shows the provider's
//!    redaction marker (so it sanitizes), the references are added and `Create` leaves the management policies.
//!    The provider now only observes and updates: no finalizer to add, nothing to create, so the spec is never
//!    written again, and the status it writes carries the marker in place of the data. A remote Secret deleted
//!    by hand is put back by the update (server-side apply creates what is missing), still without a spec write.
//!
//! Without the marker the references are never added and the copy says why; the key stays where it is.
//!
//! An Object in the fill step has no `Delete` policy (provider-kubernetes accepts no Observe+Update+Delete set),
//! so dropping it would leave the remote Secret, key and all, on its cluster. Two things make sure it goes:
//! - A copy the composer no longer wants is retired in a third step ([`retire_dropped`]): composed once more with
//!   every policy and without references, then dropped once observed that way, so its deletion deletes the
//!   remote Secret.
//! - A composite that is deleted cannot do that (Crossplane does not call the function on deletion), so every
//!   copy on a cluster names an owner there ([`copy_owner`]): a ConfigMap composed with every policy, which
//!   Crossplane deletes with the composite; the cluster's garbage collector then deletes the Secrets it owns.
//!   References wait until the remote Secret carries that owner, so no key lands on a cluster without one.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{ConditionView, Object};
use crate::wire::tree::{Fields, Tree, fields, tree};
use crate::{
    compose::Output,
    proto::v1::{Resource, RunFunctionRequest},
    wire::RawStruct,
};

/// The finalizer provider-kubernetes puts on an Object it manages; on, it never adds it again.
const PROVIDER_FINALIZER: &str = "finalizer.managedresource.crossplane.io";
/// What provider-kubernetes writes over a Secret's `data` in status with `--sanitize-secrets`.
const REDACTION_MARKER: &str = "redacted";
/// Observe, update, never create (a create writes the resolved spec first) and never late-initialize.
const FILL_POLICIES: [&str; 2] = ["Observe", "Update"];

/// How far a copy has come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyState {
    /// The empty remote Secret is being created.
    Creating,
    /// provider-kubernetes does not redact Secret data in status: no reference is added.
    Unsanitized,
    /// The remote Secret does not carry its owner reference yet: no key goes where nothing would delete it.
    AwaitingOwner,
    /// The references are in; the provider has not yet applied the data.
    Filling,
    /// The references are in and the provider's last try at them failed, in its words (the source Secret or a
    /// key of it missing, most often).
    Refused(String),
    /// The remote Secret holds the referenced data.
    Filled,
}

impl CopyState {
    /// Why a copy is not filled yet, for a condition message.
    pub fn waiting(&self) -> Option<String> {
        let why = match self {
            Self::Creating => "its Secret is being created on the cluster",
            Self::Unsanitized => {
                "provider-kubernetes does not run with --sanitize-secrets, so the key would be written into the \
                 Object's status; it is not copied"
            }
            Self::AwaitingOwner => {
                "its owner ConfigMap (deleted with the composite, and the copy with it) is not on the cluster yet"
            }
            Self::Filling => "its key is being copied by reference",
            Self::Refused(message) => return Some(format!("provider-kubernetes cannot copy it: {message}")),
            Self::Filled => return None,
        };
        Some(why.to_owned())
    }
}

/// One `patchesFrom` reference: `field` (`data` for every key, or `data.<key>`) of the control-plane Secret
/// `namespace/name`, into the same field of the remote Secret (provider-kubernetes reads `toFieldPath` inside the
/// manifest).
pub fn reference(namespace: &str, name: &str, field: &str) -> Tree {
    tree!({
        "patchesFrom": {"apiVersion": "v1", "kind": "Secret", "name": name, "namespace": namespace, "fieldPath": field},
        "toFieldPath": field,
    })
}

/// The owner of a composite's copies on one cluster, once its remote ConfigMap exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOwner {
    name: String,
    uid: String,
}

impl CopyOwner {
    fn reference(&self) -> Tree {
        tree!({"apiVersion": "v1", "kind": "ConfigMap", "name": &self.name, "uid": &self.uid})
    }
}

/// The remote ConfigMap as an observed owner Object reports it.
#[derive(Deserialize)]
struct OwnerView {
    metadata: OwnerMeta,
}

#[derive(Clone, Deserialize)]
struct OwnerMeta {
    name: String,
    uid: String,
}

/// A Kubernetes UID is a UUID (36 characters); anything else observed is not trusted as one.
const MAX_UID_LEN: usize = 64;

/// The Object for the ConfigMap `name` in `namespace` that a composite's copies there belong to, with every
/// management policy so deleting the composite deletes it, and its owner reference once the remote ConfigMap
/// is observed (its UID is what the garbage collector matches).
pub fn copy_owner(
    name: &str,
    namespace: &str,
    provider_config: &str,
    observed: Option<&Resource>,
) -> (Object, Option<CopyOwner>) {
    let manifest = tree!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"purpose": "owns the Secrets Modelplane copies into this namespace for one composite; \
                             deleting it deletes them"},
    });
    let owner = super::observed::<OwnerView>(observed)
        .and_then(|seen| seen.manifest().map(|m| m.metadata.clone()))
        .filter(|meta| {
            meta.name == name
                && !meta.uid.is_empty()
                && meta.uid.len() <= MAX_UID_LEN
                && meta.uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
        .map(|meta| CopyOwner {
            name: meta.name,
            uid: meta.uid,
        });
    (Object::new(manifest, provider_config), owner)
}

/// The Object for the remote Secret `name` in `namespace` (of `secret_type`, which cannot change later), owned
/// by `owner` once that is known, and how far the copy has come given the Object as last observed.
pub fn secret_copy(
    name: &str,
    namespace: &str,
    secret_type: &str,
    provider_config: &str,
    references: Vec<Tree>,
    owner: Option<&CopyOwner>,
    observed: Option<&Resource>,
) -> (Object, CopyState) {
    let mut metadata = fields!({"name": name, "namespace": namespace});
    if let Some(owner) = owner {
        metadata.insert("ownerReferences", tree!([owner.reference()]));
    }
    let manifest = tree!({"apiVersion": "v1", "kind": "Secret", "type": secret_type, "metadata": metadata});
    let wrapped = Object::new(manifest, provider_config);
    let seen = observed
        .and_then(|r| r.resource.as_ref())
        .and_then(|r| r.parse::<ObservedCopy>().ok());
    let Some(seen) = seen.filter(ObservedCopy::created) else {
        return (wrapped, CopyState::Creating);
    };
    if !seen.sanitized() {
        return (wrapped, CopyState::Unsanitized);
    }
    if !owner.is_some_and(|o| seen.owned_by(o)) {
        return (wrapped, CopyState::AwaitingOwner);
    }
    let wrapped = wrapped
        .references(Tree::from(references))
        .management_policies(tree!(FILL_POLICIES));
    let state = if seen.filled() {
        CopyState::Filled
    } else if let Some(message) = seen.refusal() {
        CopyState::Refused(message)
    } else {
        CopyState::Filling
    };
    (wrapped, state)
}

/// Retires the copies the composer no longer wants: each observed copy in its fill step that the desired state
/// lacks is composed again with every management policy and no references (ready, as it is on its way out), so
/// that leaving it out on a later call deletes its remote Secret. Only copies on clusters the composer reaches
/// now (by `reachable` provider config): on a cluster that is gone, a copy with `Delete` could never finish
/// deleting. Call it last, with everything else composed.
pub fn retire_dropped(out: &mut Output, req: &RunFunctionRequest, reachable: &[&str]) {
    let Some(observed) = req.observed.as_ref() else {
        return;
    };
    // Collected first: the filter reads `out.resources`, which composing writes (a BTreeMap, so order is moot).
    let retired: Vec<(String, Fields)> = observed
        .resources
        .iter()
        .filter(|(key, _)| !out.resources.contains_key(*key))
        .filter_map(|(key, r)| Some((key.clone(), retired(r.resource.as_ref()?, reachable)?)))
        .collect();
    for (key, object) in retired {
        out.compose(key, object, true);
    }
}

/// What to compose in place of an observed copy in its fill step; None for any other object, including a copy
/// already retired (every policy), which is then left out and deleted along with its remote Secret, and for a
/// copy on a cluster not `reachable` now.
fn retired(observed: &RawStruct, reachable: &[&str]) -> Option<Fields> {
    // Most dropped objects are not copies: only one shaped like a copy is read whole.
    if !observed
        .parse::<CopyShape>()
        .is_ok_and(|shape| shape.filling_copy())
    {
        return None;
    }
    let observed = observed.to_json().ok()?;
    let spec = observed.get("spec")?;
    let manifest = spec.pointer("/forProvider/manifest")?;
    let mut secret = fields!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": manifest.pointer("/metadata/name")?, "namespace": manifest.pointer("/metadata/namespace")?},
    });
    if let Some(secret_type) = manifest.get("type") {
        secret.insert("type", secret_type);
    }
    let provider_config = spec.pointer("/providerConfigRef/name")?.as_str()?;
    if !reachable.contains(&provider_config) {
        return None;
    }
    let mut retired = Object::new(secret, provider_config).management_policies(tree!(["*"]));
    if let Some(namespace) = observed.pointer("/metadata/namespace") {
        retired = retired.metadata(tree!({"namespace": namespace}));
    }
    Some(retired.build())
}

/// What tells an observed copy in its fill step from any other object, read without the rest of it.
#[derive(Deserialize)]
struct CopyShape<'a> {
    #[serde(borrow, default)]
    kind: &'a str,
    #[serde(borrow, default)]
    spec: CopyShapeSpec<'a>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CopyShapeSpec<'a> {
    #[serde(borrow, default)]
    management_policies: Vec<&'a str>,
    #[serde(borrow, default)]
    for_provider: CopyShapeForProvider<'a>,
}

#[derive(Default, Deserialize)]
struct CopyShapeForProvider<'a> {
    #[serde(borrow, default)]
    manifest: CopyShapeManifest<'a>,
}

#[derive(Default, Deserialize)]
struct CopyShapeManifest<'a> {
    #[serde(borrow, default)]
    kind: &'a str,
}

impl CopyShape<'_> {
    /// Whether the object is a provider-kubernetes Object copying a Secret, in its fill step.
    fn filling_copy(&self) -> bool {
        self.kind == "Object"
            && self.spec.for_provider.manifest.kind == "Secret"
            && self.spec.management_policies == FILL_POLICIES
    }
}

#[derive(Default, Deserialize)]
struct ObservedCopy {
    #[serde(default)]
    metadata: CopyMeta,
    #[serde(default)]
    spec: CopySpec,
    #[serde(default)]
    status: CopyStatus,
}

#[derive(Default, Deserialize)]
struct CopyMeta {
    #[serde(default)]
    finalizers: Vec<String>,
    #[serde(default)]
    generation: i64,
}

#[derive(Default, Deserialize)]
struct CopySpec {
    #[serde(default)]
    references: Vec<Value>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CopyStatus {
    #[serde(default)]
    conditions: Vec<GenerationCondition>,
    at_provider: Option<CopyAtProvider>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GenerationCondition {
    #[serde(flatten)]
    condition: ConditionView,
    observed_generation: Option<i64>,
}

#[derive(Default, Deserialize)]
struct CopyAtProvider {
    manifest: Option<Map<String, Value>>,
}

impl ObservedCopy {
    /// The remote Secret exists and the provider will not add its finalizer again.
    fn created(&self) -> bool {
        self.metadata.finalizers.iter().any(|f| f == PROVIDER_FINALIZER) && self.remote().is_some()
    }

    fn remote(&self) -> Option<&Map<String, Value>> {
        self.status.at_provider.as_ref()?.manifest.as_ref()
    }

    /// The provider replaced the Secret's data with its marker, which it does only with `--sanitize-secrets`.
    fn sanitized(&self) -> bool {
        self.remote()
            .and_then(|m| m.get("data"))
            .and_then(Value::as_object)
            .is_some_and(|data| data.len() == 1 && data.get(REDACTION_MARKER).is_some_and(Value::is_null))
    }

    /// The remote Secret lists `owner`, by UID.
    fn owned_by(&self, owner: &CopyOwner) -> bool {
        self.remote()
            .and_then(|m| m.get("metadata")?.get("ownerReferences")?.as_array())
            .is_some_and(|refs| {
                refs.iter()
                    .any(|r| r.get("uid").and_then(Value::as_str) == Some(&owner.uid))
            })
    }

    /// Why the provider's last reconcile of the generation that carries the references failed, if it did: its
    /// `Synced=False` message, cut to a status's length.
    fn refusal(&self) -> Option<String> {
        if self.spec.references.is_empty() {
            return None;
        }
        let failed = self.status.conditions.iter().find(|c| {
            c.condition.type_ == "Synced"
                && c.condition.status == "False"
                && c.observed_generation
                    .is_none_or(|g| g == self.metadata.generation)
        })?;
        Some(failed.condition.provider_words())
    }

    /// The references are applied: Ready, and Synced for the generation that carries them. provider-kubernetes
    /// dates only `Synced` with its generation; its `Ready` (the SuccessfulCreate policy) is True from the
    /// remote Secret's creation on, before any reference is resolved, and stays True when one fails.
    fn filled(&self) -> bool {
        let current = |c: &&GenerationCondition, type_: &str| {
            c.condition.type_ == type_
                && c.condition.status == "True"
                && c.observed_generation
                    .is_none_or(|g| g == self.metadata.generation)
        };
        !self.spec.references.is_empty()
            && self.status.conditions.iter().any(|c| current(&c, "Ready"))
            && self.status.conditions.iter().any(|c| current(&c, "Synced"))
    }
}

#[cfg(test)]
mod tests;
