//! Names and bounds more than one composer relies on, so none has to reach into another composer for them.

/// Control-plane namespace of every namespaced resource an InferenceCluster composes, and of the Secrets the
/// gateways' copies are made from.
pub const CONTROL_NAMESPACE: &str = "modelplane-system";
/// The Gateway every InferenceGateway composes on its cluster; ModelServices' routes attach to it across
/// namespaces.
pub const GATEWAY_NAME: &str = "inference-gateway";
/// Envoy AI Gateway takes at most this many backends in one route rule (`rules[].backendRefs` maxItems): a
/// ModelService routes at most this many endpoints, and a ModelDeployment sizes its endpoints to fit.
pub const MAX_BACKENDS: usize = 128;
