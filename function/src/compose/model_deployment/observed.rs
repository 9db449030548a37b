//! What runs now: each replica's placements, read back from the annotations on its observed Objects.
//!
//! A replica normally has one placement. While it moves it has two: the new one, composed first, and the old
//! one, kept running (marked retiring) until the new one is Ready and, where it has an endpoint, routed by the
//! services that select it (handover.rs), unless the old cluster is gone. That is make before break: a
//! replica's traffic never drops to nothing because it moved.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde::{Deserialize, de::IgnoredAny};
use serde_json::{Map, Value, json};

use super::replica::{CLUSTER_ANNOTATION, ENGINE_ANNOTATION, POOL_ANNOTATION, REPLICA_ANNOTATION};
use crate::wire::tree::Fields;
use crate::{
    api::model_deployment::RESERVED_PREFIX,
    compose::{
        Output,
        remote::{ConditionView, Observed},
    },
    proto::v1::{Resource, RunFunctionRequest},
    schedule::Pin,
    sdk::request,
    wire::RawStruct,
};

/// Set on the Objects of a placement a replica is moving away from.
pub const RETIRING_ANNOTATION: &str = "modelplane.ai/retiring";

/// An observed Object: its annotations, and its conditions read as every other observed resource's are.
#[derive(Deserialize)]
struct AnnotatedObject {
    metadata: AnnotatedMeta,
    #[serde(flatten)]
    observed: Observed<IgnoredAny>,
}

#[derive(Deserialize)]
struct AnnotatedMeta {
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

/// One placement of one replica as observed: where, which pool each engine is on, and its composed keys.
#[derive(Debug, Default)]
pub struct ObservedPlacement {
    /// Pool per engine name.
    pub pools: BTreeMap<String, String>,
    pub keys: Vec<String>,
    pub retiring: bool,
}

/// Placements by replica index, then by cluster name.
#[derive(Debug, Default)]
pub struct ObservedReplicas {
    pub replicas: BTreeMap<u32, BTreeMap<String, ObservedPlacement>>,
    /// Per cluster, the latest time one of the deployment's Objects there became Synced: the provider reached
    /// the cluster's API server then, whatever the cluster's own status, which may lag, says.
    pub answered: BTreeMap<String, Timestamp>,
}

impl ObservedReplicas {
    pub fn read(req: &RunFunctionRequest) -> Self {
        let mut replicas: BTreeMap<u32, BTreeMap<String, ObservedPlacement>> = BTreeMap::new();
        let mut answered: BTreeMap<String, Timestamp> = BTreeMap::new();
        let Some(observed) = req.observed.as_ref() else {
            return Self { replicas, answered };
        };
        for (key, resource) in &observed.resources {
            let Some(Ok(object)) = resource
                .resource
                .as_ref()
                .map(RawStruct::parse::<AnnotatedObject>)
            else {
                continue;
            };
            let a = &object.metadata.annotations;
            let (Some(index), Some(cluster)) = (
                a.get(REPLICA_ANNOTATION).and_then(|r| r.parse::<u32>().ok()),
                a.get(CLUSTER_ANNOTATION),
            ) else {
                continue;
            };
            let placement = replicas
                .entry(index)
                .or_default()
                .entry(cluster.clone())
                .or_default();
            placement.keys.push(key.clone());
            placement.retiring |= a.contains_key(RETIRING_ANNOTATION);
            let synced_at = object
                .observed
                .condition("Synced")
                .filter(|c| c.status == "True")
                .and_then(ConditionView::transitioned_at);
            if let Some(at) = synced_at {
                let latest = answered.entry(cluster.clone()).or_insert(at);
                *latest = (*latest).max(at);
            }
            if let (Some(engine), Some(pool)) = (a.get(ENGINE_ANNOTATION), a.get(POOL_ANNOTATION)) {
                placement.pools.insert(engine.clone(), pool.clone());
            }
        }
        Self { replicas, answered }
    }

    /// Every cluster some replica has a placement on, retiring ones included.
    pub fn clusters(&self) -> BTreeSet<String> {
        self.replicas
            .values()
            .flat_map(|placements| placements.keys().cloned())
            .collect()
    }

    /// Replica `index`'s placement on `cluster`, if it has one.
    pub fn placement(&self, index: u32, cluster: &str) -> Option<&ObservedPlacement> {
        self.replicas.get(&index)?.get(cluster)
    }

    /// Where each running replica should stay: its placement that is not retiring.
    pub fn pins(&self) -> BTreeMap<u32, Pin> {
        self.replicas
            .iter()
            .filter_map(|(index, placements)| {
                let (cluster, placement) = placements
                    .iter()
                    .find(|(_, p)| !p.retiring && !p.pools.is_empty())?;
                Some((
                    *index,
                    Pin {
                        cluster: cluster.clone(),
                        pools: placement.pools.clone(),
                    },
                ))
            })
            .collect()
    }
}

/// Hands a replica's Objects of an older key shape over to the Objects composed now under new keys for the same
/// remote objects (keys did not always name the cluster). Crossplane would delete an Object whose key is no
/// longer composed, and with it the remote workload its successor manages: so each such Object stays, only
/// observing, until the replica serves, and is let go only once it is seen to observe, which deletes nothing
/// remote. An Object whose remote object nothing composed now manages is not kept: it goes as before.
pub fn hand_over(
    out: &mut Output,
    req: &RunFunctionRequest,
    placement: &ObservedPlacement,
    serving: bool,
    ready: fn(Option<&Resource>) -> bool,
) {
    let stale: Vec<&String> = placement
        .keys
        .iter()
        .filter(|key| !out.resources.contains_key(*key))
        .collect();
    if stale.is_empty() {
        return;
    }
    let managed: BTreeSet<[&str; 5]> = out
        .resources
        .values()
        .filter_map(|composed| remote_identity(&composed.object))
        .collect();
    let mut kept = Vec::new();
    for key in stale {
        let Some(resource) = request::observed_composed(req, key) else {
            continue;
        };
        let Some(Value::Object(object)) = resource.resource.as_ref().and_then(|r| r.to_json().ok()) else {
            continue;
        };
        let has_successor = remote_identity(&object).is_some_and(|id| managed.contains(&id));
        let released = serving && only_observes(&object);
        if has_successor
            && !released
            && let Some(object) = handed_over(resource)
        {
            kept.push((key.clone(), object, ready(Some(resource))));
        }
    }
    for (key, object, ready) in kept {
        out.compose(key, object, ready);
    }
}

/// An observed Object again as desired, marked retiring: kept exactly as it runs, so nothing about the old
/// placement changes while the new one comes up.
pub fn retained(observed: &Resource) -> Option<Fields> {
    let mut object = kept(observed)?;
    object["metadata"]["annotations"][RETIRING_ANNOTATION] = Value::from("true");
    as_composed(object)
}

/// Management policies of an Object that has handed its remote object over to another Object: it only watches,
/// so it neither writes over the new Object's manifest nor deletes the remote object when it goes.
const HANDED_OVER_POLICIES: [&str; 1] = ["Observe"];

/// An observed Object whose remote object another composed Object now manages (its key has an older shape),
/// kept as it runs but only observing, and orphaning on deletion for a provider without management policies.
fn handed_over(observed: &Resource) -> Option<Fields> {
    let mut object = kept(observed)?;
    object["spec"]["managementPolicies"] = json!(HANDED_OVER_POLICIES);
    object["spec"]["deletionPolicy"] = Value::from("Orphan");
    as_composed(object)
}

/// An observed object, edited as JSON, composed again: moved into the tree composed objects are.
fn as_composed(object: Value) -> Option<Fields> {
    match object {
        Value::Object(map) => Some(Fields::from(map)),
        _ => None,
    }
}

/// Whether an observed Object only reads its remote object (a placement's pod report, or an Object handed over):
/// its readiness says nothing about whether the placement serves.
pub fn only_reads(observed: &Resource) -> bool {
    match observed.resource.as_ref().and_then(|r| r.to_json().ok()) {
        Some(Value::Object(object)) => only_observes(&object),
        _ => false,
    }
}

/// Whether an observed Object was handed over already, so that deleting it now deletes nothing remote.
fn only_observes(observed: &Map<String, Value>) -> bool {
    observed
        .get("spec")
        .and_then(|spec| spec.get("managementPolicies"))
        == Some(&json!(HANDED_OVER_POLICIES))
}

/// What remote object an Object manages: its provider config and the manifest's kind, namespace and name.
fn remote_identity(object: &Map<String, Value>) -> Option<[&str; 5]> {
    let spec = object.get("spec")?;
    let manifest = spec.pointer("/forProvider/manifest")?;
    fn text<'v>(v: &'v Value, pointer: &str) -> Option<&'v str> {
        v.pointer(pointer).and_then(Value::as_str)
    }
    Some([
        text(spec, "/providerConfigRef/name")?,
        text(manifest, "/apiVersion")?,
        text(manifest, "/kind")?,
        text(manifest, "/metadata/namespace").unwrap_or_default(),
        text(manifest, "/metadata/name")?,
    ])
}

/// An observed Object as desired again: its type, namespace, our own annotations and its spec.
fn kept(observed: &Resource) -> Option<Value> {
    let object = observed.resource.as_ref()?.to_json().ok()?;
    let Value::Object(mut object) = object else {
        return None;
    };
    let mut metadata = Map::new();
    if let Some(Value::Object(meta)) = object.remove("metadata") {
        if let Some(namespace) = meta.get("namespace") {
            metadata.insert("namespace".into(), namespace.clone());
        }
        // Only ours: Crossplane writes its own annotations and labels on every composed resource itself.
        let annotations: Map<String, Value> = match meta.get("annotations") {
            Some(Value::Object(a)) => a
                .iter()
                .filter(|(k, _)| k.starts_with(RESERVED_PREFIX))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            _ => Map::new(),
        };
        metadata.insert("annotations".into(), Value::Object(annotations));
        // The ledger label too: a retiring placement holds its nodes until it is gone.
        if let Some(Value::Object(labels)) = meta.get("labels") {
            let ours: Map<String, Value> = labels
                .iter()
                .filter(|(k, _)| k.starts_with(RESERVED_PREFIX))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !ours.is_empty() {
                metadata.insert("labels".into(), Value::Object(ours));
            }
        }
    }
    let mut out = Map::new();
    for field in ["apiVersion", "kind"] {
        if let Some(value) = object.remove(field) {
            out.insert(field.into(), value);
        }
    }
    out.insert("metadata".into(), Value::Object(metadata));
    out.insert("spec".into(), object.remove("spec")?);
    Some(Value::Object(out))
}
