//! The placement ledger's contract (docs/scheduling.md): the labels and annotations a placed replica's
//! namespace Object carries on the control plane, written by the ModelDeployment composer and summed by the
//! InferenceCluster composer of the cluster it names.

use std::collections::BTreeMap;

/// Label naming the cluster a replica is placed on: the InferenceCluster selects its ledger by it.
pub const CLUSTER_LABEL: &str = "modelplane.ai/cluster";
/// Annotations on every Object of a replica, read back to keep a running replica where it is.
pub const REPLICA_ANNOTATION: &str = "modelplane.ai/replica";
pub const CLUSTER_ANNOTATION: &str = "modelplane.ai/cluster";
/// The ModelDeployment's name; its namespace is the Object's.
pub const DEPLOYMENT_ANNOTATION: &str = "modelplane.ai/deployment";
/// The nodes the replica's engines hold there, by pool: `pool-a=4,pool-b=2`.
pub const NODES_ANNOTATION: &str = "modelplane.ai/nodes";

/// The nodes annotation's value for nodes by pool.
pub fn format_nodes(nodes: &BTreeMap<String, u64>) -> String {
    let parts: Vec<String> = nodes.iter().map(|(pool, n)| format!("{pool}={n}")).collect();
    parts.join(",")
}

/// Nodes by pool from the nodes annotation, or None when it is malformed.
pub fn parse_nodes(value: &str) -> Option<BTreeMap<String, u64>> {
    let mut nodes = BTreeMap::new();
    for part in value.split(',').filter(|p| !p.is_empty()) {
        let (pool, n) = part.split_once('=')?;
        let n: u64 = n.parse().ok()?;
        if pool.is_empty() {
            return None;
        }
        let held = nodes.entry(pool.to_owned()).or_insert(0u64);
        *held = held.saturating_add(n);
    }
    Some(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_round_trip_and_reject_malformed() {
        let nodes = BTreeMap::from([("a".to_owned(), 4), ("b".to_owned(), 2)]);
        assert_eq!(format_nodes(&nodes), "a=4,b=2");
        assert_eq!(parse_nodes("a=4,b=2"), Some(nodes));
        assert_eq!(parse_nodes(""), Some(BTreeMap::new()));
        for bad in ["a", "a=x", "=3", "a=-1"] {
            assert_eq!(parse_nodes(bad), None, "{bad}");
        }
    }
}
