//! Places a `ModelDeployment`'s replicas across the fleet and composes each replica's engines onto its
//! cluster's serving stack.
//!
//! Reads, as required resources, every InferenceCluster (where replicas can go), every ModelDeployment (the
//! nodes their placements already hold) and the referenced ModelCache. A replica that runs stays where it is:
//! its placement is read back from the annotations on its observed composed Objects.

use std::collections::BTreeMap;

use serde::{Deserialize, de::IgnoredAny};
use serde_json::{Map, Value, json};

use super::{API_VERSION, ComposeError, Output, remote};
use crate::{
    api::{Composite, model_deployment::ModelDeploymentSpec},
    proto::v1::{
        MatchLabels, Resource, ResourceSelector, RunFunctionRequest, Status, resource_selector::Match,
    },
    schedule::{self, ClusterView, Input, Outcome, Pin, Placement, Unplaced},
    sdk::request,
    wire::RawStruct,
};

mod cache;
mod replica;
mod validate;

pub const CLUSTERS: &str = "inference-clusters";
pub const DEPLOYMENTS: &str = "model-deployments";
pub const CACHE: &str = "model-cache";
/// How many rejections an unplaced replica lists in status; the rest are counted. A fleet has hundreds of pools.
const MAX_REJECTIONS_SHOWN: usize = 10;

pub fn compose(req: &RunFunctionRequest, xr: &RawStruct) -> Result<Output, ComposeError> {
    let md: Composite<ModelDeploymentSpec> = xr.parse()?;
    validate::validate(&md.spec)?;
    let namespace = md.metadata.effective_namespace().unwrap_or_default().to_owned();
    let mut out = Output {
        requirements: requirements(&md.spec, &namespace),
        ..Output::default()
    };
    let (Some(cluster_items), Some(deployment_items)) = (
        request::required_resources(req, CLUSTERS),
        request::required_resources(req, DEPLOYMENTS),
    ) else {
        out.condition("Scheduled", Status::ConditionUnknown, "WaitingForClusters", "");
        out.ready = Some(false);
        return Ok(out);
    };
    let clusters = read_clusters(cluster_items, &mut out.warnings);
    let used_elsewhere = used_by_others(deployment_items, md.metadata.effective_name(), &namespace);
    let pins = pins(req);
    let outcomes = schedule::schedule(&Input {
        spec: &md.spec.template.spec,
        replicas: md.spec.replicas,
        clusters: &clusters,
        pins: &pins,
        used_elsewhere: &used_elsewhere,
    })?;

    let cache_name = md
        .spec
        .template
        .spec
        .model_cache_ref
        .as_ref()
        .map(|r| r.name.as_str());
    let gate = cache::CacheGate::read(req, cache_name);
    let mut waiting_for_cache = Vec::new();
    let mut placements = Vec::with_capacity(outcomes.len());
    let (mut placed, mut ready_replicas) = (0u32, 0u32);
    let mut unplaced_reason = None;
    for (index, outcome) in (0u32..).zip(&outcomes) {
        crate::limits::check_deadline()?;
        match outcome {
            Outcome::Placed(placement) => {
                let ctx = replica::ReplicaContext {
                    xr_name: md.metadata.effective_name(),
                    xr_namespace: &namespace,
                    replica: index,
                    spec: &md.spec,
                };
                let started = md.spec.template.spec.engines.iter().any(|engine| {
                    request::observed_composed(req, &replica::engine_key(index, &engine.name)).is_some()
                });
                let blocked = gate.blocks(&placement.cluster.metadata.name).filter(|_| !started);
                let objects = match &blocked {
                    None => replica::objects(&ctx, placement),
                    Some(_) => vec![replica::namespace(&ctx, placement)],
                };
                let mut ready = blocked.is_none();
                for desired in objects {
                    let observed_ready = object_ready(request::observed_composed(req, &desired.key));
                    ready &= observed_ready;
                    out.compose(desired.key, desired.object, observed_ready);
                }
                placed += 1;
                ready_replicas += u32::from(ready);
                let mut status = placed_status(index, placement, &md.spec, ready);
                if let Some(why) = blocked {
                    status["waitingFor"] = json!(why);
                    waiting_for_cache.push(why);
                }
                placements.push(status);
            }
            Outcome::Unplaced(unplaced) => {
                unplaced_reason.get_or_insert(unplaced.reason.as_str());
                placements.push(unplaced_status(index, unplaced));
            }
        }
    }
    out.status.insert("placedReplicas".into(), json!(placed));
    out.status.insert("readyReplicas".into(), json!(ready_replicas));
    out.status.insert("replicas".into(), Value::Array(placements));
    match unplaced_reason {
        None => out.condition("Scheduled", Status::ConditionTrue, "AllReplicasPlaced", ""),
        Some(reason) => {
            let message = format!(
                "{} of {} replicas placed; see status.replicas",
                placed, md.spec.replicas
            );
            out.condition("Scheduled", Status::ConditionFalse, reason, message);
            out.ready = Some(false);
        }
    }
    // Reported only for placed replicas: with none placed there is nothing to wait for yet.
    if let (Some(cache), true) = (cache_name, placed > 0) {
        match waiting_for_cache.first() {
            None => out.condition("CacheReady", Status::ConditionTrue, "CacheStaged", ""),
            Some(why) => {
                let reason = if matches!(gate, cache::CacheGate::Missing { .. }) {
                    "CacheNotFound"
                } else {
                    "CacheNotReady"
                };
                let message = format!(
                    "{} replica(s) wait for ModelCache {cache:?}: {why}",
                    waiting_for_cache.len()
                );
                out.condition("CacheReady", Status::ConditionFalse, reason, message);
                out.ready = Some(false);
            }
        }
    }
    Ok(out)
}

/// The same on every call for the same spec, as Crossplane's requirements loop needs.
fn requirements(spec: &ModelDeploymentSpec, namespace: &str) -> BTreeMap<String, ResourceSelector> {
    let everything = |kind: &str| ResourceSelector {
        api_version: API_VERSION.into(),
        kind: kind.into(),
        r#match: Some(Match::MatchLabels(MatchLabels::default())),
        namespace: None,
    };
    let mut requirements = BTreeMap::from([
        (CLUSTERS.to_owned(), everything("InferenceCluster")),
        (DEPLOYMENTS.to_owned(), everything("ModelDeployment")),
    ]);
    if let Some(cache) = &spec.template.spec.model_cache_ref {
        requirements.insert(
            CACHE.to_owned(),
            ResourceSelector {
                api_version: API_VERSION.into(),
                kind: "ModelCache".into(),
                r#match: Some(Match::MatchName(cache.name.clone())),
                namespace: Some(namespace.to_owned()),
            },
        );
    }
    requirements
}

/// Decodes each cluster's narrow view. A cluster that cannot be read is skipped with a warning rather than
/// failing every deployment in the fleet.
fn read_clusters(items: &[Resource], warnings: &mut Vec<String>) -> Vec<ClusterView> {
    let mut clusters = Vec::with_capacity(items.len());
    for item in items {
        match item.resource.as_ref().map(RawStruct::parse::<ClusterView>) {
            Some(Ok(cluster)) => clusters.push(cluster),
            Some(Err(e)) => warnings.push(format!("cannot read an InferenceCluster, skipping it: {e}")),
            None => {}
        }
    }
    clusters
}

#[derive(Deserialize)]
struct DeploymentUsage {
    metadata: crate::api::ObjectMeta,
    #[serde(default)]
    status: UsageStatus,
}

#[derive(Default, Deserialize)]
struct UsageStatus {
    #[serde(default)]
    replicas: Vec<PlacementUsage>,
}

#[derive(Deserialize)]
struct PlacementUsage {
    #[serde(default)]
    cluster: Option<String>,
    #[serde(default)]
    engines: Vec<EngineUsage>,
}

#[derive(Deserialize)]
struct EngineUsage {
    pool: String,
    nodes: u64,
}

/// Nodes every other ModelDeployment's placed replicas hold, by (cluster, pool), from their status.
fn used_by_others(items: &[Resource], name: &str, namespace: &str) -> BTreeMap<(String, String), u64> {
    let mut used = BTreeMap::new();
    for item in items {
        let Some(Ok(other)) = item.resource.as_ref().map(RawStruct::parse::<DeploymentUsage>) else {
            continue;
        };
        if other.metadata.name == name && other.metadata.namespace.as_deref() == Some(namespace) {
            continue;
        }
        for placement in other.status.replicas {
            let Some(cluster) = placement.cluster else {
                continue;
            };
            for engine in placement.engines {
                let held = used.entry((cluster.clone(), engine.pool)).or_insert(0u64);
                *held = held.saturating_add(engine.nodes);
            }
        }
    }
    used
}

#[derive(Deserialize)]
struct AnnotatedObject {
    metadata: AnnotatedMeta,
}

#[derive(Deserialize)]
struct AnnotatedMeta {
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

/// Placements of running replicas, from the annotations on their observed workload Objects.
fn pins(req: &RunFunctionRequest) -> BTreeMap<u32, Pin> {
    let mut pins: BTreeMap<u32, Pin> = BTreeMap::new();
    let Some(observed) = req.observed.as_ref() else {
        return pins;
    };
    for resource in observed.resources.values() {
        let Some(Ok(object)) = resource
            .resource
            .as_ref()
            .map(RawStruct::parse::<AnnotatedObject>)
        else {
            continue;
        };
        let a = &object.metadata.annotations;
        let (Some(index), Some(cluster), Some(engine), Some(pool)) = (
            a.get(replica::REPLICA_ANNOTATION)
                .and_then(|r| r.parse::<u32>().ok()),
            a.get(replica::CLUSTER_ANNOTATION),
            a.get(replica::ENGINE_ANNOTATION),
            a.get(replica::POOL_ANNOTATION),
        ) else {
            continue;
        };
        let pin = pins.entry(index).or_insert_with(|| Pin {
            cluster: cluster.clone(),
            pools: BTreeMap::new(),
        });
        if &pin.cluster == cluster {
            pin.pools.insert(engine.clone(), pool.clone());
        }
    }
    pins
}

/// An Object is ready when provider-kubernetes says so; its readiness policy decides what that means.
fn object_ready(observed: Option<&Resource>) -> bool {
    remote::observed::<IgnoredAny>(observed).is_some_and(|o| o.is_ready())
}

fn placed_status(index: u32, placement: &Placement, spec: &ModelDeploymentSpec, ready: bool) -> Value {
    let engines: Vec<Value> = spec
        .template
        .spec
        .engines
        .iter()
        .zip(&placement.engines)
        .map(|(engine, at)| {
            let nodes = schedule::engine_nodes(engine);
            json!({"name": engine.name, "pool": at.pool.name, "nodes": nodes})
        })
        .collect();
    json!({
        "replica": index,
        "cluster": placement.cluster.metadata.name,
        "stack": placement.cluster.status.stack,
        "engines": engines,
        "ready": ready,
    })
}

fn unplaced_status(index: u32, unplaced: &Unplaced) -> Value {
    let shown: Vec<Value> = unplaced
        .rejections
        .iter()
        .take(MAX_REJECTIONS_SHOWN)
        .map(|r| {
            let mut entry = Map::from_iter([
                ("cluster".to_owned(), json!(r.cluster)),
                ("reason".to_owned(), json!(r.reason)),
            ]);
            if let Some(pool) = &r.pool {
                entry.insert("pool".into(), json!(pool));
            }
            Value::Object(entry)
        })
        .collect();
    let mut status = json!({
        "replica": index,
        "reason": unplaced.reason.as_str(),
        "rejections": shown,
    });
    let hidden = unplaced.rejections.len().saturating_sub(MAX_REJECTIONS_SHOWN);
    if hidden > 0 {
        status["moreRejections"] = json!(hidden);
    }
    status
}

#[cfg(test)]
mod tests;
