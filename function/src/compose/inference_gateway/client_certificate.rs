//! The fleet gateway's client certificate ([`client_tls`]): its CA and the certificate composed on the gateway's
//! cluster, presented to every TLS backend once issued, and the CA published in the gateway's status for every
//! InferenceCluster to require.
//!
//! A CA that changes (cert-manager renews it with a new key, or it is deleted and made again) is rolled so that
//! no request is refused at any step:
//! 1. the new CA is published beside the old one; the certificate stays under the old one;
//! 2. once every cluster with a gateway reports trusting the new CA, the certificate's spec names it
//!    ([`client_tls::issued_under`]) and cert-manager reissues it under the new CA;
//! 3. once that reissue is Ready, the old CA is dropped.
//!
//! cert-manager alone would do neither step 2 nor its order: it keeps a certificate issued under an old CA until
//! its own renewal, which may come before or long after the clusters trust the new one.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::wire::tree::Tree;

use super::in_control_namespace;
use crate::compose::conditions::{ConditionType, Reason};
use crate::{
    api::{
        ca::{fingerprint, valid_ca},
        cluster_view::ClusterView,
        inference_cluster::GatewayStatus,
    },
    compose::{Output, remote},
    proto::v1::{RunFunctionRequest, Status},
    sdk::request,
    workload::cluster_gateway::{
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
fn derived(manifest: Tree, provider_config: &str, query: &'static str) -> remote::Object {
    remote::Object::new(manifest, provider_config).ready_when(query)
}

/// How far the client certificate has come on the gateway's cluster.
pub struct Progress {
    /// cert-manager issued it.
    pub issued: bool,
    /// The EnvoyProxy presenting it exists, so the fleet Gateway can take it.
    pub proxy_ready: bool,
    /// The CA trust-manager publishes now, with its fingerprint.
    pub current: Option<(String, String)>,
    /// Every cluster with a gateway trusts `current`.
    pub trusted_everywhere: bool,
    /// The certificate is issued under `current` (so the CAs before it can go).
    pub under_current: bool,
}

/// Composes the CA, its issuer, the Bundle publishing the CA and the published CA (read only), the client
/// certificate once the CA is published (under the CA every cluster trusts: see the module's rotation), and the
/// EnvoyProxy that presents it once it is issued.
pub fn compose(
    out: &mut Output,
    req: &RunFunctionRequest,
    provider_config: &str,
    clusters: &BTreeMap<String, ClusterView>,
) -> Progress {
    let plain = |manifest: Tree| in_control_namespace(remote::Object::new(manifest, provider_config));
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
    out.compose(
        BUNDLE_KEY,
        plain(client_tls::client_ca_bundle()),
        remote::observed_ready(req, BUNDLE_KEY),
    );
    let published = derived(client_tls::published_client_ca(), provider_config, CA_PUBLISHED).observe_only();
    out.compose(
        PUBLISHED_KEY,
        in_control_namespace(published),
        remote::observed_ready(req, PUBLISHED_KEY),
    );

    let current = request::observed_composed(req, PUBLISHED_KEY)
        .and_then(|r| r.resource.as_ref()?.to_json().ok())
        .and_then(|observed| published_ca(&observed))
        .and_then(|pem| Some((fingerprint(&pem)?, pem)))
        .map(|(id, pem)| (pem, id));
    let trusted_everywhere = current
        .as_ref()
        .is_some_and(|(_, id)| trusted_by_every_cluster(clusters, id));
    let observed_certificate =
        request::observed_composed(req, CERTIFICATE_KEY).and_then(|r| r.resource.as_ref()?.to_json().ok());
    let applied = observed_certificate
        .as_ref()
        .and_then(|o| issued_under(o.pointer("/spec/forProvider/manifest")?));
    // A first certificate takes the CA there is; a later one moves only to a CA every cluster trusts.
    let under = match (&current, applied) {
        (Some((_, id)), applied) if applied.is_none() || trusted_everywhere => {
            Some(client_tls::issued_under(id))
        }
        (_, applied) => applied,
    };
    let mut issued = false;
    let mut under_current = false;
    if let Some(under) = under {
        let ready = remote::observed_ready(req, CERTIFICATE_KEY);
        let seen = observed_certificate
            .as_ref()
            .and_then(|o| issued_under(o.pointer("/status/atProvider/manifest")?));
        issued = ready && seen.as_deref() == Some(under.as_str());
        under_current = issued
            && current
                .as_ref()
                .is_some_and(|(_, id)| client_tls::issued_under(id) == under);
        out.compose(
            CERTIFICATE_KEY,
            in_control_namespace(derived(
                client_tls::client_certificate(&under),
                provider_config,
                CERTIFICATE_READY,
            )),
            issued,
        );
    }
    // The EnvoyProxy names the certificate's Secret, so it waits for the certificate; once made it stays, so a
    // reissue in progress never takes the certificate off the wire.
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
        current,
        trusted_everywhere,
        under_current,
    }
}

/// The CA a Certificate manifest names in its organizational unit ([`client_tls::issued_under`]).
fn issued_under(manifest: &Value) -> Option<String> {
    let unit = manifest
        .pointer("/spec/subject/organizationalUnits/0")?
        .as_str()?;
    Some(unit.to_owned())
}

fn gateways(clusters: &BTreeMap<String, ClusterView>) -> impl Iterator<Item = &GatewayStatus> {
    clusters.values().filter_map(|c| c.status.gateway.as_ref())
}

/// Every cluster with a gateway reports trusting the CA `id` (true when none has one: nothing can refuse).
fn trusted_by_every_cluster(clusters: &BTreeMap<String, ClusterView>, id: &str) -> bool {
    gateways(clusters).all(|g| g.trusted_client_authorities.iter().any(|t| t == id))
}

/// The CAs the gateway publishes: its current CA once its Envoy presents certificates (`presenting`), then the
/// ones it published before until the certificate is reissued under the current one (see the module's rotation).
/// Until it presents, what it published before: a moment when the CA cannot be read must not drop it from every
/// cluster. Says how far it is in the `ClientCertificate` condition.
pub fn publish(
    out: &mut Output,
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
    let current = progress.current.as_ref().filter(|_| presenting);
    let Some((current, id)) = current else {
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
    let total = gateways(clusters).count();
    let requiring = gateways(clusters)
        .filter(|g| g.trusted_client_authorities.contains(id))
        .count();
    let rotating = before.iter().any(|pem| pem != current);
    let step = if !rotating || progress.under_current {
        ""
    } else if progress.trusted_everywhere {
        "; reissuing the certificate under it"
    } else {
        "; the certificate stays under the CA before it until every cluster trusts it"
    };
    out.condition(
        ConditionType::ClientCertificate,
        Status::ConditionTrue,
        Reason::Presented,
        format!("presenting a client certificate; CA {id} is required by {requiring} of {total} cluster gateways{step}"),
    );
    let older: Vec<String> = if progress.under_current {
        Vec::new()
    } else {
        before.into_iter().filter(|pem| pem != current).collect()
    };
    let mut cas = vec![current.clone()];
    cas.extend(older);
    cas.truncate(MAX_TRUSTED_CAS);
    cas
}
