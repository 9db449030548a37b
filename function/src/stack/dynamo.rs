//! The Dynamo stack: NVIDIA's. Gangs are Grove PodCliqueSets gang-scheduled by the KAI Scheduler into
//! Modelplane's queue; one ModelExpress server per cluster brokers GPU-to-GPU weight transfer, and every engine
//! is told where it is (the engine opts in itself, with `--load-format modelexpress`).

use crate::wire::tree::{fields, tree};

use super::{
    CacheUse, Component, EngineAdditions, EngineWorkload, ServingStack, StackObject,
    components::{GROVE, KAI_QUEUES, KAI_SCHEDULER, MODEL_EXPRESS},
    model_express, pod_clique_set,
};
use crate::api::{
    cluster_view::ClusterView,
    inference_cluster::{PoolStatus, Stack},
    model_deployment::Engine,
};

pub struct Dynamo;

/// Grove rejects a PodCliqueSet whose name, scaling-group name and clique name add up to more than this.
const GROVE_NAME_BUDGET: usize = 45;

/// Modelplane's root queue; engines go to its one leaf, so a platform team can add sibling roots for others.
const ROOT_QUEUE: &str = "modelplane-root";
/// The leaf queue every engine pod names in its `kai.scheduler/queue` label.
pub const ENGINE_QUEUE: &str = "modelplane";

impl ServingStack for Dynamo {
    fn stack(&self) -> Stack {
        Stack::Dynamo
    }

    fn components(&self) -> &'static [Component] {
        &[GROVE, KAI_SCHEDULER, KAI_QUEUES, MODEL_EXPRESS]
    }

    fn objects(&self) -> Vec<(&'static str, Vec<StackObject>)> {
        vec![
            (
                KAI_QUEUES.name,
                vec![
                    queue("root", ROOT_QUEUE, None),
                    queue("engines", ENGINE_QUEUE, Some(ROOT_QUEUE)),
                ],
            ),
            (MODEL_EXPRESS.name, model_express::objects()),
        ]
    }

    fn model_express_address(&self) -> Option<String> {
        Some(model_express::address())
    }

    fn kai_queue(&self) -> Option<&'static str> {
        Some(ENGINE_QUEUE)
    }

    fn workload_name_budget(&self, engine: &Engine) -> usize {
        let longest_clique = pod_clique_set::clique_names(engine)
            .iter()
            .map(String::len)
            .max()
            .unwrap_or(0);
        GROVE_NAME_BUDGET.saturating_sub(pod_clique_set::SCALING_GROUP.len() + longest_clique)
    }

    fn gang_workload(&self, w: &EngineWorkload) -> crate::wire::tree::Tree {
        pod_clique_set::pod_clique_set(w)
    }

    fn gang_ready_query(&self) -> &'static str {
        // A PodCliqueSet has no Available condition; Grove counts available replicas instead.
        "has(object.status.availableReplicas) && object.status.observedGeneration == object.metadata.generation \
         && object.status.availableReplicas >= object.spec.replicas"
    }

    fn gang_components(&self) -> &'static [&'static str] {
        &[GROVE.name, KAI_SCHEDULER.name, KAI_QUEUES.name]
    }

    fn engine_additions(
        &self,
        cluster: &ClusterView,
        pool: &PoolStatus,
        cache: Option<&CacheUse>,
    ) -> EngineAdditions {
        match (&cluster.status.model_express_address, cache) {
            (Some(address), Some(cache)) => model_express::client(address, pool, cache),
            // Without a cache there are no staged weights for peers to share.
            _ => EngineAdditions::default(),
        }
    }
}

/// A KAI queue with no quota (-1: unlimited), so engines are limited by the GPUs the pools have, not by KAI.
fn queue(suffix: &'static str, name: &str, parent: Option<&str>) -> StackObject {
    let unlimited = || tree!({"quota": -1, "limit": -1, "overQuotaWeight": 1});
    let mut spec = fields!({"resources": {"cpu": unlimited(), "gpu": unlimited(), "memory": unlimited()}});
    if let Some(parent) = parent {
        spec.insert("parentQueue", parent);
    }
    StackObject::created(
        suffix,
        tree!({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}),
    )
}
