//! Dynamo: NVIDIA's stack. Grove PodCliqueSets gang-scheduled by the KAI Scheduler into Modelplane's queue, and
//! one ModelExpress server per cluster for GPU-to-GPU weight transfer.

use serde_json::json;

use super::{
    Component, ServingStack, StackObject,
    components::{GROVE, KAI_QUEUES, KAI_SCHEDULER, MODEL_EXPRESS},
    model_express,
};
use crate::api::inference_cluster::Stack;

pub struct Dynamo;

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
}

/// A KAI queue with no quota (-1: unlimited), so engines are limited by the GPUs the pools have, not by KAI.
fn queue(suffix: &'static str, name: &str, parent: Option<&str>) -> StackObject {
    let unlimited = json!({"quota": -1, "limit": -1, "overQuotaWeight": 1});
    let mut spec = json!({"resources": {"cpu": unlimited, "gpu": unlimited, "memory": unlimited}});
    if let Some(parent) = parent {
        spec["parentQueue"] = json!(parent);
    }
    StackObject::created(
        suffix,
        json!({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}),
    )
}
