//! The cluster gateway every workload cluster gets, the same on both stacks: its namespace, the GatewayClass the
//! cluster's Envoy Gateway serves, the Gateway every replica's route attaches to over HTTPS only, the certificates
//! it serves ([`tls`]), and the Gateway API Inference Extension CRDs the replicas' pools need.

use std::sync::OnceLock;

use serde_json::Value;

use crate::wire::tree::{Tree, tree};

use super::well_known::GATEWAY_NAMESPACE;
use crate::stack::StackObject;

pub mod client_tls;
pub mod tls;

/// The Gateway every replica's HTTPRoute attaches to.
pub const CLUSTER_GATEWAY: &str = "cluster-gateway";
/// The GatewayClass of every gateway Modelplane puts on a cluster, served by the cluster's Envoy Gateway.
pub const GATEWAY_CLASS: &str = "modelplane";
const ENVOY_GATEWAY_CONTROLLER: &str = "gateway.envoyproxy.io/gatewayclass-controller";
/// The suffix of the cluster gateway's object in the component list, whose observed status has its address.
pub const GATEWAY_SUFFIX: &str = "gateway";

/// The GAIE CRDs every cluster gets, verbatim from the files the tests validate composed pools against
/// (tests/crds/routing/SOURCES.md): InferencePool, and the InferenceObjective the picker watches.
pub fn inference_extension_crds() -> Vec<StackObject> {
    static CRDS: OnceLock<Vec<Value>> = OnceLock::new();
    let crds = CRDS.get_or_init(|| {
        [
            include_str!("../../../../tests/crds/routing/gaie/v1.0.1/inference.networking.k8s.io_inferencepools.yaml"),
            include_str!(
                "../../../../tests/crds/routing/gaie/v1.0.1/inference.networking.x-k8s.io_inferenceobjectives.yaml"
            ),
        ]
        .iter()
        .filter_map(|text| serde_yaml::from_str::<Value>(text).ok())
        .map(|mut crd| {
            // What the API server reports, not what is applied.
            if let Some(crd) = crd.as_object_mut() {
                crd.remove("status");
            }
            crd
        })
        .collect()
    });
    ["inferencepools", "inferenceobjectives"]
        .into_iter()
        .zip(crds)
        .map(|(suffix, crd)| StackObject::created(suffix, Tree::from(crd)))
        .collect()
}

/// The cluster gateway: its namespace, the GatewayClass the cluster's Envoy Gateway serves, the Gateway every
/// replica's route attaches to, from any namespace (replicas run in their deployments' namespaces), over HTTPS
/// only, and the certificates it serves ([`tls`]).
pub fn cluster_gateway() -> Vec<StackObject> {
    vec![
        StackObject::kept(
            "namespace",
            tree!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GATEWAY_NAMESPACE}}),
        ),
        StackObject::created(
            "class",
            tree!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                "metadata": {"name": GATEWAY_CLASS},
                "spec": {"controllerName": ENVOY_GATEWAY_CONTROLLER},
            }),
        ),
        // Ready once created: a cluster whose load balancer has no address yet still runs replicas, they are
        // just not routed until the address appears in the cluster's status.
        StackObject::created(
            GATEWAY_SUFFIX,
            tree!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": CLUSTER_GATEWAY, "namespace": GATEWAY_NAMESPACE},
                "spec": {
                    "gatewayClassName": GATEWAY_CLASS,
                    "listeners": [tls::listener()],
                },
            }),
        ),
    ]
    .into_iter()
    .chain(tls::objects())
    .collect()
}
