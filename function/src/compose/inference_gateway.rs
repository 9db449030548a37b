//! Puts the fleet's front door on an InferenceCluster: a Gateway API `Gateway` served by the Envoy Gateway and
//! Envoy AI Gateway the serving stack installs on every cluster, in the namespace and GatewayClass the cluster's
//! own gateway component composes (so two composites never manage one remote object). ModelServices attach their
//! `AIGatewayRoute`s to it; this composer owns only the listener and reports where it answers.
//!
//! The cluster is the one `spec.clusterName` names, or else one picked once and kept: the current cluster while it
//! exists (moving the front door changes its address under every caller), else the first reachable cluster by
//! name, so the choice does not depend on the order Crossplane lists clusters in.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ComposeError, Output,
    model_service::route::{GATEWAY_NAME, GATEWAY_NAMESPACE},
    remote,
};
use crate::{
    api::routing::{InferenceGatewaySpec, InferenceGatewayStatus},
    proto::v1::{ResourceSelector, RunFunctionRequest, Status},
    schedule::ClusterView,
    sdk::request,
    stack::routing::GATEWAY_CLASS,
    wire::RawStruct,
};

const CLUSTERS: &str = "clusters";

#[derive(Deserialize)]
struct InferenceGateway {
    #[serde(default)]
    spec: InferenceGatewaySpec,
    #[serde(default)]
    status: InferenceGatewayStatus,
}

/// The part of an observed Gateway that says where it answers.
#[derive(Default, Deserialize)]
struct GatewayView {
    #[serde(default)]
    status: GatewayStatusView,
}

#[derive(Default, Deserialize)]
struct GatewayStatusView {
    #[serde(default)]
    addresses: Vec<AddressView>,
}

#[derive(Default, Deserialize)]
struct AddressView {
    #[serde(default)]
    value: String,
}

pub fn compose(req: &RunFunctionRequest, xr: &RawStruct) -> Result<Output, ComposeError> {
    let gateway: InferenceGateway = xr.parse()?;
    let mut out = Output {
        requirements: BTreeMap::from([(
            CLUSTERS.to_owned(),
            ResourceSelector {
                api_version: super::API_VERSION.into(),
                kind: "InferenceCluster".into(),
                r#match: None,
                namespace: None,
            },
        )]),
        ready: Some(false),
        ..Default::default()
    };
    let Some(found) = request::required_resources(req, CLUSTERS) else {
        return Ok(out);
    };
    let clusters: BTreeMap<String, ClusterView> = found
        .iter()
        .filter_map(|c| c.resource.as_ref()?.parse::<ClusterView>().ok())
        .map(|c| (c.metadata.name.clone(), c))
        .collect();
    let reachable = |name: &str| {
        clusters
            .get(name)
            .map(|c| c.status.provider_config_name.clone())
            .filter(|pc| !pc.is_empty())
    };
    let chosen = match &gateway.spec.cluster_name {
        Some(named) => Some(named.clone()),
        None if clusters.contains_key(&gateway.status.cluster_name) => {
            Some(gateway.status.cluster_name.clone())
        }
        None => clusters.keys().find(|name| reachable(name).is_some()).cloned(),
    };
    let Some(cluster) = chosen else {
        out.condition(
            "GatewayReady",
            Status::ConditionFalse,
            "NoCluster",
            "no InferenceCluster is reachable yet to run the gateway on; set spec.clusterName to choose one",
        );
        return Ok(out);
    };
    out.status.insert("clusterName".into(), json!(cluster));
    let Some(pc) = reachable(&cluster) else {
        let why = if clusters.contains_key(&cluster) {
            format!("InferenceCluster {cluster} is not reachable yet (no status.providerConfigName)")
        } else {
            format!("InferenceCluster {cluster} (spec.clusterName) does not exist")
        };
        out.condition("GatewayReady", Status::ConditionFalse, "ClusterNotReady", why);
        return Ok(out);
    };

    let ready = |key: &str| {
        remote::observed::<Value>(request::observed_composed(req, key)).is_some_and(|o| o.is_ready())
    };
    let address = remote::observed::<GatewayView>(request::observed_composed(req, "gateway"))
        .as_ref()
        .and_then(|o| o.manifest())
        .and_then(|g| g.status.addresses.first())
        .map(|a| a.value.clone())
        .filter(|a| !a.is_empty());
    let gateway_ready = address.is_some() && ready("gateway");
    out.compose(
        "gateway",
        remote::object(gateway_manifest(gateway.spec.hostname.as_deref()), &pc),
        gateway_ready,
    );
    match address {
        Some(address) => {
            out.condition(
                "GatewayReady",
                Status::ConditionTrue,
                "Available",
                format!("answering on {address} (cluster {cluster})"),
            );
            out.status.insert("address".into(), json!(address));
        }
        None => out.condition(
            "GatewayReady",
            Status::ConditionFalse,
            "Provisioning",
            format!("waiting for the Gateway on {cluster} to get an address"),
        ),
    }
    out.ready = Some(gateway_ready);
    Ok(out)
}

/// Routes attach from the namespaces of the services they serve, so every namespace may attach; which services a
/// gateway serves is decided by its `serviceSelector` where routes are composed.
fn gateway_manifest(hostname: Option<&str>) -> Value {
    let mut listener = json!({
        "name": "http", "protocol": "HTTP", "port": 80,
        "allowedRoutes": {"namespaces": {"from": "All"}},
    });
    if let Some(hostname) = hostname {
        listener["hostname"] = json!(hostname);
    }
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE},
        "spec": {"gatewayClassName": GATEWAY_CLASS, "listeners": [listener]},
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::compose;
    use crate::compose::fixtures::{request, run, with_observed, with_required};
    use crate::proto::v1::Status;

    fn gateway(spec: Value, status: Value) -> Value {
        json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway",
               "metadata": {"name": "fleet"}, "spec": spec, "status": status})
    }

    fn cluster(name: &str, pc: &str) -> Value {
        json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": name},
               "status": {"providerConfigName": pc, "stack": "Standard"}})
    }

    #[test]
    fn an_unnamed_cluster_is_the_first_reachable_one_and_stays_chosen() {
        let clusters = [
            cluster("a-unreachable", ""),
            cluster("b", "b-pc"),
            cluster("c", "c-pc"),
        ];
        let req = with_required(request(gateway(json!({}), json!({}))), "clusters", &clusters);
        let out = run(compose, &req).unwrap();
        assert_eq!(out.status["clusterName"], "b");
        assert_eq!(
            out.resources["gateway"].object["spec"]["providerConfigRef"]["name"],
            "b-pc"
        );
        let kept = gateway(json!({}), json!({"clusterName": "c"}));
        let out = run(compose, &with_required(request(kept), "clusters", &clusters)).unwrap();
        assert_eq!(out.status["clusterName"], "c");
    }

    #[test]
    fn the_address_comes_from_the_observed_gateway() {
        let xr = gateway(json!({"clusterName": "b"}), json!({}));
        let observed = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}],
                              "atProvider": {"manifest": {"status": {"addresses": [{"value": "203.0.113.9"}]}}}}});
        let req = with_observed(
            with_required(request(xr), "clusters", &[cluster("b", "b-pc")]),
            "gateway",
            &observed,
        );
        let out = run(compose, &req).unwrap();
        assert_eq!(out.status["address"], "203.0.113.9");
        assert_eq!(out.ready, Some(true));
    }

    #[test]
    fn a_named_cluster_that_does_not_exist_is_reported() {
        let xr = gateway(json!({"clusterName": "nope"}), json!({}));
        let out = run(
            compose,
            &with_required(request(xr), "clusters", &[cluster("b", "b-pc")]),
        )
        .unwrap();
        let c = &out.conditions[0];
        assert_eq!(
            (c.status, c.reason.as_str()),
            (Status::ConditionFalse, "ClusterNotReady")
        );
        assert!(
            c.message
                .as_deref()
                .unwrap_or_default()
                .contains("spec.clusterName")
        );
        assert!(out.resources.is_empty());
        assert_eq!(out.ready, Some(false));
    }
}
