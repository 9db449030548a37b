//! The Dynamo stack: NVIDIA's. Gangs are Grove PodCliqueSets scheduled all-or-nothing by KAI, and every engine
//! is told where the cluster's ModelExpress server is (it opts in itself, with `--load-format modelexpress`).

use serde_json::{Value, json};

use super::{EngineWorkload, ServingStack, pod_clique_set};
use crate::{
    api::{inference_cluster::Stack, model_deployment::Engine},
    schedule::ClusterView,
};

pub struct Dynamo;

/// Grove rejects a PodCliqueSet whose name, scaling-group name and clique name add up to more than this.
const GROVE_NAME_BUDGET: usize = 45;

impl ServingStack for Dynamo {
    fn stack(&self) -> Stack {
        Stack::Dynamo
    }

    fn workload_name_budget(&self, engine: &Engine) -> usize {
        let longest_clique = pod_clique_set::clique_names(engine)
            .iter()
            .map(String::len)
            .max()
            .unwrap_or(0);
        GROVE_NAME_BUDGET.saturating_sub(pod_clique_set::SCALING_GROUP.len() + longest_clique)
    }

    fn gang_workload(&self, w: &EngineWorkload) -> Value {
        pod_clique_set::pod_clique_set(w)
    }

    fn gang_ready_query(&self) -> &'static str {
        // A PodCliqueSet has no Available condition; Grove counts available replicas instead.
        "has(object.status.availableReplicas) && object.status.observedGeneration == object.metadata.generation \
         && object.status.availableReplicas >= object.spec.replicas"
    }

    fn engine_env(&self, cluster: &ClusterView) -> Vec<Value> {
        let Some(address) = &cluster.status.model_express_address else {
            return Vec::new();
        };
        // MODEL_EXPRESS_URL is deprecated but wins when both are set (the TRT-LLM path reads only it), so set both.
        vec![
            json!({"name": "MX_SERVER_ADDRESS", "value": address}),
            json!({"name": "MODEL_EXPRESS_URL", "value": address}),
        ]
    }
}
