//! The Standard stack: Modelplane's own. Multi-node engines are LeaderWorkerSets; beyond the LWS controller it
//! installs nothing but the common rows.

use super::{
    CacheUse, Component, EngineAdditions, EngineWorkload, ServingStack, StackObject,
    components::LEADER_WORKER_SET, leader_worker_set,
};
use crate::api::{
    cluster_view::ClusterView,
    inference_cluster::{PoolStatus, Stack},
    model_deployment::Engine,
};

pub struct Standard;

/// LWS names pods `<lws>-<group>-<worker>` and StatefulSets add a revision hash label of the same name plus
/// 11 characters; 40 leaves room for thousands of groups and workers inside a 63-character label.
const LWS_NAME_BUDGET: usize = 40;

impl ServingStack for Standard {
    fn stack(&self) -> Stack {
        Stack::Standard
    }

    fn components(&self) -> &'static [Component] {
        &[LEADER_WORKER_SET]
    }

    fn objects(&self) -> Vec<(&'static str, Vec<StackObject>)> {
        Vec::new()
    }

    fn model_express_address(&self) -> Option<String> {
        None
    }

    fn kai_queue(&self) -> Option<&'static str> {
        None
    }

    fn workload_name_budget(&self, _engine: &Engine) -> usize {
        LWS_NAME_BUDGET
    }

    fn gang_workload(&self, w: &EngineWorkload) -> crate::wire::tree::Tree {
        leader_worker_set::leader_worker_set(w)
    }

    fn gang_ready_query(&self) -> &'static str {
        super::AVAILABLE_QUERY
    }

    fn gang_components(&self) -> &'static [&'static str] {
        &[LEADER_WORKER_SET.name]
    }

    fn engine_additions(&self, _: &ClusterView, _: &PoolStatus, _: Option<&CacheUse>) -> EngineAdditions {
        EngineAdditions::default()
    }
}
