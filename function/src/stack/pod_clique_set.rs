//! `grove.io/v1alpha1 PodCliqueSet` for a Leader + Worker engine on the Dynamo stack.
//!
//! One PodCliqueSet replica holds a scaling group `gang` over the leader and worker cliques, with one group
//! replica per engine copy. `minAvailable = copies` makes every copy part of the base PodGang, so KAI places
//! the whole engine or none of it.
//!
//! The leader address and rank must resolve on every Grove release we support. Released Grove (up to
//! v0.1.0-alpha.12-rc1, including the alpha.6 we pin) *appends* its `GROVE_*` variables after the template's
//! env, so a template entry referring to them would stay a literal `$(GROVE_…)`. The address is therefore built
//! from names this composer chooses plus the scaling-group replica index, read through the downward API from a
//! pod label every Grove release sets. The rank is a constant per clique: the leader is 0, and each worker rank
//! gets its own one-pod clique when a copy has several workers, since Kubernetes cannot add one to an index.

use crate::wire::tree::{Tree, tree};

use super::{EngineWorkload, LEADER_ADDRESS_ENV, RANK_ENV};
use crate::api::model_deployment::{Engine, Role};
use crate::workload::{pod, well_known::WORKLOAD_LABEL};

pub const SCALING_GROUP: &str = "gang";
const LEADER_CLIQUE: &str = "leader";
/// KAI queue label; pods and the PodCliqueSet both carry it (Grove main requires it on one of them).
const KAI_QUEUE_LABEL: &str = "kai.scheduler/queue";
const KAI_SCHEDULER: &str = "kai-scheduler";
/// Set on every pod of a scaling group by every Grove release: which copy of the gang the pod belongs to.
const GANG_INDEX_LABEL: &str = "grove.io/podcliquescalinggroup-replica-index";
const GANG_INDEX_ENV: &str = "MODELPLANE_GANG_INDEX";

/// The clique names of an engine: `leader`, then `worker` for one worker per copy or `worker-1`..`worker-N`.
pub fn clique_names(engine: &Engine) -> Vec<String> {
    let workers = worker_nodes(engine);
    let mut names = vec![LEADER_CLIQUE.to_owned()];
    if workers == 1 {
        names.push("worker".into());
    } else {
        names.extend((1..=workers).map(|rank| format!("worker-{rank}")));
    }
    names
}

fn worker_nodes(engine: &Engine) -> u32 {
    engine
        .members
        .iter()
        .find(|m| m.role == Role::Worker)
        .map_or(0, |m| m.pods())
}

pub fn pod_clique_set(w: &EngineWorkload) -> Tree {
    let engine = w.engine;
    let queue = w
        .cluster
        .status
        .kai_queue
        .as_deref()
        .unwrap_or(super::dynamo::ENGINE_QUEUE);
    let leader = engine.member_index(Role::Leader);
    let worker = engine.member_index(Role::Worker);
    let names = clique_names(engine);
    let cliques: Vec<Tree> = names
        .iter()
        .enumerate()
        .map(|(rank, name)| {
            let m = if rank == 0 { leader } else { worker };
            clique(w, m, name, rank, queue)
        })
        .collect();
    tree!({
        "apiVersion": "grove.io/v1alpha1",
        "kind": "PodCliqueSet",
        "metadata": {
            "name": &w.name,
            "namespace": w.namespace,
            "labels": {WORKLOAD_LABEL: &w.name, KAI_QUEUE_LABEL: queue},
        },
        "spec": {
            // The CRD defaults replicas to 0, which would run nothing.
            "replicas": 1,
            "template": {
                // Explicit with no startsAfter: every clique starts at once. Waiting for a Ready leader would
                // deadlock engines whose leader is Ready only after its workers join.
                "cliqueStartupType": "CliqueStartupTypeExplicit",
                // Written out as Grove's defaulting webhook would, so provider-kubernetes sees no drift.
                "terminationDelay": "4h",
                "headlessServiceConfig": {"publishNotReadyAddresses": true},
                "podCliqueScalingGroups": [{
                    "name": SCALING_GROUP,
                    "cliqueNames": names,
                    "replicas": engine.copies,
                    "minAvailable": engine.copies,
                }],
                "cliques": cliques,
            },
        },
    })
}

fn clique(w: &EngineWorkload, m: usize, name: &str, rank: usize, queue: &str) -> Tree {
    let member = &w.engine.members[m];
    let mut labels = pod::pod_labels(w, member);
    labels.insert(KAI_QUEUE_LABEL, queue);
    let mut pod_spec = pod::pod_spec(w, m, gang_env(w, rank));
    pod_spec.insert("schedulerName", KAI_SCHEDULER);
    pod_spec.insert("restartPolicy", "Always");
    pod_spec.insert("terminationGracePeriodSeconds", 30);
    let replicas = if rank == 0 || worker_nodes(w.engine) > 1 {
        1
    } else {
        member.pods()
    };
    tree!({
        "name": name,
        "labels": labels,
        "annotations": pod::pod_annotations(w, member),
        "spec": {"roleName": name, "replicas": replicas, "minAvailable": replicas, "podSpec": pod_spec},
    })
}

/// The leader pod's FQDN for the pod's own copy, and its rank. Grove names the leader's host
/// `<pcs>-0-<group>-<copy>-leader-0` under the headless Service `<pcs>-0`.
fn gang_env(w: &EngineWorkload, rank: usize) -> Vec<Tree> {
    let pcs = &w.name;
    let address = format!(
        "{pcs}-0-{SCALING_GROUP}-$({GANG_INDEX_ENV})-{LEADER_CLIQUE}-0.{pcs}-0.{}.svc.cluster.local",
        w.namespace
    );
    vec![
        tree!({"name": GANG_INDEX_ENV,
               "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.labels['{GANG_INDEX_LABEL}']")}}}),
        tree!({"name": LEADER_ADDRESS_ENV, "value": address}),
        tree!({"name": RANK_ENV, "value": rank.to_string()}),
    ]
}
