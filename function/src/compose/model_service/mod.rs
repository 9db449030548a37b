//! Routes a `ModelService` on every fleet gateway that serves it.
//!
//! A caller sends an OpenAI request with `model: <namespace>/<service>` to an InferenceGateway. Envoy AI Gateway
//! reads the model from the body and matches it against one `AIGatewayRoute` per service, which lists the ready
//! ModelEndpoints the service's entries select, in priority tiers with weights. The route and its backends live on
//! the gateway's cluster, applied through provider-kubernetes like everything else Modelplane puts on a cluster.
//!
//! Tenancy: only ModelEndpoints in the service's own namespace are read, unless an InferenceGateway (cluster-scoped,
//! so written by the platform team) grants the service's namespace another one in `spec.endpointGrants`; then an
//! entry naming that namespace reads it too. Each requirement is scoped to one namespace, and anything else
//! Crossplane might send is dropped before selection. An entry naming a namespace no grant allows matches nothing,
//! and EndpointsResolved names the field.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::{ComposeError, Output, remote};
use crate::{
    api::{
        ObjectMeta,
        routing::{
            EndpointCounts, EndpointUrl, InferenceGateway, ModelEndpointSpec, ModelServiceSpec,
            ModelServiceStatus, STANDBY_LABEL, ServingGatewayStatus, resolve_endpoint,
        },
    },
    proto::v1::{Resource, ResourceSelector, RunFunctionRequest},
    schedule::ClusterView,
    sdk::request,
    wire::RawStruct,
};

mod check;
mod report;
pub mod route;
pub mod weights;

const ENDPOINTS: &str = "endpoints";
const GATEWAYS: &str = "gateways";
const CLUSTERS: &str = "clusters";
/// With no `spec.timeouts.request`, no deadline: a long generation streams for minutes, and a dead backend is
/// caught by the gateway's health checks, not by cutting every stream at a fixed age.
const NO_DEADLINE: &str = "0s";

#[derive(Deserialize)]
struct ModelService {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: ModelServiceSpec,
}

#[derive(Deserialize)]
struct EndpointView {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: ModelEndpointSpec,
    #[serde(default)]
    status: ConditionsView,
}

#[derive(Default, Deserialize)]
struct ConditionsView {
    #[serde(default)]
    conditions: Vec<remote::ConditionView>,
}

pub fn compose(req: &RunFunctionRequest, xr: &RawStruct) -> Result<Output, ComposeError> {
    let service: ModelService = xr.parse()?;
    let names = check::entry_names(&service.spec)?;
    let namespace = service
        .metadata
        .namespace
        .as_deref()
        .unwrap_or_default()
        .to_owned();
    if namespace.is_empty() {
        return Err(ComposeError::new(
            "metadata.namespace",
            "a ModelService is namespaced; it selects ModelEndpoints in its own namespace",
        ));
    }
    let name = service.metadata.name.clone();
    let model = format!("{namespace}/{name}");
    let mut out = Output {
        requirements: requirements(&namespace),
        ..Default::default()
    };
    let mut status = ModelServiceStatus {
        model: model.clone(),
        ..Default::default()
    };
    out.set_status(&status)?;
    let (Some(found_endpoints), Some(gateways), Some(clusters)) = (
        request::required_resources(req, ENDPOINTS),
        request::required_resources(req, GATEWAYS),
        request::required_resources(req, CLUSTERS),
    ) else {
        out.ready = Some(false);
        return Ok(out);
    };

    // Other namespaces' endpoints, where a grant allows: each its own requirement, added once the gateways (and so
    // the grants) are known. Crossplane calls again with it answered; until then nothing is composed.
    let granted = granted_namespaces(gateways, &namespace);
    let mut sources = vec![(namespace.as_str(), found_endpoints)];
    let mut refused = Vec::new();
    let mut unanswered = false;
    for (index, entry) in service.spec.endpoints.iter().enumerate() {
        let Some(other) = entry.namespace.as_deref().filter(|n| *n != namespace) else {
            continue;
        };
        if !granted.contains(other) {
            refused.push((index, other));
            continue;
        }
        if sources.iter().any(|(n, _)| *n == other) {
            continue;
        }
        // Every granted namespace is asked for in the same call, so one more call answers them all: Crossplane
        // stops after a few calls whose requirements keep changing.
        let key = granted_endpoints_key(other);
        out.requirements
            .insert(key.clone(), select("ModelEndpoint", Some(other)));
        match request::required_resources(req, &key) {
            Some(found) => sources.push((other, found)),
            None => unanswered = true,
        }
    }
    if unanswered {
        out.ready = Some(false);
        return Ok(out);
    }
    let mut endpoints = Vec::new();
    for (source, found) in sources {
        endpoints.extend(endpoints_in(found, source, &namespace, &mut out.warnings));
    }
    let entries: Vec<weights::Entry<'_>> = service
        .spec
        .endpoints
        .iter()
        .zip(&names)
        .map(|(entry, name)| weights::Entry {
            name,
            namespace: entry.namespace.as_deref().unwrap_or(&namespace),
            priority: entry.priority,
            weight: entry.weight,
            selector: &entry.selector,
        })
        .collect();
    let candidates: Vec<weights::Candidate<'_>> = endpoints
        .iter()
        .map(|found| weights::Candidate {
            name: &found.id,
            namespace: &found.namespace,
            labels: &found.view.metadata.labels,
            ready: found.url.is_some() && is_ready(&found.view),
            standby: found
                .view
                .metadata
                .labels
                .get(STANDBY_LABEL)
                .is_some_and(|v| v == "true"),
        })
        .collect();
    let plan = weights::plan(&entries, &candidates);
    let mut endpoint_counts = EndpointCounts {
        total: plan.matched,
        ready: plan.ready,
        routed: Vec::new(),
    };
    if plan.dropped > 0 {
        out.warnings.push(format!(
            "{} ready endpoints are left out of the route: a route lists at most {} (the least preferred tiers \
             lose them first)",
            plan.dropped,
            crate::compose::shared::MAX_BACKENDS
        ));
    }
    report::endpoints(&mut out, &service.spec, &names, &plan, &namespace, &refused);

    let routed: Vec<route::Routed<'_>> = plan
        .backends
        .iter()
        .filter_map(|backend| {
            let found = endpoints.iter().find(|f| f.id == backend.endpoint)?;
            let (view, (url, prefix)) = (&found.view, found.url.as_ref()?);
            Some(route::Routed {
                backend,
                namespace: &found.namespace,
                url,
                prefix: prefix.clone(),
                schema: &view.spec.api.schema,
                model_override: view.spec.model.as_deref(),
                api_key: view
                    .spec
                    .credential
                    .as_ref()
                    .and_then(|c| c.api_key.as_ref())
                    .map(|k| k.secret_ref.name.as_str()),
                tls: view.spec.tls.as_ref(),
            })
        })
        .collect();

    let serving = serving_gateways(gateways, clusters, &service.metadata);
    status.gateways = Some(
        serving
            .iter()
            .map(|g| ServingGatewayStatus {
                name: g.name.clone(),
                hostname: g.hostname.clone(),
                address: g.address.clone(),
            })
            .collect(),
    );
    // Where a caller sends `POST <address>/v1/chat/completions` with `model: <namespace>/<service>`: the first
    // serving gateway (by name) that answers somewhere, by its hostname when it has one, over HTTPS when it serves
    // only that, with its port when that is not the scheme's own.
    status.address = serving.iter().find_map(|g| g.base_url.clone());

    let timeout = service.spec.timeouts.request.as_deref().unwrap_or(NO_DEADLINE);
    let mut routes_ready = !routed.is_empty();
    let mut waiting = Vec::new();
    for gateway in &serving {
        let Some(pc) = gateway.provider_config.as_deref() else {
            waiting.push(format!("{} (its cluster is not reachable yet)", gateway.name));
            routes_ready = false;
            continue;
        };
        if routed.is_empty() {
            // Leaving the route out of the desired state deletes it: no route answers with an empty backend set.
            continue;
        }
        let key = |what: &str| format!("{}-{what}", gateway.name);
        out.compose(
            key("namespace"),
            remote::namespace(&namespace, pc).build(),
            remote::observed_ready(req, &key("namespace")),
        );
        let owner = routed
            .iter()
            .any(|r| r.api_key.is_some())
            .then(|| {
                let owner_key = key("secret-owner");
                let (object, owner) = remote::secret_copy::copy_owner(
                    &route::secret_owner_name(&name),
                    &namespace,
                    pc,
                    request::observed_composed(req, &owner_key),
                );
                out.compose(owner_key, object.build(), owner.is_some());
                owner
            })
            .flatten();
        for r in &routed {
            let object_name = route::backend_name(&name, &r.backend.endpoint);
            let endpoint_key = composed_key(&r.backend.endpoint);
            // A ModelEndpoint with `tls` is https (resolve_endpoint refuses it otherwise, so it is not routed).
            let ca = r
                .tls
                .map(|tls| ("ca", route::ca_config_map(&object_name, &namespace, tls)));
            for (what, manifest) in [
                ("backend", route::backend(&object_name, &namespace, r.url, r.tls)),
                (
                    "service-backend",
                    route::service_backend(&object_name, &namespace, r.schema, &r.prefix),
                ),
            ]
            .into_iter()
            .chain(ca)
            {
                let k = key(&format!("{what}-{endpoint_key}"));
                let ready = remote::observed_ready(req, &k);
                routes_ready &= ready;
                out.compose(k, remote::Object::new(manifest, pc).build(), ready);
            }
            if let Some(api_key) = r.api_key {
                let secret_key = key(&format!("api-key-{endpoint_key}"));
                let (secret, copied) = remote::secret_copy::secret_copy(
                    &route::api_key_secret_name(&object_name),
                    &namespace,
                    "Opaque",
                    pc,
                    // From the endpoint's own namespace: a granted endpoint's key is its team's, never a
                    // same-named Secret of the service's namespace.
                    vec![route::api_key_reference(r.namespace, api_key)],
                    owner.as_ref(),
                    request::observed_composed(req, &secret_key),
                );
                if let Some(why) = copied.waiting() {
                    waiting.push(format!(
                        "{} (endpoint {}'s key, spec.credential.apiKey.secretRef {}/{api_key}: {why})",
                        gateway.name, r.backend.endpoint, r.namespace
                    ));
                }
                let filled = copied == remote::secret_copy::CopyState::Filled;
                routes_ready &= filled;
                out.compose(secret_key, secret.build(), filled);
                let policy_key = key(&format!("credential-{endpoint_key}"));
                let ready = remote::observed_ready(req, &policy_key);
                routes_ready &= ready;
                out.compose(
                    policy_key,
                    remote::Object::new(route::api_key_policy(&object_name, &namespace), pc).build(),
                    ready,
                );
            }
        }
        let route_key = key("route");
        let ready = remote::observed_ready(req, &route_key);
        routes_ready &= ready;
        if !ready {
            waiting.push(format!("{} (route not ready yet)", gateway.name));
        }
        out.compose(
            route_key,
            remote::Object::new(
                route::ai_gateway_route(&name, &namespace, &model, &routed, timeout),
                pc,
            )
            .build(),
            ready,
        );
    }
    // The endpoints every serving gateway's route is seen to list, as applied on its cluster: a ModelDeployment
    // moving a replica waits for its new endpoint to be here before its old one goes, and for the old one to
    // leave before its workload goes.
    let mut applied: Option<BTreeSet<String>> = None;
    for gateway in serving.iter().filter(|g| g.provider_config.is_some()) {
        let seen = route::applied_backends(request::observed_composed(
            req,
            &format!("{}-route", gateway.name),
        ));
        applied = Some(match applied {
            None => seen,
            Some(before) => before.intersection(&seen).cloned().collect(),
        });
    }
    let applied = applied.unwrap_or_default();
    endpoint_counts.routed = plan
        .backends
        .iter()
        .filter(|b| applied.contains(&route::backend_name(&name, &b.endpoint)))
        .map(|b| b.endpoint.clone())
        .collect();
    status.endpoints = Some(endpoint_counts);
    out.set_status(&status)?;
    report::routing(&mut out, serving.is_empty(), routed.is_empty(), &waiting);
    out.ready = Some(routes_ready && !serving.is_empty());
    let reachable: Vec<&str> = serving
        .iter()
        .filter_map(|g| g.provider_config.as_deref())
        .collect();
    remote::secret_copy::retire_dropped(&mut out, req, &reachable);
    Ok(out)
}

fn select(kind: &str, namespace: Option<&str>) -> ResourceSelector {
    ResourceSelector {
        api_version: super::API_VERSION.into(),
        kind: kind.into(),
        r#match: None,
        namespace: namespace.map(str::to_owned),
    }
}

fn requirements(namespace: &str) -> BTreeMap<String, ResourceSelector> {
    BTreeMap::from([
        (ENDPOINTS.to_owned(), select("ModelEndpoint", Some(namespace))),
        (GATEWAYS.to_owned(), select("InferenceGateway", None)),
        (CLUSTERS.to_owned(), select("InferenceCluster", None)),
    ])
}

/// The requirement for a granted namespace's ModelEndpoints (namespaces are DNS labels: no `/` to collide on).
fn granted_endpoints_key(namespace: &str) -> String {
    format!("{ENDPOINTS}/{namespace}")
}

/// How an endpoint appears in composed resources' names: its name, or for a granted namespace's endpoint
/// `<namespace>_<name>` (`_` is in no Kubernetes name, so it never meets an own endpoint's, and unlike `/` it is
/// valid wherever Crossplane may carry the name, label values included).
fn composed_key(endpoint: &str) -> String {
    endpoint.replace('/', "_")
}

/// Every namespace some InferenceGateway lets `namespace`'s services select in.
fn granted_namespaces(gateways: &[Resource], namespace: &str) -> BTreeSet<String> {
    gateways
        .iter()
        .filter_map(|g| g.resource.as_ref()?.parse::<InferenceGateway>().ok())
        .flat_map(|g| {
            g.spec
                .granted_to(namespace)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A ModelEndpoint the service may select, with its parsed URL (None when the URL does not parse; such an
/// endpoint is counted but never routed, and the ModelEndpoint's own composer reports the fault).
struct FoundEndpoint {
    /// Its name in the service's namespace, `<namespace>/<name>` in a granted one: unique across both.
    id: String,
    namespace: String,
    view: EndpointView,
    url: Option<(EndpointUrl, String)>,
}

/// The ModelEndpoints of `namespace` among `found`, named as seen from a service in `own`.
fn endpoints_in(
    found: &[Resource],
    namespace: &str,
    own: &str,
    warnings: &mut Vec<String>,
) -> Vec<FoundEndpoint> {
    found
        .iter()
        .filter_map(|r| r.resource.as_ref()?.parse::<EndpointView>().ok())
        .filter(|e| e.metadata.namespace.as_deref() == Some(namespace))
        .map(|view| {
            let url = match resolve_endpoint(&view.spec) {
                Ok(resolved) => Some(resolved),
                Err((field, why)) => {
                    warnings.push(format!(
                        "ModelEndpoint {namespace}/{} is not routed: {field}: {why}",
                        view.metadata.name
                    ));
                    None
                }
            };
            let id = if namespace == own {
                view.metadata.name.clone()
            } else {
                format!("{namespace}/{}", view.metadata.name)
            };
            FoundEndpoint {
                id,
                namespace: namespace.to_owned(),
                view,
                url,
            }
        })
        .collect()
}

fn is_ready(endpoint: &EndpointView) -> bool {
    endpoint
        .status
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

struct ServingGateway {
    name: String,
    hostname: Option<String>,
    /// Scheme, host and port callers reach it at, once it has a hostname or an address.
    base_url: Option<String>,
    address: String,
    provider_config: Option<String>,
}

/// Every InferenceGateway whose `serviceSelector` matches the service (no selector: it serves every service),
/// with the provider config of the cluster it runs on, once that cluster is reachable.
fn serving_gateways(
    gateways: &[Resource],
    clusters: &[Resource],
    service: &ObjectMeta,
) -> Vec<ServingGateway> {
    let clusters: BTreeMap<String, ClusterView> = clusters
        .iter()
        .filter_map(|c| c.resource.as_ref()?.parse::<ClusterView>().ok())
        .map(|c| (c.metadata.name.clone(), c))
        .collect();
    let mut serving: Vec<ServingGateway> = gateways
        .iter()
        .filter_map(|g| g.resource.as_ref()?.parse::<InferenceGateway>().ok())
        .filter(|g| {
            g.spec.service_selector.as_ref().is_none_or(|s| {
                s.match_labels
                    .iter()
                    .all(|(k, v)| service.labels.get(k) == Some(v))
            })
        })
        .map(|g| {
            let cluster = if g.status.cluster_name.is_empty() {
                g.spec.cluster_name.clone().unwrap_or_default()
            } else {
                g.status.cluster_name.clone()
            };
            let provider_config = clusters
                .get(&cluster)
                .map(|c| c.status.provider_config_name.clone())
                .filter(|pc| !pc.is_empty());
            let reachable = g.spec.hostname.is_some() || !g.status.address.is_empty();
            ServingGateway {
                name: g.metadata.name,
                base_url: reachable.then(|| g.spec.base_url(&g.status.address)),
                hostname: g.spec.hostname,
                address: g.status.address,
                provider_config,
            }
        })
        .collect();
    serving.sort_by(|a, b| a.name.cmp(&b.name));
    serving
}

#[cfg(test)]
mod tests;
