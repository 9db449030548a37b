//! A gateway's own MetalLB pool: an `IPAddressPool` of the addresses its spec names, dedicated to the Service
//! Envoy Gateway makes for that one Gateway, and an `L2Advertisement` announcing it. The fleet gateway and a
//! cluster gateway each compose theirs; the chart that reads them is the cluster's component
//! ([`crate::stack::components::METALLB`]).
//!
//! The pool selects the Service by the labels Envoy Gateway puts on it (MetalLB's `serviceAllocation`), not by the
//! `metallb.io/address-pool` annotation: the Service is Envoy Gateway's, and the cluster gateway has no EnvoyProxy
//! to carry an annotation. A pool with `serviceAllocation` gives its addresses to no other Service.

use crate::{
    stack::components::METALLB,
    wire::tree::{Tree, tree},
};

use super::well_known::GATEWAY_NAMESPACE;

const API_VERSION: &str = "metallb.io/v1beta1";
/// Labels Envoy Gateway puts on the Service (and pods) it provisions for a Gateway.
const OWNING_GATEWAY_NAME: &str = "gateway.envoyproxy.io/owning-gateway-name";
const OWNING_GATEWAY_NAMESPACE: &str = "gateway.envoyproxy.io/owning-gateway-namespace";

/// The pool and its advertisement for the Gateway `gateway` (in [`GATEWAY_NAMESPACE`]), both named after it.
pub fn pool(gateway: &str, addresses: &str) -> [Tree; 2] {
    let metadata = tree!({"name": gateway, "namespace": METALLB.namespace});
    [
        tree!({
            "apiVersion": API_VERSION, "kind": "IPAddressPool",
            "metadata": metadata.clone(),
            "spec": {
                "addresses": [addresses.trim()],
                "serviceAllocation": {"serviceSelectors": [{"matchLabels": {
                    OWNING_GATEWAY_NAME: gateway,
                    OWNING_GATEWAY_NAMESPACE: GATEWAY_NAMESPACE,
                }}]},
            },
        }),
        tree!({
            "apiVersion": API_VERSION, "kind": "L2Advertisement",
            "metadata": metadata,
            "spec": {"ipAddressPools": [gateway]},
        }),
    ]
}
