//! MetalLB on a workload cluster. The chart is one of the cluster's components, installed while a gateway on the
//! cluster takes its address from MetalLB: the cluster's own gateway (`spec.cluster.existing.gateway`), or a fleet
//! gateway (an InferenceGateway) running there. One composite owns the chart, so two gateways on one cluster never
//! install it twice; each gateway composes its own pool ([`crate::workload::metallb`]).

use super::{client_trust::GATEWAYS, components::compose_gateway_object};
use crate::{
    api::{inference_cluster::InferenceClusterSpec, load_balancer::pools_overlap, routing::InferenceGateway},
    compose::{ComposeError, Output},
    proto::v1::RunFunctionRequest,
    sdk::request,
    workload::{cluster_gateway::CLUSTER_GATEWAY, metallb},
};

const AT: &str = "spec.cluster.existing.gateway";

/// Refuses, before anything is composed, a pool the XRD admits but MetalLB would not (a range out of order).
pub fn check(spec: &InferenceClusterSpec) -> Result<(), ComposeError> {
    match spec.cluster.existing.as_ref().and_then(|e| e.gateway.as_ref()) {
        Some(gateway) => gateway.check(AT),
        None => Ok(()),
    }
}

fn own_pool(spec: &InferenceClusterSpec) -> Option<&str> {
    spec.cluster.existing.as_ref()?.gateway.as_ref()?.metallb_pool()
}

/// The MetalLB pools of the fleet gateways on `cluster`, by gateway name. A fleet gateway is on the cluster its
/// status names, or, before it has written one, the cluster its spec names.
fn fleet_pools(req: &RunFunctionRequest, cluster: &str) -> Vec<(String, String)> {
    request::required_resources(req, GATEWAYS)
        .into_iter()
        .flatten()
        .filter_map(|g| g.resource.as_ref()?.parse::<InferenceGateway>().ok())
        .filter(|g| match g.status.cluster_name.as_str() {
            "" => g.spec.cluster_name.as_deref() == Some(cluster),
            on => on == cluster,
        })
        .filter_map(|g| {
            let pool = g.spec.backend_settings().1?.address.metallb_pool()?.to_owned();
            Some((g.metadata.name, pool))
        })
        .collect()
}

/// Whether a gateway on `cluster` takes its address from MetalLB: its own, or a fleet gateway's.
pub fn needed(req: &RunFunctionRequest, cluster: &str, spec: &InferenceClusterSpec) -> bool {
    own_pool(spec).is_some() || !fleet_pools(req, cluster).is_empty()
}

/// The cluster gateway's own pool, when its address comes from MetalLB, with a warning for each fleet gateway on
/// the cluster whose pool shares an address with it: MetalLB refuses overlapping pools.
pub fn compose(out: &mut Output, req: &RunFunctionRequest, cluster: &str, spec: &InferenceClusterSpec) {
    let Some(addresses) = own_pool(spec) else {
        return;
    };
    for (gateway, theirs) in fleet_pools(req, cluster) {
        if pools_overlap(addresses, &theirs) {
            out.warnings.push(format!(
                "{AT}.metallb.addressPool {addresses} overlaps InferenceGateway {gateway}'s pool {theirs} on this \
                 cluster; MetalLB refuses overlapping pools, so give each gateway addresses of its own"
            ));
        }
    }
    let [pool, advertisement] = metallb::pool(CLUSTER_GATEWAY, addresses);
    compose_gateway_object(out, cluster, "address-pool", pool);
    compose_gateway_object(out, cluster, "l2-advertisement", advertisement);
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::GATEWAYS;
    use crate::compose::{Output, fixtures};
    use crate::wire::RawStruct;

    fn existing(gateway: Option<Value>) -> Value {
        let mut xr = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
            "metadata": {"name": "kind"},
            "spec": {"stack": "Standard",
                     "cluster": {"source": "Existing", "existing": {"secretRef": {"name": "kind-kubeconfig"}}},
                     "nodePools": [{"name": "gpu", "className": "eks-h200-8x", "nodeCount": 1}]}});
        if let Some(gateway) = gateway {
            xr["spec"]["cluster"]["existing"]["gateway"] = gateway;
        }
        xr
    }

    fn compose(xr: &Value, gateways: &[Value]) -> Result<Output, crate::compose::ComposeError> {
        let class = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass",
            "metadata": {"name": "eks-h200-8x"},
            "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                                  "count": 8}]}});
        let req = fixtures::cluster_request(xr, &[class], &[]).build();
        let req = fixtures::with_required(req, GATEWAYS, gateways);
        crate::compose::inference_cluster::compose(&req, &RawStruct::from_value(xr).unwrap())
    }

    fn metallb(pool: &str) -> Value {
        json!({"loadBalancer": "MetalLB", "metallb": {"addressPool": pool}})
    }

    fn manifest(out: &Output, key: &str) -> Value {
        out.resources[key].object["spec"]["forProvider"]["manifest"].clone()
    }

    #[test]
    fn the_cluster_gateway_gets_its_address_from_its_own_pool() {
        let out = compose(&existing(Some(metallb("172.18.255.200-172.18.255.210"))), &[]).unwrap();
        let release = &out.resources["release-metallb"].object["spec"]["forProvider"];
        assert_eq!(release["chart"]["name"], "metallb");
        assert_eq!(release["chart"]["version"], "0.16.1");
        assert_eq!(release["namespace"], "metallb-system");
        let pool = manifest(&out, "object-cluster-gateway-address-pool");
        assert_eq!(pool["kind"], "IPAddressPool");
        assert_eq!(
            pool["spec"]["addresses"],
            json!(["172.18.255.200-172.18.255.210"])
        );
        assert_eq!(
            pool["spec"]["serviceAllocation"]["serviceSelectors"][0]["matchLabels"]["gateway.envoyproxy.io/owning-gateway-name"],
            "cluster-gateway"
        );
        let advertisement = manifest(&out, "object-cluster-gateway-l2-advertisement");
        assert_eq!(
            advertisement["spec"]["ipAddressPools"],
            json!(["cluster-gateway"])
        );
    }

    #[test]
    fn a_fleet_gateway_on_the_cluster_asking_for_metallb_gets_the_chart_and_no_other_does() {
        let fleet = |on: &str, settings: Value| {
            json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway", "metadata": {"name": "default"},
                   "spec": {"backend": "Traefik", "traefik": settings}, "status": {"clusterName": on}})
        };
        let mut asking = metallb("172.18.255.220/30");
        asking["version"] = json!("40.2.0");
        let out = compose(&existing(None), &[fleet("kind", asking.clone())]).unwrap();
        assert!(out.resources.contains_key("release-metallb"));
        assert!(
            !out.resources.contains_key("object-cluster-gateway-address-pool"),
            "the pool is the gateway's"
        );
        let both = compose(
            &existing(Some(metallb("172.18.255.216/29"))),
            &[fleet("kind", asking.clone())],
        )
        .unwrap();
        assert_eq!(both.warnings.len(), 1, "{:?}", both.warnings);
        assert!(both.warnings[0].contains("overlaps InferenceGateway default's pool 172.18.255.220/30"));
        let apart = compose(
            &existing(Some(metallb("172.18.255.200/29"))),
            &[fleet("kind", asking.clone())],
        )
        .unwrap();
        assert!(apart.warnings.is_empty(), "{:?}", apart.warnings);
        for gateways in [
            vec![],
            vec![fleet("elsewhere", asking)],
            vec![fleet("kind", json!({"version": "40.2.0"}))],
        ] {
            let out = compose(&existing(None), &gateways).unwrap();
            assert!(!out.resources.contains_key("release-metallb"), "{gateways:?}");
        }
    }

    #[test]
    fn a_pool_out_of_order_is_refused_before_anything_is_composed() {
        let err = compose(&existing(Some(metallb("10.0.0.9-10.0.0.1"))), &[]).unwrap_err();
        assert_eq!(err.path, "spec.cluster.existing.gateway.metallb.addressPool");
    }
}
