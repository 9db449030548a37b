//! Readiness and status, from observed state only: a composed resource is ready when Crossplane observes it
//! with `Ready=True` (MRs, Releases, Objects, whose Deployments report `Available` through their readiness
//! query), or merely observes it for kinds without conditions (provider configs, the activation policy). The
//! cluster is ready only when all of it is; its pools are offered to the scheduler only then, and only pools
//! whose NodePool is ready.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::IgnoredAny;
use serde_json::Value;

use super::{
    components::{Planned, gateway_object_key, provider_config_name},
    ledger,
    provision::Provisioner,
};
use crate::compose::conditions::{ConditionType, Reason};
use crate::{
    api::{
        availability::Reachability,
        inference_class::InferenceClassSpec,
        inference_cluster::{
            BeforeFleetClientCa, ComponentStatus, FabricType, GatewayStatus, InferenceClusterSpec,
            InferenceClusterStatus, PoolStatus, checks_callers,
        },
    },
    compose::{Output, remote},
    proto::v1::{RunFunctionRequest, Status},
    sdk::request,
    stack::{
        ServingStack,
        components::{CERT_MANAGER, CLUSTER_GATEWAY},
    },
    workload::{
        cluster_gateway::{GATEWAY_SUFFIX, client_tls, tls},
        well_known::GATEWAY_NAMESPACE,
    },
};

/// Kinds that never report conditions: existing is as ready as they get. A Secret is one a cloud composes on
/// the control plane for its MRs to read (Nebius node groups' cloud-init).
const CONDITIONLESS_KINDS: &[&str] = &[
    "ClusterProviderConfig",
    "ManagedResourceActivationPolicy",
    "Secret",
    "Usage",
];

/// How far composition got: the component list as installed so far, and stages not composed yet.
pub struct Progress<'a> {
    pub cloud: &'a dyn Provisioner,
    pub plan: &'a [Planned],
    pub waiting: &'a [&'a str],
    /// The placement ledger's entries, and the placements and pools the previous status admitted and offered.
    pub ledger: Vec<ledger::Entry>,
    pub previous: ledger::Previous,
    pub reachability: Option<Reachability>,
}

pub fn report(
    req: &RunFunctionRequest,
    out: &mut Output,
    name: &str,
    spec: &InferenceClusterSpec,
    stack: &dyn ServingStack,
    progress: Progress,
    classes: &BTreeMap<String, InferenceClassSpec>,
) {
    let Progress {
        cloud,
        plan,
        waiting,
        ledger: entries,
        previous,
        reachability,
    } = progress;
    for (key, composed) in out.resources.iter_mut() {
        // The probe reports an outage through conditions; it never holds readiness.
        if key == super::reachability::PROBE_KEY {
            continue;
        }
        let kind = composed
            .object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        composed.ready = observed_ready(req, key, CONDITIONLESS_KINDS.contains(&kind));
    }
    let unready: Vec<&str> = out
        .resources
        .iter()
        .filter(|(_, c)| !c.ready)
        .map(|(k, _)| k.as_str())
        .chain(waiting.iter().copied())
        .collect();
    let all_ready = unready.is_empty();
    if all_ready {
        out.condition(
            ConditionType::StackReady,
            Status::ConditionTrue,
            Reason::Available,
            "",
        );
    } else {
        out.condition(
            ConditionType::StackReady,
            Status::ConditionFalse,
            Reason::Creating,
            format!("waiting for {}", unready.join(", ")),
        );
    }

    // Pools are offered once what reaches the cluster is ready (its provider configs, the EKS cluster and the
    // pool's node group). Components do not hold pools back: each is reported below, and the scheduler decides
    // which of them a replica needs (a monitoring chart that is not ready takes no cluster out of scheduling).
    // Once offered, a pool stays offered for as long as the spec declares it: a resource that is not ready for a
    // moment (a node group updating, an Object whose reconcile failed across a control-plane restart) must not
    // take the nodes its holders run on out of the ledger, where every deployment would read them as free. A
    // cluster that cannot be reached is judged by its reachability and grace period instead.
    let component_keys: BTreeSet<&str> = plan
        .iter()
        .flat_map(|p| p.keys.iter().map(String::as_str))
        .collect();
    let pool_keys: BTreeSet<String> = spec
        .node_pools
        .iter()
        .map(|p| p.name.as_str())
        .chain([super::check::SYSTEM_POOL])
        .filter_map(|p| cloud.pool_key(p))
        .collect();
    let reachable = out
        .resources
        .iter()
        .all(|(key, c)| c.ready || component_keys.contains(key.as_str()) || pool_keys.contains(key));
    let mut pools: Vec<PoolStatus> = spec
        .node_pools
        .iter()
        .filter(|pool| {
            previous.offered.contains(&pool.name) || (reachable && pool_ready(out, cloud, &pool.name))
        })
        .map(|pool| {
            let class = classes.get(&pool.class_name);
            let efa_interfaces = match pool.fabric.type_ {
                FabricType::Efa => class
                    .and_then(|c| c.provisioning.eks.as_ref())
                    .and_then(crate::compose::inference_class::efa_interfaces)
                    .unwrap_or(0),
                FabricType::None | FabricType::InfiniBand => 0,
            };
            PoolStatus {
                name: pool.name.clone(),
                class_name: pool.class_name.clone(),
                node_count: pool.node_count,
                min_node_count: pool.min_node_count,
                max_node_count: pool.max_node_count,
                efa_interfaces,
                devices: class.map(|c| c.devices.clone()).unwrap_or_default(),
                allocated_nodes: 0,
                holders: Vec::new(),
            }
        })
        .collect();
    let overcommitted = ledger::admit(&mut pools, entries, &previous.incumbents);
    if !overcommitted.is_empty() {
        // Re-read the ledger soon: the over-committed placements leave, and what waits may then be admitted.
        out.ttl = Some(crate::compose::WAITING_TTL);
    }
    let components = plan
        .iter()
        .map(|p| ComponentStatus {
            name: p.component.name.into(),
            version: p.component.version.into(),
            // A component not composed yet (an EKS cluster still being provisioned) is not ready.
            ready: !p.keys.is_empty()
                && p.keys
                    .iter()
                    .all(|k| out.resources.get(k).is_some_and(|c| c.ready)),
        })
        .collect();
    let gateway = gateway(req);
    gateway_condition(out, req, gateway.as_ref(), spec.gateway.before_fleet_client_ca);
    let status = InferenceClusterStatus {
        stack: spec.stack,
        provider_config_name: provider_config_name(name),
        cache_storage_class: cloud.cache_storage_class(out).unwrap_or_default(),
        model_express_address: stack.model_express_address(),
        kai_queue: stack.kai_queue().map(str::to_owned),
        gateway,
        pools,
        components,
        overcommitted,
        reachability,
        conditions: Vec::new(),
    };
    if let Ok(Value::Object(map)) = serde_json::to_value(&status) {
        out.status = map;
    }
    out.ready = Some(all_ready);
}

/// Where the cluster gateway answers, as observed on the cluster: the first address Envoy Gateway gave it, and,
/// once trust-manager has published it, the CA its certificate is checked against. Replicas here get endpoints
/// only once it has both.
fn gateway(req: &RunFunctionRequest) -> Option<GatewayStatus> {
    let observed = |suffix: &str| {
        request::observed_composed(req, &gateway_object_key(suffix))?
            .resource
            .as_ref()?
            .to_json()
            .ok()
    };
    let address = observed(GATEWAY_SUFFIX)?
        .pointer("/status/atProvider/manifest/status/addresses/0/value")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)?;
    let ca_certificate = observed(tls::CA_SUFFIX).and_then(|o| tls::published_ca(&o));
    Some(GatewayStatus {
        address,
        server_name: ca_certificate.as_ref().map(|_| tls::SERVER_NAME.to_owned()),
        ca_certificate,
        trusted_client_authorities: super::client_trust::applied_fingerprints(req),
        admits: Some(super::client_trust::admits(req)),
    })
}

/// Whether the fleet can reach replicas here: the cluster gateway has an address and the cluster has published
/// the CA its certificate is checked against. Until then no replica on the cluster gets a ModelEndpoint, and
/// this condition says which link of the chain is missing (a ModelService only sees that nothing matches).
fn gateway_condition(
    out: &mut Output,
    req: &RunFunctionRequest,
    gateway: Option<&GatewayStatus>,
    before: BeforeFleetClientCa,
) {
    let (status, reason, message) = match gateway {
        None => (
            Status::ConditionFalse,
            Reason::Provisioning,
            format!(
                "status.gateway is empty: Envoy Gateway has given Gateway {GATEWAY_NAMESPACE}/{} no address yet; \
                 no replica on this cluster is published to the fleet until it has one",
                CLUSTER_GATEWAY.name
            ),
        ),
        Some(g) if g.ca_certificate.is_none() => {
            let published = gateway_object_key(tls::CA_SUFFIX);
            let provider = remote::observed::<IgnoredAny>(request::observed_composed(req, &published))
                .and_then(|o| {
                    o.condition("Synced")
                        .filter(|c| c.status == "False")
                        .map(|c| c.provider_words())
                })
                .map(|words| format!(" (provider-kubernetes: {words})"))
                .unwrap_or_default();
            (
                Status::ConditionFalse,
                Reason::CertificatePending,
                format!(
                    "status.gateway.caCertificate is empty: ConfigMap {GATEWAY_NAMESPACE}/{ca} holds no valid {key} \
                     yet{provider}. trust-manager publishes it from cert-manager's CA Secret {issuer_ns}/{ca}, \
                     which also signs the gateway's serving certificate (Secret {GATEWAY_NAMESPACE}/{serving}); \
                     no replica on this cluster is published to the fleet until it is",
                    ca = tls::PUBLISHED_CA,
                    key = tls::CA_KEY,
                    issuer_ns = CERT_MANAGER.namespace,
                    serving = tls::SERVING_SECRET,
                ),
            )
        }
        Some(g) if !checks_callers(g.admits, before) => (
            Status::ConditionFalse,
            Reason::ClientPolicyPending,
            format!(
                "status.gateway.admits is Anyone: the client validation (ClientTrafficPolicy \
                 {GATEWAY_NAMESPACE}/{policy} and ConfigMap {GATEWAY_NAMESPACE}/{trust}) is not held on the \
                 cluster yet, so its gateway would answer any caller; no replica here is routed until it is",
                policy = client_tls::CLIENT_POLICY,
                trust = client_tls::TRUSTED_CLIENT_CAS,
            ),
        ),
        Some(_) => (Status::ConditionTrue, Reason::Available, String::new()),
    };
    out.condition(ConditionType::GatewayReady, status, reason, message);
}

/// A pool is offered once the resource its cloud provisions it with is ready; at once where nothing of ours
/// provisions it.
fn pool_ready(out: &Output, cloud: &dyn Provisioner, pool: &str) -> bool {
    cloud
        .pool_key(pool)
        .is_none_or(|key| out.resources.get(&key).is_some_and(|c| c.ready))
}

/// Whether Crossplane observes the resource under `key` as ready. Only its conditions are read: a settled
/// cluster observes a hundred resources on every poll, and reading each whole was half of its reconcile.
fn observed_ready(req: &RunFunctionRequest, key: &str, conditionless: bool) -> bool {
    if conditionless {
        return request::observed_composed(req, key)
            .and_then(|r| r.resource.as_ref())
            .is_some_and(|raw| raw.parse::<IgnoredAny>().is_ok());
    }
    remote::observed_ready(req, key)
}
