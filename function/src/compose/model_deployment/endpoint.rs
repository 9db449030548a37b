//! The ModelEndpoint a replica is reached through: composed while the replica is Ready on a cluster whose
//! gateway has an address, and dropped as soon as it is not (a replica loading weights or being moved takes no
//! traffic). ModelServices select it by label, like an endpoint written by hand.

use std::collections::BTreeMap;

use crate::wire::tree::{Fields, fields};

use crate::{
    api::{
        inference_cluster::checks_callers, ledger::CLUSTER_LABEL, model_deployment::ModelDeploymentSpec,
        routing::STANDBY_LABEL,
    },
    compose::{API_VERSION, Output, remote},
    proto::v1::RunFunctionRequest,
    schedule::ClusterView,
    sdk::request,
    workload::{
        names::child_name,
        replica_routing,
        well_known::{GATEWAY_NAMESPACE, STANDBY_PORT, STANDBY_SERVICE},
    },
};

/// Label naming the ModelDeployment a replica's endpoint belongs to: what a ModelService selects it by.
pub const DEPLOYMENT_LABEL: &str = "modelplane.ai/deployment";
pub const REPLICA_INDEX_LABEL: &str = "modelplane.ai/replica-index";
/// The composed-resource key of the standby endpoint (not `endpoint-…`, the replicas' key shape).
pub const STANDBY_KEY: &str = "standby-endpoint";
/// The engine flag that names the model the engine answers to (vLLM and SGLang spell it alike).
const SERVED_MODEL_NAME_FLAG: &str = "--served-model-name";

/// The composed-resource key of a replica's endpoint on `cluster`. It names the cluster, so while a replica
/// moves the new placement's endpoint and the old one's are two resources, both routed until the old goes.
pub fn key(replica: u32, cluster: &str) -> String {
    format!("endpoint-{replica}-{cluster}")
}

/// The cluster's gateway address, when it has one: the replica's routing objects go on the cluster only then.
pub fn gateway_address(cluster: &ClusterView) -> Option<&str> {
    cluster
        .status
        .gateway
        .as_ref()
        .map(|g| g.address.as_str())
        .filter(|a| !a.is_empty())
}

/// Whether replicas on `cluster` may be routed now: its gateway has an address, and it is known to require a
/// client certificate (the fleet's, or the placeholder nobody holds) unless the platform team chose to admit
/// anyone before a fleet CA (`spec.gateway.beforeFleetClientCA: AdmitAll`). Until the cluster holds its client
/// policy, its gateway answers any caller of its load balancer, so nothing new is routed there: fail closed.
/// What is already routed stays (the callers decide with what they observe).
pub fn routable(cluster: &ClusterView) -> bool {
    let admits = cluster.status.gateway.as_ref().and_then(|g| g.admits);
    gateway_address(cluster).is_some() && checks_callers(admits, cluster.spec.gateway.before_fleet_client_ca)
}

/// How the fleet gateway reaches a replica on `cluster` over TLS: the gateway's address, the name its
/// certificate is issued for and the cluster's CA. None until the cluster has published its CA: a replica is
/// never published behind a plaintext hop.
pub struct Reach<'a> {
    pub address: &'a str,
    pub server_name: &'a str,
    pub ca_certificate: &'a str,
}

pub fn reach(cluster: &ClusterView) -> Option<Reach<'_>> {
    let gateway = cluster.status.gateway.as_ref()?;
    Some(Reach {
        address: gateway_address(cluster)?,
        server_name: gateway.server_name.as_deref().filter(|n| !n.is_empty())?,
        ca_certificate: gateway.ca_certificate.as_deref().filter(|c| !c.is_empty())?,
    })
}

/// One replica placement whose engines serve.
pub struct Placement<'a> {
    pub deployment: &'a str,
    pub namespace: &'a str,
    pub replica: u32,
    pub spec: &'a ModelDeploymentSpec,
    pub cluster: &'a ClusterView,
}

/// Whether a serving placement is reachable by callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routed {
    /// Its cluster's gateway has no address or no published CA yet: nothing to publish, and nothing to wait for.
    NoEndpoint,
    /// Its endpoint is composed but not observed Ready yet: ModelServices do not route it yet.
    Pending,
    Ready,
}

/// Composes the endpoint of a serving placement when its cluster's gateway is reachable over TLS, and says
/// whether it is routable yet.
pub fn publish(out: &mut Output, req: &RunFunctionRequest, s: &Placement) -> Routed {
    let key = key(s.replica, &s.cluster.metadata.name);
    let published = request::observed_composed(req, &key).is_some();
    let Some(reach) = reach(s.cluster).filter(|_| published || routable(s.cluster)) else {
        return Routed::NoEndpoint;
    };
    let ready = remote::observed_ready(req, &key);
    out.compose(key, endpoint(s, &reach), ready);
    if ready { Routed::Ready } else { Routed::Pending }
}

/// The name of replica `replica`'s endpoint on `cluster`: distinct per cluster, so a moving replica's two
/// endpoints coexist.
pub fn name(deployment: &str, replica: u32, cluster: &str) -> String {
    child_name(&[deployment, &replica.to_string(), cluster], 63)
}

/// The endpoint's labels: the cluster's (region, provider) let a ModelService scope by place; the template's let
/// it pick a variant; ours come last and win.
pub fn labels(s: &Placement) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in s
        .cluster
        .metadata
        .labels
        .iter()
        .chain(&s.spec.template.metadata.labels)
    {
        labels.insert(k.clone(), v.clone());
    }
    labels.insert(DEPLOYMENT_LABEL.into(), s.deployment.into());
    labels.insert(CLUSTER_LABEL.into(), s.cluster.metadata.name.clone());
    labels.insert(REPLICA_INDEX_LABEL.into(), s.replica.to_string());
    labels
}

/// The ModelEndpoint for a serving placement: the cluster gateway's address over HTTPS, checked against the
/// cluster's own CA, under the replica's path prefix (which the gateway strips), speaking OpenAI under `/v1`.
fn endpoint(s: &Placement, reach: &Reach) -> Fields {
    let serving_name = replica_routing::serving_name(s.deployment, s.replica);
    let host = if reach.address.contains(':') {
        format!("[{}]", reach.address)
    } else {
        reach.address.to_owned()
    };
    let mut spec = fields!({
        "origin": format!("https://{host}"),
        "api": {"schema": "OpenAI", "prefix": format!("{}v1", replica_routing::path_prefix(s.namespace, &serving_name))},
        "tls": {"serverName": reach.server_name, "caCertificate": reach.ca_certificate},
    });
    if let Some(model) = served_model_name(s.spec) {
        spec.insert("model", model);
    }
    fields!({
        "apiVersion": API_VERSION,
        "kind": "ModelEndpoint",
        "metadata": {
            "name": name(s.deployment, s.replica, &s.cluster.metadata.name),
            "namespace": s.namespace,
            "labels": labels(s),
        },
        "spec": spec,
    })
}

/// The standby endpoint of a deployment that may scale to zero: the standby server each fleet gateway's cluster
/// runs (in-cluster, so plain http on the cluster's network), under `/<namespace>/<deployment>/v1`, which is how
/// that server knows whose demand a request is. Labelled like the replicas' endpoints but for the cluster labels
/// (it is on no cluster of the deployment's), so a ModelService selecting the deployment selects it too.
pub fn standby(out: &mut Output, deployment: &str, namespace: &str, spec: &ModelDeploymentSpec) {
    let mut labels = spec.template.metadata.labels.clone();
    labels.insert(DEPLOYMENT_LABEL.into(), deployment.into());
    labels.insert(STANDBY_LABEL.into(), "true".into());
    let endpoint = fields!({
        "apiVersion": API_VERSION,
        "kind": "ModelEndpoint",
        "metadata": {
            "name": child_name(&[deployment, "standby"], 63),
            "namespace": namespace,
            "labels": labels,
        },
        "spec": {
            "origin": format!("http://{STANDBY_SERVICE}.{GATEWAY_NAMESPACE}.svc.cluster.local:{STANDBY_PORT}"),
            "api": {"schema": "OpenAI", "prefix": format!("/{namespace}/{deployment}/v1")},
        },
    });
    // Never holds the deployment's readiness: it is where callers wait, not what serves them.
    out.compose(STANDBY_KEY, endpoint, true);
}

/// The model name the serving engine answers to, read from its `--served-model-name` flag, so the gateway
/// rewrites a caller's `<namespace>/<service>` to it. Without the flag the caller's name passes through, and
/// the engine must answer to that name itself.
fn served_model_name(spec: &ModelDeploymentSpec) -> Option<String> {
    replica_routing::serving_flag(spec, SERVED_MODEL_NAME_FLAG)
}
