//! The cluster gateway requires the fleet gateways' client certificates ([`client_tls`]): every InferenceGateway's
//! published CAs, applied on the cluster as one ConfigMap and a ClientTrafficPolicy, and reported back as
//! fingerprints, so a gateway knows when a new CA of its own has reached every cluster.
//!
//! Fail closed: before any fleet CA is trusted the policy requires a certificate under [`REFUSE_ALL_CA`], which
//! nobody can present, unless the InferenceCluster opts out (`spec.gateway.beforeFleetClientCA: AdmitAll`). Once
//! the cluster trusts a fleet CA it keeps requiring one: when no gateway can be read, or none publishes a CA, the
//! set last applied stays, whatever the opt-out says.

use std::{collections::BTreeSet, time::SystemTime};

use serde_json::Value;

use super::components::{compose_gateway_object, gateway_object_key};
use crate::{
    api::{
        ca::{expired, fingerprint, split_bundle, valid_ca},
        inference_cluster::{Admits, BeforeFleetClientCa},
        routing::InferenceGateway,
    },
    compose::Output,
    proto::v1::{ResourceSelector, RunFunctionRequest},
    sdk::request,
    workload::cluster_gateway::{
        client_tls::{self, MAX_TRUSTED_CAS, REFUSE_ALL_CA},
        tls::CA_KEY,
    },
};

/// The requirement every InferenceGateway arrives under.
pub const GATEWAYS: &str = "gateways";
const TRUST_SUFFIX: &str = "client-cas";
const POLICY_SUFFIX: &str = "client-policy";

pub fn requirement() -> ResourceSelector {
    ResourceSelector {
        api_version: crate::compose::API_VERSION.into(),
        kind: "InferenceGateway".into(),
        r#match: None,
        namespace: None,
    }
}

/// Composes the trust ConfigMap and the policy requiring it: the fleet CAs once there is one to trust, until then
/// [`REFUSE_ALL_CA`], or nothing where `before` is the opt-out.
pub fn compose(out: &mut Output, req: &RunFunctionRequest, cluster: &str, before: BeforeFleetClientCa) {
    let published = published(req);
    let mut cas = if published.is_empty() {
        last_applied(req)
    } else {
        published
    };
    if cas.is_empty() {
        match before {
            BeforeFleetClientCa::RefuseAll => cas.push(REFUSE_ALL_CA.trim().to_owned()),
            BeforeFleetClientCa::AdmitAll => {
                out.warnings.push(
                    "spec.gateway.beforeFleetClientCA is AdmitAll: the cluster gateway requires no client \
                     certificate, so any caller of its load balancer reaches its engines, until an \
                     InferenceGateway publishes a fleet client CA"
                        .into(),
                );
                return;
            }
        }
    }
    let [trust, policy] = client_tls::trust(&cas);
    for (suffix, manifest) in [(TRUST_SUFFIX, trust), (POLICY_SUFFIX, policy)] {
        compose_gateway_object(out, cluster, suffix, manifest);
    }
}

/// Every CA the InferenceGateways publish: valid, each once (however its PEM is wrapped in blank space), in a
/// stable order, at most [`MAX_TRUSTED_CAS`].
fn published(req: &RunFunctionRequest) -> Vec<String> {
    let Some(gateways) = request::required_resources(req, GATEWAYS) else {
        return Vec::new();
    };
    let cas: BTreeSet<String> = gateways
        .iter()
        .filter_map(|g| g.resource.as_ref()?.parse::<InferenceGateway>().ok())
        .flat_map(|g| g.status.client_certificate_authorities)
        .filter(|pem| valid_ca(pem).is_ok() && !expired(pem, SystemTime::now()))
        .map(|pem| pem.trim().to_owned())
        .collect();
    cas.into_iter().take(MAX_TRUSTED_CAS).collect()
}

/// The trust ConfigMap of the Object this cluster last composed, as `pointer` reads it.
fn observed_bundle(req: &RunFunctionRequest, pointer: &str) -> Vec<String> {
    request::observed_composed(req, &gateway_object_key(TRUST_SUFFIX))
        .and_then(|r| r.resource.as_ref()?.to_json().ok())
        .and_then(|o| o.pointer(pointer).and_then(Value::as_str).map(str::to_owned))
        .map(|bundle| split_bundle(&bundle, MAX_TRUSTED_CAS))
        .unwrap_or_default()
        .into_iter()
        // The placeholder is no fleet CA: a bundle of it alone means none is trusted yet. An expired CA is none
        // either: a bundle of expired CAs alone would make Envoy Gateway refuse the policy and verify nothing.
        .filter(|pem| pem.trim() != REFUSE_ALL_CA.trim() && !expired(pem, SystemTime::now()))
        .collect()
}

/// The fleet CAs this cluster last asked its gateway to require.
fn last_applied(req: &RunFunctionRequest) -> Vec<String> {
    observed_bundle(req, &format!("/spec/forProvider/manifest/data/{CA_KEY}"))
}

/// The fleet CAs the gateway requires as the cluster holds them (the Object's observed ConfigMap).
fn applied(req: &RunFunctionRequest) -> Vec<String> {
    observed_bundle(req, &format!("/status/atProvider/manifest/data/{CA_KEY}"))
}

/// Fingerprints of the fleet CAs the gateway requires as the cluster holds them.
pub fn applied_fingerprints(req: &RunFunctionRequest) -> Vec<String> {
    applied(req).iter().filter_map(|pem| fingerprint(pem)).collect()
}

/// Whom the gateway admits as the cluster holds it: a certificate is required only once both the trust ConfigMap
/// and the policy are observed there; then under the fleet CAs it holds, or, holding none, under the placeholder.
pub fn admits(req: &RunFunctionRequest) -> Admits {
    let held = |suffix: &str| {
        request::observed_composed(req, &gateway_object_key(suffix))
            .and_then(|r| r.resource.as_ref()?.to_json().ok())
            .is_some_and(|o| {
                o.pointer("/status/atProvider/manifest")
                    .is_some_and(|m| !m.is_null())
            })
    };
    if !(held(TRUST_SUFFIX) && held(POLICY_SUFFIX)) {
        Admits::Anyone
    } else if applied(req).is_empty() {
        Admits::Nobody
    } else {
        Admits::FleetGateways
    }
}

#[cfg(test)]
#[path = "client_trust_tests.rs"]
mod tests;
