//! Puts the fleet's front door on an InferenceCluster: a Gateway API `Gateway` served by the Envoy Gateway and
//! Envoy AI Gateway the serving stack installs on every cluster, in the namespace and GatewayClass the cluster's
//! own gateway component composes (so two composites never manage one remote object). ModelServices attach their
//! `AIGatewayRoute`s to it; this composer owns the listener and what guards it, and reports where it answers.
//!
//! The cluster is the one `spec.clusterName` names, or else one picked once and kept: the current cluster while it
//! exists (moving the front door changes its address under every caller), else the first reachable cluster by
//! name, so the choice does not depend on the order Crossplane lists clusters in.
//!
//! In front of every route: API-key auth over the caller Secrets `spec.auth[.apiKey].secretRefs` names, denying
//! every request until a caller's keys are on the cluster, and with `spec.tls` an HTTPS-only listener. Both kinds
//! of Secret reach the cluster by provider-kubernetes reference ([`front_door`], [`remote::secret_copy`]).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{
    ComposeError, Output,
    remote::{
        self,
        secret_copy::{CopyOwner, CopyState, copy_owner, secret_copy},
    },
    shared::CONTROL_NAMESPACE,
};
use crate::compose::conditions::{ConditionType, Reason};
use crate::{
    api::routing::{GatewayEndpoints, InferenceGateway, InferenceGatewayStatus},
    proto::v1::{ResourceSelector, RunFunctionRequest, Status},
    schedule::ClusterView,
    sdk::request,
    wire::{RawStruct, tree::Fields},
};

mod backend;
mod client_certificate;
mod front_door;
mod standby;

use crate::compose::shared::GATEWAY_NAME;
use crate::workload::{cluster_gateway::client_tls, metallb, well_known::GATEWAY_NAMESPACE};

const CLUSTERS: &str = "clusters";

/// The part of an observed Gateway that says where it answers, and which EnvoyProxy it took.
#[derive(Default, Deserialize)]
struct GatewayView {
    #[serde(default)]
    spec: GatewaySpecView,
    #[serde(default)]
    status: GatewayStatusView,
}

#[derive(Default, Deserialize)]
struct GatewaySpecView {
    #[serde(default)]
    infrastructure: Option<InfrastructureView>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InfrastructureView {
    #[serde(default)]
    parameters_ref: Option<ParametersRefView>,
}

#[derive(Default, Deserialize)]
struct ParametersRefView {
    #[serde(default)]
    name: String,
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
    backend::check(&gateway.spec)?;
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
    backend::report(&mut out, &gateway.spec);
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
            ConditionType::GatewayReady,
            Status::ConditionFalse,
            Reason::NoCluster,
            "no InferenceCluster is reachable yet to run the gateway on; set spec.clusterName to choose one",
        );
        return Ok(out);
    };
    out.set_status(&InferenceGatewayStatus {
        cluster_name: cluster.clone(),
        client_certificate_authorities: gateway.status.client_certificate_authorities.clone(),
        ..Default::default()
    })?;
    let Some(pc) = reachable(&cluster) else {
        let why = if clusters.contains_key(&cluster) {
            format!("InferenceCluster {cluster} is not reachable yet (no status.providerConfigName)")
        } else {
            format!("InferenceCluster {cluster} (spec.clusterName) does not exist")
        };
        out.condition(
            ConditionType::GatewayReady,
            Status::ConditionFalse,
            Reason::ClusterNotReady,
            why,
        );
        return Ok(out);
    };

    let ready = |key: &str| remote::observed_ready(req, key);
    let (callers, certificates) = front_door::copies(&gateway.spec);
    let owner = (!callers.is_empty() || !certificates.is_empty())
        .then(|| {
            let (object, owner) = copy_owner(
                OWNER_NAME,
                GATEWAY_NAMESPACE,
                &pc,
                request::observed_composed(req, OWNER_KEY),
            );
            out.compose(OWNER_KEY, in_control_namespace(object), owner.is_some());
            owner
        })
        .flatten();
    let copy = |out: &mut Output, c: &front_door::SecretToCopy, waiting: &mut Vec<String>| {
        compose_copy(out, req, &pc, owner.as_ref(), c, waiting)
    };
    let mut waiting = Vec::new();
    let filled: Vec<&str> = callers
        .iter()
        .filter(|c| copy(&mut out, c, &mut waiting))
        .map(|c| c.remote_name.as_str())
        .collect();
    let mut certificates_waiting = Vec::new();
    let certificates_filled = certificates
        .iter()
        .filter(|c| copy(&mut out, c, &mut certificates_waiting))
        .count()
        == certificates.len();
    let policy_ready = ready(CALLERS_KEY);
    out.compose(
        CALLERS_KEY,
        in_control_namespace(remote::Object::new(front_door::callers_policy(&filled), &pc)),
        policy_ready,
    );
    let selector = gateway
        .spec
        .auth
        .as_ref()
        .and_then(|a| a.callers().1.secret_selector.as_ref())
        .is_some();
    if selector {
        out.warnings.push(
            "the caller secretSelector is not resolved: that would read every matching Secret, keys included, \
             through the function; list the Secrets by name in secretRefs"
                .into(),
        );
    }
    report_callers(&mut out, callers.len(), filled.len(), &waiting);

    let client = client_certificate::compose(&mut out, req, &pc, &clusters);
    let observed_gateway = remote::observed::<GatewayView>(request::observed_composed(req, "gateway"));
    let observed_gateway = observed_gateway.as_ref().and_then(|o| o.manifest());
    let address = observed_gateway
        .and_then(|g| g.status.addresses.first())
        .map(|a| a.value.clone())
        .filter(|a| !a.is_empty());
    // The Gateway takes the EnvoyProxy that presents the client certificate once it exists, and keeps it.
    let took_proxy = observed_gateway
        .and_then(|g| g.spec.infrastructure.as_ref()?.parameters_ref.as_ref())
        .is_some_and(|p| p.name == client_tls::FLEET_PROXY);
    // The listener comes up only behind its callers policy: an Envoy that programmed routes before the policy
    // would answer them unauthenticated. Once composed it stays, so a policy briefly not ready drops no traffic.
    let gateway_exists = request::observed_composed(req, "gateway").is_some();
    let gateway_ready = address.is_some() && ready("gateway") && certificates_filled;
    if policy_ready || gateway_exists {
        let proxy = (client.proxy_ready || took_proxy).then(client_tls::parameters_ref);
        let manifest = front_door::gateway(&gateway.spec, &certificates, proxy);
        out.compose(
            "gateway",
            in_control_namespace(remote::Object::new(manifest, &pc)),
            gateway_ready,
        );
    }
    let mut status = InferenceGatewayStatus {
        cluster_name: cluster.clone(),
        client_certificate_authorities: client_certificate::publish(
            &mut out,
            &client,
            took_proxy && ready("gateway"),
            &gateway.status.client_certificate_authorities,
            &clusters,
        ),
        ..Default::default()
    };
    match address {
        Some(address) => {
            let endpoint = format!("{}/v1", gateway.spec.base_url(&address));
            if certificates_filled {
                out.condition(
                    ConditionType::GatewayReady,
                    Status::ConditionTrue,
                    Reason::Available,
                    format!("answering on {address} (cluster {cluster}): {endpoint}"),
                );
            } else {
                out.condition(
                    ConditionType::GatewayReady,
                    Status::ConditionFalse,
                    Reason::CertificatePending,
                    format!("waiting for {}", certificates_waiting.join("; ")),
                );
            }
            status.endpoints = Some(GatewayEndpoints { open_ai: endpoint });
            status.address = address;
        }
        None => {
            let why = if policy_ready || gateway_exists {
                format!("waiting for the Gateway on {cluster} to get an address")
            } else {
                format!("waiting for the callers policy on {cluster} before opening the listener")
            };
            out.condition(
                ConditionType::GatewayReady,
                Status::ConditionFalse,
                Reason::Provisioning,
                why,
            );
        }
    }
    // The gateway's own MetalLB pool; its cluster installs the chart that reads it (InferenceCluster components).
    let pool = gateway
        .spec
        .backend_settings()
        .1
        .and_then(|s| s.address.metallb_pool());
    if let Some(addresses) = pool {
        for (key, manifest) in ["address-pool", "l2-advertisement"]
            .into_iter()
            .zip(metallb::pool(GATEWAY_NAME, addresses))
        {
            out.compose(
                key,
                in_control_namespace(remote::Object::new(manifest, &pc)),
                ready(key),
            );
        }
    }
    for (key, manifest) in standby::objects() {
        out.compose(
            key,
            in_control_namespace(remote::Object::new(manifest, &pc)),
            true,
        );
    }
    out.set_status(&status)?;
    out.ready = Some(gateway_ready && policy_ready);
    super::remote::secret_copy::retire_dropped(&mut out, req, &[pc.as_str()]);
    Ok(out)
}

const CALLERS_KEY: &str = "callers-policy";
const OWNER_KEY: &str = "secret-owner";
/// The ConfigMap on the gateway's cluster that owns the copies (one gateway a cluster, like its other objects).
const OWNER_NAME: &str = "inference-gateway-secret-owner";

/// Composes the copy of one Secret onto the gateway's cluster; true once it holds the data.
fn compose_copy(
    out: &mut Output,
    req: &RunFunctionRequest,
    provider_config: &str,
    owner: Option<&CopyOwner>,
    copy: &front_door::SecretToCopy,
    waiting: &mut Vec<String>,
) -> bool {
    let (object, state) = secret_copy(
        &copy.remote_name,
        GATEWAY_NAMESPACE,
        copy.secret_type,
        provider_config,
        vec![front_door::whole_secret(copy)],
        owner,
        request::observed_composed(req, &copy.key),
    );
    if let Some(why) = state.waiting() {
        // An InferenceGateway reads its Secrets from Modelplane's namespace only: a Secret made in another one is
        // "not found" here, so the message names where it is looked for.
        waiting.push(format!(
            "{} (Secret {CONTROL_NAMESPACE}/{}): {why}",
            copy.field, copy.source
        ));
    }
    let filled = state == CopyState::Filled;
    out.compose(copy.key.clone(), in_control_namespace(object), filled);
    filled
}

/// An InferenceGateway is cluster-scoped, and Crossplane gives a namespaced composed resource of a cluster-scoped
/// composite no namespace of its own: its Objects live in Modelplane's namespace on the control plane.
fn in_control_namespace(object: remote::Object) -> Fields {
    object.in_namespace(CONTROL_NAMESPACE).build()
}

fn report_callers(out: &mut Output, listed: usize, filled: usize, waiting: &[String]) {
    let (status, reason, message) = match (listed, filled) {
        (0, _) => (
            Status::ConditionFalse,
            Reason::NoCallers,
            "no caller Secrets listed (spec.auth.secretRefs or spec.auth.apiKey.secretRefs): every request is \
             refused"
                .to_owned(),
        ),
        (_, 0) => (
            Status::ConditionFalse,
            Reason::KeysPending,
            format!("no caller keys on the cluster yet, so every request is refused: {}", waiting.join("; ")),
        ),
        _ if !waiting.is_empty() => (
            Status::ConditionTrue,
            Reason::SomeKeysPending,
            format!("{filled} of {listed} caller Secrets in effect; waiting for {}", waiting.join("; ")),
        ),
        _ => (
            Status::ConditionTrue,
            Reason::KeysInEffect,
            format!("{filled} caller Secrets in effect; a request without one of their keys gets 401"),
        ),
    };
    out.condition(ConditionType::CallerAuth, status, reason, message);
}

#[cfg(test)]
mod tests;
