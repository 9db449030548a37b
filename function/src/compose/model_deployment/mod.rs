//! Places a `ModelDeployment`'s replicas across the fleet and composes each replica's engines onto its
//! cluster's serving stack.
//!
//! Reads, as required resources, the InferenceClusters it runs on (by name), every candidate cluster only while
//! something waits, and the referenced ModelCache; never the other ModelDeployments: the nodes they hold come
//! from each cluster's placement ledger (docs/scheduling.md). A replica that runs stays where it is: its
//! placement is read back from the annotations on its observed composed Objects, unless its cluster lists it
//! as over-committed.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::IgnoredAny;

use super::{API_VERSION, ComposeError, Output, WAITING_TTL, remote};
use crate::compose::conditions::{ConditionType, Reason};
use crate::{
    api::{
        Composite,
        inference_cluster::deployment_key,
        model_deployment::{ModelDeploymentSpec, ModelDeploymentStatus, PreviousPlacement, ReplicaStatus},
    },
    fleet_metrics,
    proto::v1::{Resource, ResourceSelector, RunFunctionRequest, Status, resource_selector::Match},
    schedule::{self, ClusterView, Input, Outcome, Placement},
    sdk::request,
    stack::CacheUse,
    wire::RawStruct,
};

mod autoscaling;
mod availability;
mod cache;
pub mod endpoint;
use endpoint::Routed;
use handover::Keep;
mod fleet;
mod handover;
mod observed;
mod pods;
mod replica;
mod report;
mod services;
mod serving;
use report::{engine_status, previous_engines, unplaced_status};
mod check;

pub use fleet::{CLUSTERS, named as cluster_requirement};
pub const CACHE: &str = "model-cache";

/// The composer as `dispatch` runs it: with the fleet's last metrics sample, read now.
pub fn compose(req: &RunFunctionRequest, xr: &RawStruct) -> Result<Output, ComposeError> {
    compose_with(req, xr, |namespace, name| {
        fleet_metrics::reading(namespace, name, std::time::SystemTime::now())
    })
}

/// Composes with `metrics` answering for the deployment's serving figures (tests give a fixed one).
pub fn compose_with(
    req: &RunFunctionRequest,
    xr: &RawStruct,
    metrics: impl FnOnce(&str, &str) -> fleet_metrics::Reading,
) -> Result<Output, ComposeError> {
    compose_at(req, xr, metrics, jiff::Timestamp::now())
}

/// Composes as at `now`, the time clusters' grace periods are measured against.
pub fn compose_at(
    req: &RunFunctionRequest,
    xr: &RawStruct,
    metrics: impl FnOnce(&str, &str) -> fleet_metrics::Reading,
    now: jiff::Timestamp,
) -> Result<Output, ComposeError> {
    let md: Composite<ModelDeploymentSpec> = xr.parse()?;
    check::validate(&md.spec)?;
    let namespace = md.metadata.namespace.as_deref().unwrap_or_default();
    let name = md.metadata.name.as_str();
    let me = deployment_key(namespace, name);
    let observed = observed::ObservedReplicas::read(req);
    let placed_on = observed.clusters();
    let mut pins = observed.pins();
    pins.retain(|replica, _| *replica < md.spec.replicas);
    // Something waits to be placed: only then are clusters it does not run on read.
    let mut candidates = pins.len() < md.spec.replicas as usize;
    // Only while a replica moves are the namespace's ModelServices read (see services.rs).
    let moving = observed.replicas.values().any(|placements| placements.len() > 1);
    let mut out = Output {
        requirements: requirements(&md.spec, namespace, &placed_on, candidates, moving),
        warnings: check::warnings(&md.spec),
        ..Output::default()
    };
    // From the first call on, whatever else waits: an autoscaler reads it through the scale subresource.
    out.set_status(&ScaleSelector {
        selector: selector(name),
    })?;
    let Some(mut clusters) = fleet::gather(req, &placed_on, candidates, &mut out.warnings) else {
        return Ok(waiting_for_clusters(out));
    };
    fleet::heard_from(&mut clusters, &observed.answered, &mut out.warnings);
    let schedule_input = |clusters: &[ClusterView], pins: &BTreeMap<u32, schedule::Pin>| {
        let evicted = fleet::overcommitted(clusters, &me, pins);
        let kept: BTreeMap<u32, schedule::Pin> = pins
            .iter()
            .filter(|(r, _)| !evicted.contains_key(r))
            .map(|(r, p)| (*r, p.clone()))
            .collect();
        (evicted, kept, fleet::used_elsewhere(clusters, &me))
    };
    let (mut evicted, mut kept, mut used_elsewhere) = schedule_input(&clusters, &pins);
    if !candidates {
        let all_placed = schedule::schedule(&input(&md.spec, &clusters, &kept, &used_elsewhere, now, &me))?
            .iter()
            .all(|o| matches!(o, Outcome::Placed(_)));
        if !evicted.is_empty() || !all_placed {
            // The clusters it runs on cannot keep every replica: read the candidates too.
            candidates = true;
            out.requirements = requirements(&md.spec, namespace, &placed_on, candidates, moving);
            let Some(more) = fleet::gather(req, &placed_on, candidates, &mut out.warnings) else {
                return Ok(waiting_for_clusters(out));
            };
            clusters = more;
            fleet::heard_from(&mut clusters, &observed.answered, &mut out.warnings);
            (evicted, kept, used_elsewhere) = schedule_input(&clusters, &pins);
        }
    }
    for (replica, cluster) in &evicted {
        out.warnings.push(format!(
            "replica {replica} is over-committed on InferenceCluster {cluster:?}: an earlier placement holds \
             its nodes; placing it again"
        ));
    }
    let outcomes = schedule::schedule(&input(&md.spec, &clusters, &kept, &used_elsewhere, now, &me))?;
    let gate = cache::CacheGate::read(req, &md.spec, namespace);
    let replicas = Replicas {
        req,
        name,
        namespace,
        spec: &md.spec,
        clusters: &clusters,
        observed: &observed,
        evicted: &evicted,
        cache: gate.cache_use(namespace),
        gate: &gate,
        services: services::Services::read(req),
        now,
    };
    let mut status = replicas.compose(&mut out, &outcomes)?;
    status.selector = selector(name);
    if let Some(scaling) = &md.spec.autoscaling {
        let scaled = autoscaling::compose(&mut out, req, name, namespace, scaling);
        // Only KEDA starts a replica on demand: without it the standby would promise what nothing does.
        if scaled && scaling.min_replicas == 0 {
            endpoint::standby(&mut out, name, namespace, &md.spec);
        }
    }
    serving::report(
        &mut out,
        &mut status,
        md.spec.slo.as_ref(),
        metrics(namespace, name),
    );
    scheduled_condition(&mut out, &status, md.spec.replicas);
    let changes_at = availability::condition(&mut out, &status, &clusters, now);
    cache_condition(&mut out, &md.spec, &gate, &status);
    pods::condition(&mut out, req, &md.spec, &status);
    if waits(&status, &clusters, &me) || !evicted.is_empty() {
        out.ttl = Some(WAITING_TTL);
    }
    // Called again when a cluster's grace period runs out, not a poll later.
    if let Some(at) = changes_at {
        out.compose_again_by(at, now);
    }
    out.set_status(&status)?;
    Ok(out)
}

/// The one status field written before anything is known: the rest of the status stays as the last call left it.
#[derive(serde::Serialize)]
struct ScaleSelector {
    selector: String,
}

/// The scale subresource's label selector: the label of the deployment's ModelEndpoints.
fn selector(name: &str) -> String {
    format!("{}={name}", endpoint::DEPLOYMENT_LABEL)
}

fn input<'a>(
    spec: &'a ModelDeploymentSpec,
    clusters: &'a [ClusterView],
    pins: &'a BTreeMap<u32, schedule::Pin>,
    used_elsewhere: &'a BTreeMap<(String, String), u64>,
    now: jiff::Timestamp,
    me: &'a str,
) -> Input<'a> {
    Input {
        spec: &spec.template.spec,
        replicas: spec.replicas,
        clusters,
        pins,
        used_elsewhere,
        now,
        spread_key: me,
    }
}

fn waiting_for_clusters(mut out: Output) -> Output {
    out.condition(
        ConditionType::Scheduled,
        Status::ConditionUnknown,
        Reason::WaitingForClusters,
        "",
    );
    out.ready = Some(false);
    out
}

/// Whether some replica waits: unplaced, waiting for its cache, or placed where its cluster's ledger has not
/// admitted it yet. Then Crossplane is asked to compose again soon.
fn waits(status: &ModelDeploymentStatus, clusters: &[ClusterView], me: &str) -> bool {
    status.replicas.iter().any(|r| {
        let admitted = r.cluster.as_deref().is_some_and(|name| {
            clusters
                .iter()
                .any(|c| c.metadata.name == name && fleet::admitted(c, me, r.replica))
        });
        r.waiting_for.is_some() || !admitted
    })
}

/// What composing every replica of one deployment reads.
struct Replicas<'a> {
    req: &'a RunFunctionRequest,
    name: &'a str,
    namespace: &'a str,
    spec: &'a ModelDeploymentSpec,
    clusters: &'a [ClusterView],
    observed: &'a observed::ObservedReplicas,
    /// Pinned replicas their cluster's ledger did not admit, with that cluster: not kept there.
    evicted: &'a BTreeMap<u32, String>,
    gate: &'a cache::CacheGate,
    cache: Option<CacheUse<'a>>,
    /// The namespace's ModelServices, while a replica moves and once Crossplane fetched them.
    services: Option<services::Services>,
    /// The time clusters' grace periods are measured against.
    now: jiff::Timestamp,
}

impl Replicas<'_> {
    /// Composes each replica where the scheduler put it, keeping a moving replica's old placement running,
    /// and reports them all. Stops when the call's deadline passes.
    fn compose(&self, out: &mut Output, outcomes: &[Outcome]) -> Result<ModelDeploymentStatus, ComposeError> {
        let mut status = ModelDeploymentStatus::default();
        for (index, outcome) in (0u32..).zip(outcomes) {
            crate::limits::check_deadline()?;
            let mut replica = match outcome {
                Outcome::Placed(placement) => self.compose_placed(out, index, placement),
                Outcome::Unplaced(unplaced) => unplaced_status(index, unplaced),
            };
            // A replica on a cluster Modelplane cannot reach serves nobody through the fleet, whatever its
            // Objects last said: its endpoint goes at once, and it counts as not ready.
            if !self.routes(replica.cluster.as_deref()) {
                replica.ready = replica.ready.map(|_| false);
            }
            let serving = replica.ready == Some(true);
            // Make before break reaches the callers too: a moving replica's old placement, and its endpoint,
            // stay until the new placement's endpoint is Ready, not merely its engines.
            let routed = match replica.cluster.as_deref() {
                Some(cluster) if serving => self.compose_endpoint(out, index, cluster),
                _ => Routed::NoEndpoint,
            };
            let current = replica.cluster.as_deref();
            let moving = self
                .observed
                .replicas
                .get(&index)
                .is_some_and(|placements| placements.keys().any(|c| Some(c.as_str()) != current));
            let handed_over = match (routed, current) {
                (Routed::Ready, Some(cluster)) if moving => self.routed_by_services(index, cluster),
                (Routed::Pending, _) => false,
                _ => true,
            };
            if !serving || !handed_over {
                replica.moving_from = self.retain_previous(out, index, current, Keep::Serving);
            } else if moving {
                replica.moving_from = self.retain_previous(out, index, current, Keep::WhileRouted);
            }
            if let Some(placement) = replica
                .cluster
                .as_deref()
                .and_then(|c| self.observed.placement(index, c))
            {
                observed::hand_over(out, self.req, placement, serving, object_ready);
            }
            status.placed_replicas += u32::from(replica.cluster.is_some());
            status.ready_replicas += u32::from(serving);
            status.replicas.push(replica);
        }
        Ok(status)
    }

    /// Composes one placed replica's Objects (only its namespace while its cache is not staged there), and
    /// says where it runs and whether it serves.
    fn compose_placed(&self, out: &mut Output, index: u32, placement: &Placement) -> ReplicaStatus {
        let cluster = &placement.cluster.metadata.name;
        let routing = replica::routing_key_prefix(index, cluster);
        let ctx = replica::ReplicaContext {
            xr_name: self.name,
            xr_namespace: self.namespace,
            replica: index,
            spec: self.spec,
            cache: self.cache.as_ref(),
            routed: self
                .observed
                .placement(index, cluster)
                .is_some_and(|p| p.keys.iter().any(|k| k.starts_with(&routing))),
        };
        // Engine Objects observed there, under any key shape: a replica that runs is not stopped by the gate.
        let started = self
            .observed
            .placement(index, cluster)
            .is_some_and(|p| !p.pools.is_empty());
        let blocked = self.gate.blocks(cluster).filter(|_| !started);
        let objects = match &blocked {
            None => replica::objects(&ctx, placement),
            Some(_) => vec![replica::namespace(&ctx, placement)],
        };
        let mut ready = blocked.is_none();
        for desired in objects {
            let observed_ready = object_ready(request::observed_composed(self.req, &desired.key));
            let counts = observed_ready || !desired.gates_ready;
            ready &= counts;
            out.compose(desired.key, desired.object, counts);
        }
        ReplicaStatus {
            replica: index,
            cluster: Some(cluster.clone()),
            stack: Some(placement.cluster.status.stack),
            engines: engine_status(self.spec, placement),
            ready: Some(ready),
            waiting_for: blocked,
            waiting_for_scale_up: placement
                .engines
                .iter()
                .filter(|e| e.waits_for_scale_up)
                .map(|e| e.pool.name.clone())
                .collect(),
            components_not_ready: placement
                .cluster
                .components_not_ready()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            ..ReplicaStatus::default()
        }
    }

    /// Keeps a replica's other placements running while it does not serve callers where it is now (make
    /// before break), unless their cluster is gone: with `Keep::Serving` with the endpoint of each that still
    /// serves, with `Keep::WhileRouted` only those some ModelService still routes, without their endpoints.
    /// Returns the placement kept, for status.
    fn retain_previous(
        &self,
        out: &mut Output,
        index: u32,
        current: Option<&str>,
        keep: Keep,
    ) -> Option<PreviousPlacement> {
        let mut kept = None;
        for (cluster, placement) in self.observed.replicas.get(&index)? {
            let view = self.clusters.iter().find(|c| &c.metadata.name == cluster);
            let overcommitted = self.evicted.get(&index) == Some(cluster);
            let Some(view) = view.filter(|_| Some(cluster.as_str()) != current && !overcommitted) else {
                continue;
            };
            if keep == Keep::WhileRouted && !self.still_routed(index, view) {
                continue;
            }
            let mut serves = !placement.pools.is_empty();
            for key in &placement.keys {
                let resource = request::observed_composed(self.req, key);
                // A pod report is only read, and exists only once the cluster's reporter writes it.
                serves &= object_ready(resource) || resource.is_some_and(observed::only_reads);
                if let Some(object) = resource.and_then(observed::retained) {
                    out.compose(key.clone(), object, object_ready(resource));
                }
            }
            if serves && keep == Keep::Serving && view.availability(self.now).routes() {
                self.compose_endpoint(out, index, cluster);
            }
            kept.get_or_insert_with(|| PreviousPlacement {
                cluster: cluster.clone(),
                engines: previous_engines(self.spec, placement),
            });
        }
        kept
    }
}

impl Replicas<'_> {
    /// Whether callers may be sent to a replica on `cluster` (one not read counts as routed: it is going).
    fn routes(&self, cluster: Option<&str>) -> bool {
        let view = cluster.and_then(|name| self.clusters.iter().find(|c| c.metadata.name == name));
        view.is_none_or(|c| c.availability(self.now).routes())
    }
}

fn scheduled_condition(out: &mut Output, status: &ModelDeploymentStatus, wanted: u32) {
    match status.replicas.iter().find_map(|r| r.reason) {
        None => out.condition(
            ConditionType::Scheduled,
            Status::ConditionTrue,
            Reason::AllReplicasPlaced,
            "",
        ),
        Some(reason) => {
            let message = format!(
                "{} of {wanted} replicas placed; see status.replicas",
                status.placed_replicas
            );
            out.condition(
                ConditionType::Scheduled,
                Status::ConditionFalse,
                reason.into(),
                message,
            );
            out.ready = Some(false);
        }
    }
}

/// Reported only for placed replicas: with none placed there is nothing to wait for yet.
fn cache_condition(
    out: &mut Output,
    spec: &ModelDeploymentSpec,
    gate: &cache::CacheGate,
    status: &ModelDeploymentStatus,
) {
    let Some(cache) = spec.cache_name() else {
        return;
    };
    if status.placed_replicas == 0 {
        return;
    }
    let waiting: Vec<&str> = status
        .replicas
        .iter()
        .filter_map(|r| r.waiting_for.as_deref())
        .collect();
    match waiting.first() {
        None => out.condition(
            ConditionType::CacheReady,
            Status::ConditionTrue,
            Reason::CacheStaged,
            "",
        ),
        Some(why) => {
            let reason = if matches!(gate, cache::CacheGate::Missing { .. }) {
                Reason::CacheNotFound
            } else {
                Reason::CacheNotReady
            };
            let message = format!(
                "{} replica(s) wait for ModelCache {cache:?}: {why}",
                waiting.len()
            );
            out.condition(ConditionType::CacheReady, Status::ConditionFalse, reason, message);
            out.ready = Some(false);
        }
    }
}

/// The clusters it runs on, the candidates while something waits (see [`fleet::requirements`]), and its cache.
fn requirements(
    spec: &ModelDeploymentSpec,
    namespace: &str,
    placed_on: &BTreeSet<String>,
    candidates: bool,
    moving: bool,
) -> BTreeMap<String, ResourceSelector> {
    let mut requirements = fleet::requirements(spec, placed_on, candidates);
    if moving {
        requirements.insert(services::SERVICES.to_owned(), services::requirement(namespace));
    }
    if spec.autoscaling.is_some() {
        // Asked for from the first call, with the clusters, so it adds no call of its own.
        requirements.insert(autoscaling::REQUIREMENT.to_owned(), autoscaling::requirement());
    }
    if let Some(cache) = &spec.template.spec.model_cache_ref {
        requirements.insert(
            CACHE.to_owned(),
            ResourceSelector {
                api_version: API_VERSION.into(),
                kind: "ModelCache".into(),
                r#match: Some(Match::MatchName(cache.name.clone())),
                namespace: Some(namespace.to_owned()),
            },
        );
    }
    requirements
}

/// An Object is ready when provider-kubernetes says so; its readiness policy decides what that means.
fn object_ready(observed: Option<&Resource>) -> bool {
    remote::observed::<IgnoredAny>(observed).is_some_and(|o| o.is_ready())
}

#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod evacuation_tests;
#[cfg(test)]
mod pd_tests;
#[cfg(test)]
mod pods_tests;
#[cfg(test)]
mod routing_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upgrade_tests;
