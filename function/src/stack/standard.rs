//! Standard: Modelplane's own stack. Multi-node engines are LeaderWorkerSets; nothing else beyond the common rows.

use super::{Component, ServingStack, StackObject, components::LEADER_WORKER_SET};
use crate::api::inference_cluster::Stack;

pub struct Standard;

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
}
