//! Deletion order, held by Crossplane `Usage`s (`protection.crossplane.io/v1beta1`): while a Usage exists, the
//! API server refuses to delete the resource it protects, and `replayDeletion` retries that deletion as soon as
//! the user is gone. Crossplane deletes every composed resource of a deleted composite at once; the Usages turn
//! that into: what runs on the cluster (Releases, Objects) and what hangs off it (node groups, add-ons, pod
//! identities) first, then the cluster, then its network and role; EFS before the network; each pod identity
//! before its role; the node groups before the node role.
//!
//! The node role needs its Usages even though IAM refuses to delete a role still in an instance profile:
//! deleting a role first detaches its policies, so without them the nodes of a group still being drained
//! would lose their worker, CNI and registry permissions while the workloads on them are uninstalled.

use serde_json::{Value, json};

use crate::compose::Output;
use crate::compose::shared::CONTROL_NAMESPACE;

const USAGE_API_VERSION: &str = "protection.crossplane.io/v1beta1";
/// The composed node role (absent when the spec brings its own ARN).
const NODE_ROLE: &str = "eks-role-node";

/// One Usage for every (user, used) pair composed in `out`, named after the two so it is stable.
pub fn compose(out: &mut Output, cluster: &str) {
    let mut pairs = Vec::new();
    for (key, composed) in &out.resources {
        let by = &composed.object;
        let kind = by.get("kind").and_then(Value::as_str).unwrap_or_default();
        let uses: &[&str] = match kind {
            "NodePool" => &[super::KEY_CLUSTER, NODE_ROLE],
            "Addon" | "Release" | "Object" => &[super::KEY_CLUSTER],
            "PodIdentityAssociation" => &[super::KEY_CLUSTER],
            "Cluster" => &[super::KEY_NETWORK, "eks-role-cluster"],
            "FileSystem" => &[super::KEY_NETWORK],
            _ => &[],
        };
        let mut used: Vec<String> = uses.iter().map(|u| (*u).to_owned()).collect();
        if kind == "PodIdentityAssociation" {
            used.push(key.replace("eks-podidentity-", "eks-role-"));
        }
        for of in used {
            if out.resources.contains_key(&of) && of != *key {
                pairs.push((key.clone(), of));
            }
        }
    }
    for (by_key, of_key) in pairs {
        let (Some(by), Some(of)) = (out.resources.get(&by_key), out.resources.get(&of_key)) else {
            continue;
        };
        let usage = usage(cluster, &by_key, &by.object, &of_key, &of.object);
        out.compose(format!("usage-{by_key}-{of_key}"), usage, false);
    }
}

fn usage(
    cluster: &str,
    by_key: &str,
    by: &serde_json::Map<String, Value>,
    of_key: &str,
    of: &serde_json::Map<String, Value>,
) -> Value {
    let reference = |o: &serde_json::Map<String, Value>| {
        json!({
            "apiVersion": o.get("apiVersion").cloned().unwrap_or_default(),
            "kind": o.get("kind").cloned().unwrap_or_default(),
            "resourceRef": {"name": o.get("metadata").and_then(|m| m.get("name")).cloned().unwrap_or_default()},
        })
    };
    json!({
        "apiVersion": USAGE_API_VERSION,
        "kind": "Usage",
        "metadata": {"name": format!("{cluster}-{by_key}-uses-{of_key}"), "namespace": CONTROL_NAMESPACE},
        "spec": {
            "of": reference(of),
            "by": reference(by),
            "replayDeletion": true,
            "reason": format!("{by_key} must be deleted before {of_key}"),
        },
    })
}
