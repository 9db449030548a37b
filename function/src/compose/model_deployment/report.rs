//! What a ModelDeployment's status says about each replica: where its engines run and hold nodes, or why it
//! could not be placed.

use crate::{
    api::model_deployment::{EngineStatus, ModelDeploymentSpec, RejectionStatus, ReplicaStatus},
    schedule::{self, Placement, Unplaced},
};

use super::observed;

/// How many rejections an unplaced replica lists in status; the rest are counted. A fleet has hundreds of pools.
const MAX_REJECTIONS_SHOWN: usize = 10;

/// The nodes an observed placement holds, from the engines' pools and the spec.
pub fn previous_engines(
    spec: &ModelDeploymentSpec,
    placement: &observed::ObservedPlacement,
) -> Vec<EngineStatus> {
    spec.template
        .spec
        .engines
        .iter()
        .filter_map(|engine| {
            Some(EngineStatus {
                name: engine.name.clone(),
                pool: placement.pools.get(&engine.name)?.clone(),
                nodes: schedule::engine_nodes(engine),
            })
        })
        .collect()
}

pub fn engine_status(spec: &ModelDeploymentSpec, placement: &Placement) -> Vec<EngineStatus> {
    spec.template
        .spec
        .engines
        .iter()
        .zip(&placement.engines)
        .map(|(engine, at)| EngineStatus {
            name: engine.name.clone(),
            pool: at.pool.name.clone(),
            nodes: schedule::engine_nodes(engine),
        })
        .collect()
}

pub fn unplaced_status(index: u32, unplaced: &Unplaced) -> ReplicaStatus {
    let hidden = unplaced.rejections.len().saturating_sub(MAX_REJECTIONS_SHOWN);
    ReplicaStatus {
        replica: index,
        reason: Some(unplaced.reason),
        rejections: unplaced
            .rejections
            .iter()
            .take(MAX_REJECTIONS_SHOWN)
            .map(|r| RejectionStatus {
                cluster: r.cluster.clone(),
                pool: r.pool.clone(),
                reason: r.reason.clone(),
            })
            .collect(),
        more_rejections: (hidden > 0).then_some(hidden),
        ..ReplicaStatus::default()
    }
}
