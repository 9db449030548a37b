//! The fleet gateway's client certificate ([`client_tls`]): its CA and the certificate composed on the gateway's
//! cluster, presented to every TLS backend once issued, and the CA published in the gateway's status for every
//! InferenceCluster to require. A CA that changes (cert-manager reissues it, or it is deleted and made again) is
//! published beside the one before, which stays until every cluster with a gateway reports trusting the new one.

use std::collections::BTreeMap;

use serde_json::Value;

use super::in_control_namespace;
use crate::compose::conditions::{ConditionType, Reason};
use crate::{
    api::{
        ca::{fingerprint, valid_ca},
        cluster_view::ClusterView,
    },
    compose::{Output, remote},
    proto::v1::{RunFunctionRequest, Status},
    sdk::request,
    stack::cluster_gateway::{
        client_tls::{self, CA_PUBLISHED, CERTIFICATE_READY, MAX_TRUSTED_CAS},
        tls::published_ca,
    },
};

const CA_KEY: &str = "client-ca";
const ISSUER_KEY: &str = "client-issuer";
const CERTIFICATE_KEY: &str = "client-certificate";
const BUNDLE_KEY: &str = "client-ca-bundle";
const PUBLISHED_KEY: &str = "client-ca-published";
const PROXY_KEY: &str = "fleet-proxy";

/// An Object on the gateway's cluster, ready when `query` holds on the remote object.
fn derived(manifest: Value, provider_config: &str, query: &str) -> Value {
    let mut object = remote::object(manifest, provider_config);
    remote::ready_when(&mut object, query);
    object
}

/// How far the client certificate has come on the gateway's cluster.
pub struct Progress {
    /// cert-manager issued it.
    pub issued: bool,
    /// The EnvoyProxy presenting it exists, so the fleet Gateway can take it.
    pub proxy_ready: bool,
}

/// Composes the CA, its issuer, the client certificate, the Bundle publishing the CA and the published CA (read
/// only), and the EnvoyProxy that presents the certificate once it is issued.
pub fn compose(out: &mut Output, req: &RunFunctionRequest, provider_config: &str) -> Progress {
    let plain = |manifest| in_control_namespace(remote::object(manifest, provider_config));
    out.compose(
        CA_KEY,
        plain(client_tls::client_ca()),
        remote::observed_ready(req, CA_KEY),
    );
    out.compose(
        ISSUER_KEY,
        plain(client_tls::client_issuer()),
        remote::observed_ready(req, ISSUER_KEY),
    );
    let issued = remote::observed_ready(req, CERTIFICATE_KEY);
    out.compose(
        CERTIFICATE_KEY,
        in_control_namespace(derived(
            client_tls::client_certificate(),
            provider_config,
            CERTIFICATE_READY,
        )),
        issued,
    );
    out.compose(
        BUNDLE_KEY,
        plain(client_tls::client_ca_bundle()),
        remote::observed_ready(req, BUNDLE_KEY),
    );
    let mut published = derived(client_tls::published_client_ca(), provider_config, CA_PUBLISHED);
    remote::observe_only(&mut published);
    out.compose(
        PUBLISHED_KEY,
        in_control_namespace(published),
        remote::observed_ready(req, PUBLISHED_KEY),
    );
    // The EnvoyProxy names the certificate's Secret, so it waits for the certificate; once made it stays, so a
    // renewal in progress never takes the certificate off the wire.
    if issued || request::observed_composed(req, PROXY_KEY).is_some() {
        out.compose(
            PROXY_KEY,
            plain(client_tls::envoy_proxy()),
            remote::observed_ready(req, PROXY_KEY),
        );
    }
    Progress {
        issued,
        proxy_ready: remote::observed_ready(req, PROXY_KEY),
    }
}

/// The CAs the gateway publishes: its CA, once its Envoy presents certificates under it (`presenting`), then the
/// ones it published before while a cluster with a gateway does not trust the new one yet. Until it presents, what
/// it published before: a moment when the CA cannot be read must not drop it from every cluster. Says how far it
/// is in the `ClientCertificate` condition.
pub fn publish(
    out: &mut Output,
    req: &RunFunctionRequest,
    progress: &Progress,
    presenting: bool,
    before: &[String],
    clusters: &BTreeMap<String, ClusterView>,
) -> Vec<String> {
    let before: Vec<String> = before
        .iter()
        .filter(|pem| valid_ca(pem).is_ok())
        .take(MAX_TRUSTED_CAS)
        .cloned()
        .collect();
    let current = presenting
        .then(|| {
            request::observed_composed(req, PUBLISHED_KEY)?
                .resource
                .as_ref()?
                .to_json()
                .ok()
        })
        .flatten()
        .and_then(|observed| published_ca(&observed));
    let Some(current) = current else {
        let why = if progress.issued {
            "the client certificate is issued; waiting for the fleet Gateway to take the EnvoyProxy that presents it"
        } else {
            "waiting for cert-manager on the gateway's cluster to issue the client certificate the gateway presents \
             to cluster gateways"
        };
        out.condition(
            ConditionType::ClientCertificate,
            Status::ConditionFalse,
            Reason::Issuing,
            why,
        );
        return before;
    };
    let id = fingerprint(&current).unwrap_or_default();
    let gateways: Vec<_> = clusters
        .values()
        .filter_map(|c| c.status.gateway.as_ref())
        .collect();
    let requiring = gateways
        .iter()
        .filter(|g| g.trusted_client_authorities.contains(&id))
        .count();
    let everywhere = requiring == gateways.len();
    out.condition(
        ConditionType::ClientCertificate,
        Status::ConditionTrue,
        Reason::Presented,
        format!(
            "presenting a client certificate under CA {id}; {requiring} of {} cluster gateways require it",
            gateways.len()
        ),
    );
    let older: Vec<String> = if everywhere {
        Vec::new()
    } else {
        before.into_iter().filter(|pem| *pem != current).collect()
    };
    let mut cas = vec![current];
    cas.extend(older);
    cas.truncate(MAX_TRUSTED_CAS);
    cas
}
