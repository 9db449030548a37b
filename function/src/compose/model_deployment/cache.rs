//! Holds engines back until their ModelCache is staged on their cluster.
//!
//! An engine started on an empty cache volume would download the model itself (slowly, per replica) or fail,
//! so a placed replica whose cluster does not have the cache `Ready` gets its namespace but no engines, and
//! the deployment says what it is waiting for. The ModelCache composer stages onto every cluster a replica is
//! placed on (it reads `status.replicas`), which closes the loop. A replica whose engines already run is never
//! stopped because its cache's status changed.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::CACHE;
use crate::{
    api::{
        model_cache::{ModelCacheSpec, ModelCacheStatus, Phase},
        model_deployment::ModelDeploymentSpec,
    },
    proto::v1::RunFunctionRequest,
    sdk::request,
    stack::CacheUse,
};

/// What the deployment's cache allows, cluster by cluster.
pub enum CacheGate {
    /// No `modelCacheRef`: nothing to wait for.
    NotUsed,
    /// Crossplane has not fetched the ModelCache yet.
    Unresolved,
    /// The referenced ModelCache does not exist.
    Missing { name: String },
    /// The cache's phase on each cluster it is staged on.
    Staged {
        name: String,
        size_gib: Option<u64>,
        phases: BTreeMap<String, (Phase, String)>,
    },
}

#[derive(Deserialize)]
struct CacheView {
    #[serde(default)]
    spec: Option<ModelCacheSpec>,
    #[serde(default)]
    status: ModelCacheStatus,
}

impl CacheGate {
    /// The gate of the deployment's cache: only the ModelCache of that name in the deployment's own `namespace`
    /// counts, whatever else arrives (another team's cache of the same name is not this one).
    pub fn read(req: &RunFunctionRequest, spec: &ModelDeploymentSpec, namespace: &str) -> Self {
        let Some(name) = spec.cache_name() else {
            return Self::NotUsed;
        };
        let Some(found) = request::required_resources(req, CACHE) else {
            return Self::Unresolved;
        };
        let Some(cache) = request::named_in(found, name, namespace).and_then(|c| c.parse::<CacheView>().ok())
        else {
            return Self::Missing {
                name: name.to_owned(),
            };
        };
        let phases = cache
            .status
            .clusters
            .into_iter()
            .map(|c| (c.cluster, (c.phase, c.reason)))
            .collect();
        Self::Staged {
            name: name.to_owned(),
            size_gib: cache
                .spec
                .as_ref()
                .map(|s| u64::from(s.hugging_face.size_gib))
                .filter(|gib| *gib > 0),
            phases,
        }
    }

    /// The cache the engines load from, as the stacks see it.
    pub fn cache_use<'a>(&'a self, namespace: &'a str) -> Option<CacheUse<'a>> {
        let (name, size_gib) = match self {
            Self::NotUsed | Self::Unresolved => return None,
            Self::Missing { name } => (name, None),
            Self::Staged { name, size_gib, .. } => (name, *size_gib),
        };
        Some(CacheUse {
            namespace,
            name,
            size_gib,
        })
    }

    /// Why engines may not start on `cluster` yet, or `None` when they may.
    pub fn blocks(&self, cluster: &str) -> Option<String> {
        match self {
            Self::NotUsed => None,
            Self::Unresolved => Some("waiting for Crossplane to fetch the ModelCache".into()),
            Self::Missing { name } => Some(format!(
                "ModelCache {name:?} (spec.template.spec.modelCacheRef) not found"
            )),
            Self::Staged { name, phases, .. } => match phases.get(cluster) {
                Some((Phase::Ready, _)) => None,
                Some((phase, reason)) if reason.is_empty() => {
                    Some(format!("ModelCache {name:?} is {phase:?} on {cluster}"))
                }
                Some((phase, reason)) => {
                    Some(format!("ModelCache {name:?} is {phase:?} on {cluster}: {reason}"))
                }
                None => Some(format!("ModelCache {name:?} is not staged on {cluster} yet")),
            },
        }
    }
}
