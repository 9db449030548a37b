//! What runs now: each replica's placements, read back from the annotations on its observed Objects.
//!
//! A replica normally has one placement. While it moves it has two: the new one, composed first, and the old
//! one, kept running (marked retiring) until the new one is Ready, unless the old cluster is gone. That is make
//! before break: a replica's traffic never drops to nothing because it moved.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::replica::{CLUSTER_ANNOTATION, ENGINE_ANNOTATION, POOL_ANNOTATION, REPLICA_ANNOTATION};
use crate::{
    api::model_deployment::RESERVED_PREFIX,
    proto::v1::{Resource, RunFunctionRequest},
    schedule::Pin,
    wire::RawStruct,
};

/// Set on the Objects of a placement a replica is moving away from.
pub const RETIRING_ANNOTATION: &str = "modelplane.ai/retiring";

#[derive(Deserialize)]
struct AnnotatedObject {
    metadata: AnnotatedMeta,
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
}

impl ObservedReplicas {
    pub fn read(req: &RunFunctionRequest) -> Self {
        let mut replicas: BTreeMap<u32, BTreeMap<String, ObservedPlacement>> = BTreeMap::new();
        let Some(observed) = req.observed.as_ref() else {
            return Self { replicas };
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
            if let (Some(engine), Some(pool)) = (a.get(ENGINE_ANNOTATION), a.get(POOL_ANNOTATION)) {
                placement.pools.insert(engine.clone(), pool.clone());
            }
        }
        Self { replicas }
    }

    /// Every cluster some replica has a placement on, retiring ones included.
    pub fn clusters(&self) -> BTreeSet<String> {
        self.replicas
            .values()
            .flat_map(|placements| placements.keys().cloned())
            .collect()
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

/// An observed Object again as desired, marked retiring: kept exactly as it runs, so nothing about the old
/// placement changes while the new one comes up.
pub fn retained(observed: &Resource) -> Option<Value> {
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
        let mut annotations: Map<String, Value> = match meta.get("annotations") {
            Some(Value::Object(a)) => a
                .iter()
                .filter(|(k, _)| k.starts_with(RESERVED_PREFIX))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            _ => Map::new(),
        };
        annotations.insert(RETIRING_ANNOTATION.into(), json!("true"));
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
