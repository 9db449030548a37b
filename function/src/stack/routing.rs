//! How a replica is reached on its cluster, the same on both stacks: the cluster gateway, and per replica an
//! InferencePool over its serving pods, the endpoint picker that chooses among them, and an HTTPRoute from the
//! gateway to the pool under the replica's own path prefix.

/// Namespace of the cluster gateway (and of the fleet gateway, on the cluster that runs one).
pub const GATEWAY_NAMESPACE: &str = "modelplane-system";
/// The Gateway every replica's HTTPRoute attaches to.
pub const CLUSTER_GATEWAY: &str = "cluster-gateway";

/// DNS-label limit: the serving name becomes Service and label values.
const LABEL_LIMIT: usize = 63;

/// The name a replica serves under on its cluster (its pool, picker and route, and its path prefix). The same on
/// every cluster: a replica that moves keeps its path, and each cluster's gateway only knows its own replicas.
pub fn serving_name(deployment: &str, replica: u32) -> String {
    // Room for the picker's "-epp" suffix inside a DNS label.
    super::names::child_name(&[deployment, &replica.to_string()], LABEL_LIMIT - 4)
}

/// The path prefix the cluster gateway routes to the replica, and strips before the engine sees the request.
pub fn path_prefix(namespace: &str, serving_name: &str) -> String {
    format!("/{namespace}/{serving_name}/")
}
