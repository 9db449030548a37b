//! `leaderworkerset.x-k8s.io/v1 LeaderWorkerSet` for a Leader + Worker engine on the Standard stack.

use crate::wire::tree::{Tree, tree};

use super::{EngineWorkload, LEADER_ADDRESS_ENV, RANK_ENV};
use crate::api::model_deployment::Role;
use crate::workload::{pod, well_known::WORKLOAD_LABEL};

pub fn leader_worker_set(w: &EngineWorkload) -> Tree {
    let engine = w.engine;
    let leader = engine.member_index(Role::Leader);
    let worker = engine.member_index(Role::Worker);
    tree!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": &w.name, "namespace": w.namespace, "labels": {WORKLOAD_LABEL: &w.name}},
        "spec": {
            "replicas": engine.copies,
            // LeaderReady would deadlock engines whose leader turns Ready only once its workers have joined.
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": 1 + engine.members[worker].pods(),
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": pod::pod_template(w, leader, gang_env()),
                "workerTemplate": pod::pod_template(w, worker, gang_env()),
            },
        },
    })
}

/// LWS prepends `LWS_LEADER_ADDRESS` and `LWS_WORKER_INDEX` to every container's env, so template entries that
/// refer to them expand: each group's pods see their own group's leader.
fn gang_env() -> Vec<Tree> {
    vec![
        tree!({"name": LEADER_ADDRESS_ENV, "value": "$(LWS_LEADER_ADDRESS)"}),
        tree!({"name": RANK_ENV, "value": "$(LWS_WORKER_INDEX)"}),
    ]
}
