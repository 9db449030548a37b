//! The node pools: the system pool inline on the cluster and one `KubernetesNodePool` per `spec.nodePools` entry,
//! hardware from its InferenceClass and size from the pool.

use std::collections::BTreeMap;

use crate::wire::tree::{Tree, fields, tree};

use super::{Context, VKE_API_VERSION, node_pool_key};
use crate::{
    api::{inference_class::InferenceClassSpec, inference_cluster::InferenceClusterSpec},
    compose::{
        Output,
        inference_cluster::{check::SYSTEM_POOL, upjet},
    },
};

pub const SYSTEM: &str = SYSTEM_POOL;

/// The system pool runs the controllers (gateway, schedulers, Prometheus, the cache NFS server) off the GPU
/// nodes: 6 vCPUs and 16 GB, which the common components fit in with room for the NFS server. Two nodes so a node
/// going down leaves the controllers somewhere to run, growing to three under load through VKE's own autoscaler.
/// Fixed: provider-upjet-vultr honours the inline pool only when the cluster is created.
const SYSTEM_PLAN: &str = "vc2-6c-16gb";
const SYSTEM_NODES: u32 = 2;
const SYSTEM_MAX_NODES: u32 = 3;

/// The cluster's inline pool, as `forProvider.nodePools` takes it.
pub fn system_pool() -> Tree {
    tree!({
        "label": SYSTEM,
        "plan": SYSTEM_PLAN,
        "nodeQuantity": SYSTEM_NODES,
        "autoScaler": true,
        "minNodes": SYSTEM_NODES,
        "maxNodes": SYSTEM_MAX_NODES,
        "labels": labels(&upjet::pool_labels(SYSTEM, None)),
    })
}

/// One pool per `spec.nodePools` entry, attached to the cluster `cluster_id` names. A pool that exists keeps the
/// cluster it was attached to while the cluster is not observed Ready; one that does not waits for the ID.
pub fn compose(
    out: &mut Output,
    ctx: &Context,
    spec: &InferenceClusterSpec,
    classes: &BTreeMap<String, InferenceClassSpec>,
    cluster_id: Option<&str>,
) {
    let taints: Vec<Tree> = upjet::gpu_taints(spec)
        .into_iter()
        .map(|t| tree!({"key": t.key, "value": t.value, "effect": t.effect.as_str()}))
        .collect();
    for pool in &spec.node_pools {
        let key = node_pool_key(&pool.name);
        let Some(cluster_id) = cluster_id
            .map(str::to_owned)
            .or_else(|| ctx.spec_string(&key, "/spec/forProvider/clusterId"))
        else {
            continue;
        };
        let Some(class) = classes
            .get(&pool.class_name)
            .and_then(|c| c.provisioning.vultr.as_ref())
        else {
            continue; // The composer has refused a class without provisioning.vultr by name.
        };
        let (min, max) = upjet::node_range(pool);
        let mut for_provider = fields!({
            "clusterId": cluster_id,
            "label": &pool.name,
            "plan": &class.plan,
            "nodeQuantity": pool.node_count,
            "labels": labels(&upjet::pool_labels(&pool.name, Some(&class.accelerator.type_))),
            "taints": taints.clone(),
        });
        // VKE's own autoscaler moves the pool within the range; a pool with none stays at its node count.
        if max > min {
            for_provider.insert("autoScaler", true);
            for_provider.insert("minNodes", min);
            for_provider.insert("maxNodes", max);
        } else {
            for_provider.insert("autoScaler", false);
        }
        let mr = ctx.managed(
            VKE_API_VERSION,
            "KubernetesNodePool",
            &format!("{}-{}", ctx.name, pool.name),
            for_provider.into(),
        );
        out.compose(key, mr.build(), false);
    }
}

/// Node labels as VKE takes them: a list of key/value pairs.
fn labels(labels: &BTreeMap<String, String>) -> Vec<Tree> {
    labels
        .iter()
        .map(|(key, value)| tree!({"key": key, "value": value}))
        .collect()
}
