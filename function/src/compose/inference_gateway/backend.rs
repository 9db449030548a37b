//! What `spec.backend` and its settings object mean here. Envoy Gateway, with Envoy AI Gateway, serves every
//! gateway: it is what expresses the fleet's routing (per-model routes, weights, priorities, caller keys, the mTLS
//! hop to cluster gateways; docs/routing.md compares it with Traefik). A gateway asking for Traefik is served by
//! it too, and every setting that is not applied as written is named in the `Backend` condition, never dropped
//! in silence.

use crate::{
    api::routing::{BackendSettings, GatewayBackend, InferenceGatewaySpec},
    compose::{
        ComposeError, Output,
        conditions::{ConditionType, Reason},
    },
    proto::v1::Status,
    stack::components::ENVOY_GATEWAY,
};

/// Refuses, before anything is composed, what the XRD cannot: an address pool whose range is out of order or
/// mixes families. A refused edit leaves every composed object as it was, so the gateway keeps serving.
pub fn check(spec: &InferenceGatewaySpec) -> Result<(), ComposeError> {
    for (at, settings) in [
        ("spec.envoyGateway", &spec.envoy_gateway),
        ("spec.traefik", &spec.traefik),
    ] {
        if let Some(settings) = settings {
            settings.address.check(at)?;
        }
    }
    Ok(())
}

/// The settings of the chosen backend that are not applied as written, each with its path and why. A MetalLB
/// pool is applied: the gateway composes it, and its cluster installs MetalLB to read it.
fn not_applied(spec: &InferenceGatewaySpec) -> Vec<String> {
    let (at, settings) = spec.backend_settings();
    let mut out = Vec::new();
    if spec.backend == GatewayBackend::Traefik {
        out.push(format!(
            "spec.backend Traefik is served by Envoy Gateway {}, which expresses the fleet's routing",
            ENVOY_GATEWAY.version
        ));
    }
    let Some(BackendSettings { version, address }) = settings else {
        return out;
    };
    match (spec.backend, version) {
        (GatewayBackend::EnvoyGateway, Some(v))
            if v.trim_start_matches('v') != ENVOY_GATEWAY.version.trim_start_matches('v') =>
        {
            out.push(format!(
                "{at}.version {v} is not installed: the gateway's cluster runs Envoy Gateway {} with its stack",
                ENVOY_GATEWAY.version
            ));
        }
        (GatewayBackend::Traefik, Some(v)) => {
            out.push(format!("{at}.version {v} (a Traefik chart) is not installed"))
        }
        _ => {}
    }
    if address.metallb.is_some() && address.metallb_pool().is_none() {
        out.push(format!(
            "{at}.metallb is not applied: loadBalancer is not MetalLB"
        ));
    }
    out
}

/// The `Backend` condition: True when the gateway runs as its spec says, else False naming each setting that
/// is not applied.
pub fn report(out: &mut Output, spec: &InferenceGatewaySpec) {
    let unapplied = not_applied(spec);
    let served = format!("Envoy Gateway {} with Envoy AI Gateway", ENVOY_GATEWAY.version);
    if unapplied.is_empty() {
        out.condition(
            ConditionType::Backend,
            Status::ConditionTrue,
            Reason::AsRequested,
            format!("served by {served}"),
        );
        return;
    }
    let reason = match spec.backend {
        GatewayBackend::Traefik => Reason::ServedByEnvoyGateway,
        GatewayBackend::EnvoyGateway => Reason::SettingsNotApplied,
    };
    out.condition(
        ConditionType::Backend,
        Status::ConditionFalse,
        reason,
        unapplied.join("; "),
    );
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::compose::fixtures::{self, request, run, with_observed, with_required};
    use crate::compose::inference_gateway::compose;
    use crate::proto::v1::Status;

    fn composed(spec: Value) -> Result<crate::compose::Output, crate::compose::ComposeError> {
        let xr = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway",
                        "metadata": {"name": "default"}, "spec": spec});
        let clusters = [fixtures::cluster("b").provider_config("b-pc").build()];
        let answered = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}],
                              "atProvider": {"manifest": {"status": {"addresses": [{"value": "203.0.113.9"}]}}}}});
        let req = with_required(request(xr), "clusters", &clusters);
        run(
            compose,
            &with_observed(
                with_observed(req, "gateway", &answered),
                "callers-policy",
                &answered,
            ),
        )
    }

    fn backend(out: &crate::compose::Output) -> (Status, &str, &str) {
        let c = out.conditions.iter().find(|c| c.type_ == "Backend").unwrap();
        (c.status, c.reason, c.message.as_deref().unwrap_or_default())
    }

    #[test]
    fn envoy_gateway_as_written_is_served_as_requested() {
        for spec in [
            json!({}),
            json!({"backend": "EnvoyGateway", "envoyGateway": {"version": "v1.8.1"}}),
        ] {
            let out = composed(spec).unwrap();
            let (status, reason, message) = backend(&out);
            assert_eq!(
                (status, reason),
                (Status::ConditionTrue, "AsRequested"),
                "{message}"
            );
        }
    }

    #[test]
    fn upstreams_traefik_gateway_is_served_by_envoy_gateway_naming_every_setting_not_applied() {
        let spec = json!({"backend": "Traefik", "traefik": {"version": "40.2.0"}});
        let out = composed(spec).unwrap();
        let (status, reason, message) = backend(&out);
        assert_eq!((status, reason), (Status::ConditionFalse, "ServedByEnvoyGateway"));
        assert!(
            message.contains("spec.backend Traefik is served by Envoy Gateway v1.8.1"),
            "{message}"
        );
        assert!(message.contains("spec.traefik.version 40.2.0"), "{message}");
        assert!(
            out.resources.contains_key("gateway"),
            "the fleet is served all the same"
        );
    }

    #[test]
    fn another_envoy_gateway_version_is_named_not_installed() {
        let out = composed(json!({"envoyGateway": {"version": "v1.3.0"}})).unwrap();
        let (status, reason, message) = backend(&out);
        assert_eq!((status, reason), (Status::ConditionFalse, "SettingsNotApplied"));
        assert!(
            message.starts_with("spec.envoyGateway.version v1.3.0 is not installed"),
            "{message}"
        );
    }

    #[test]
    fn the_listener_takes_the_port_and_the_endpoint_names_it() {
        let out = composed(json!({"gateway": {"port": 8080}})).unwrap();
        let listener =
            &out.resources["gateway"].object["spec"]["forProvider"]["manifest"]["spec"]["listeners"][0];
        assert_eq!(listener["port"], 8080);
        assert_eq!(out.status["endpoints"]["openAI"], "http://203.0.113.9:8080/v1");
        let out = composed(json!({"gateway": {"port": 80}})).unwrap();
        assert_eq!(out.status["endpoints"]["openAI"], "http://203.0.113.9/v1");
    }

    #[test]
    fn a_metallb_pool_is_the_gateways_own_and_served_as_requested() {
        let spec = json!({"envoyGateway": {"loadBalancer": "MetalLB",
                                           "metallb": {"addressPool": "172.18.255.200-172.18.255.250"}}});
        let out = composed(spec).unwrap();
        assert_eq!(backend(&out).1, "AsRequested", "{}", backend(&out).2);
        let manifest = |key: &str| out.resources[key].object["spec"]["forProvider"]["manifest"].clone();
        let pool = manifest("address-pool");
        assert_eq!(
            (pool["kind"].as_str(), pool["metadata"]["namespace"].as_str()),
            (Some("IPAddressPool"), Some("metallb-system"))
        );
        assert_eq!(
            pool["spec"]["addresses"],
            json!(["172.18.255.200-172.18.255.250"])
        );
        let selector = &pool["spec"]["serviceAllocation"]["serviceSelectors"][0]["matchLabels"];
        assert_eq!(
            selector["gateway.envoyproxy.io/owning-gateway-name"],
            "inference-gateway"
        );
        assert_eq!(
            selector["gateway.envoyproxy.io/owning-gateway-namespace"],
            "modelplane-system"
        );
        assert_eq!(
            manifest("l2-advertisement")["spec"]["ipAddressPools"],
            json!(["inference-gateway"])
        );
        let without = composed(json!({})).unwrap();
        assert!(!without.resources.contains_key("address-pool"));
    }

    #[test]
    fn a_pool_the_xrd_admits_but_metallb_would_not_is_refused_before_composing() {
        let spec = json!({"envoyGateway": {"loadBalancer": "MetalLB",
                                           "metallb": {"addressPool": "10.0.0.9-10.0.0.1"}}});
        let err = composed(spec).unwrap_err();
        assert_eq!(err.path, "spec.envoyGateway.metallb.addressPool");
        assert!(err.reason.contains("ends before it starts"), "{err}");
    }
}
