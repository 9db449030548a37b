//! The fleet scheduler: which cluster, and which pool for each engine, every replica of a ModelDeployment
//! runs on.
//!
//! A replica goes to one cluster that is usable, picked by the deployment's cluster selector and whose
//! taints it tolerates. Each engine of the replica goes to one pool of that cluster whose devices satisfy every
//! member's device requests (DRA CEL, see [`devices`]) and that has nodes free for all of its pods: every pod of
//! every copy takes a node, counting what other replicas and other deployments already hold (the latter from
//! each cluster's placement ledger, docs/scheduling.md). Nothing is overcommitted by one deployment; two placing
//! at the same moment are resolved by the ledger within a reconcile or two. Replicas already running stay where they are unless their cluster is gone, has a NoExecute
//! taint they do not tolerate, no longer has a pool that fits, is cordoned, or has been unreachable for longer
//! than its grace period (see [`crate::api::availability`]); a cluster that is unreachable, cordoned or just
//! back from an outage takes no new replica.
//!
//! Ties are broken deterministically: a new replica goes where this deployment has the fewest replicas (spread
//! for availability), then to the cluster ranked first for this deployment by a hash of the deployment's key and
//! the cluster's name (rendezvous hashing): every deployment prefers its own order of the fleet, so a burst of
//! deployments applied at once, which all read the same ledgers, spreads over equal clusters instead of piling
//! onto the one whose name sorts first. An engine goes to the fitting pool that leaves the fewest nodes free
//! (keeping big pools whole for big engines), then by pool name.

use std::{
    collections::{BTreeMap, HashMap},
    rc::Rc,
};

use crate::{
    api::{
        inference_cluster::{PoolStatus, TaintEffect},
        model_deployment::{Engine, ReplicaSpec, Role, UnplacedReason},
    },
    error::ComposeError,
    limits::{MAX_REPLICAS, MAX_RESPONSE_BYTES},
    stack::{components, serving_stack},
};

pub mod cluster;
pub mod devices;

pub use cluster::ClusterView;
pub use devices::Binding;

/// Where an existing replica runs, read back from its composed resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub cluster: String,
    /// Pool per engine name.
    pub pools: BTreeMap<String, String>,
}

pub struct Input<'a> {
    pub spec: &'a ReplicaSpec,
    pub replicas: u32,
    pub clusters: &'a [ClusterView],
    /// Existing placements by replica index.
    pub pins: &'a BTreeMap<u32, Pin>,
    /// Nodes that other ModelDeployments hold, by (cluster, pool).
    pub used_elsewhere: &'a BTreeMap<(String, String), u64>,
    /// The time clusters' grace periods are measured against ([`ClusterView::availability`]).
    pub now: jiff::Timestamp,
    /// Names the deployment (`namespace/name`): it orders equally good clusters ([`rank`]).
    pub spread_key: &'a str,
}

/// Where cluster `cluster` ranks for the deployment `spread_key` among equally good clusters: lower first. A
/// SHA-256 prefix, so the order is the same in every release and on every machine, and one deployment's order
/// says nothing about another's.
pub fn rank(spread_key: &str, cluster: &str) -> u64 {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(spread_key.as_bytes());
    // A separator no Kubernetes name holds, so ("a", "bc") and ("ab", "c") rank apart.
    ctx.update(b"\0");
    ctx.update(cluster.as_bytes());
    let digest = ctx.finish();
    let mut prefix = [0u8; 8];
    prefix.copy_from_slice(&digest.as_ref()[..8]);
    u64::from_be_bytes(prefix)
}

#[derive(Debug)]
pub enum Outcome<'a> {
    Placed(Placement<'a>),
    Unplaced(Rc<Unplaced>),
}

#[derive(Debug)]
pub struct Placement<'a> {
    pub cluster: &'a ClusterView,
    /// One per engine, in spec order.
    pub engines: Vec<EnginePlacement<'a>>,
    /// Kept from an earlier placement rather than chosen now.
    pub pinned: bool,
}

#[derive(Debug)]
pub struct EnginePlacement<'a> {
    pub pool: &'a PoolStatus,
    pub binding: Rc<Binding>,
    /// The pool's running nodes are taken: this engine waits for the autoscaler to add nodes, up to the pool's
    /// `maxNodeCount`.
    pub waits_for_scale_up: bool,
}

#[derive(Debug)]
pub struct Unplaced {
    pub reason: UnplacedReason,
    /// Why each cluster, or each pool of an otherwise eligible cluster, was passed over.
    pub rejections: Vec<Rejection>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub cluster: String,
    pub pool: Option<String>,
    pub reason: String,
}

/// Nodes one engine takes in its pool: every pod of every copy takes a node. Saturates rather than wraps, so an
/// absurd engine needs more nodes than any pool has.
pub fn engine_nodes(engine: &Engine) -> u64 {
    let pods = engine
        .members
        .iter()
        .fold(0u64, |sum, m| sum.saturating_add(u64::from(m.pods())));
    u64::from(engine.copies).saturating_mul(pods)
}

/// Places `input.replicas` replicas. Fails when a selector does not compile or fails at run time, or when the
/// call's deadline passes.
pub fn schedule<'a>(input: &Input<'a>) -> Result<Vec<Outcome<'a>>, ComposeError> {
    check_output_bound(input)?;
    let mut state = State::new(input)?;
    let mut outcomes: Vec<Option<Outcome<'a>>> = (0..input.replicas).map(|_| None).collect();
    // Pinned replicas first, so new ones never take the nodes running replicas hold.
    for (replica, slot) in outcomes.iter_mut().enumerate() {
        state.check()?;
        let pin = u32::try_from(replica).ok().and_then(|r| input.pins.get(&r));
        if let Some(placement) = pin.and_then(|pin| state.keep(pin)) {
            *slot = Some(Outcome::Placed(placement));
        }
    }
    // Replicas are identical, so once one does not fit, none after it does: explain once and share it.
    let mut failed: Option<Rc<Unplaced>> = None;
    for slot in outcomes.iter_mut().filter(|slot| slot.is_none()) {
        if let Some(unplaced) = &failed {
            *slot = Some(Outcome::Unplaced(unplaced.clone()));
            continue;
        }
        state.check()?;
        *slot = Some(match state.place() {
            Some(placement) => Outcome::Placed(placement),
            None => Outcome::Unplaced(failed.insert(Rc::new(state.explain())).clone()),
        });
    }
    state.check()?;
    Ok(outcomes.into_iter().flatten().collect())
}

/// Pool index and device binding per engine, in spec order.
type EnginePools = Vec<(usize, Rc<Binding>)>;

struct State<'i, 'a> {
    input: &'i Input<'a>,
    matcher: devices::Matcher<'a>,
    /// Cluster indices in this deployment's order ([`rank`]).
    order: Vec<usize>,
    /// Why a cluster takes nothing, per cluster index.
    ineligible: Vec<Option<String>>,
    /// Free nodes per (cluster, pool) index, counting nodes the autoscaler may add; negative when pinned
    /// replicas exceed a shrunken pool.
    free: Vec<Vec<i64>>,
    /// Nodes the autoscaler may still add per (cluster, pool) index: free nodes beyond these run now.
    growth: Vec<Vec<i64>>,
    /// This deployment's replicas per cluster index.
    replicas_on: Vec<u32>,
    /// Nodes each engine needs in its pool: pods per copy × copies.
    needs: Vec<i64>,
}

impl<'i, 'a> State<'i, 'a> {
    fn new(input: &'i Input<'a>) -> Result<Self, ComposeError> {
        let matcher = devices::Matcher::new(devices::compile(input.spec)?);
        let clusters = input.clusters;
        let mut order: Vec<usize> = (0..clusters.len()).collect();
        order.sort_by_cached_key(|&c| {
            let name = clusters[c].metadata.name.as_str();
            (rank(input.spread_key, name), name)
        });
        let ineligible = clusters
            .iter()
            .map(|c| ineligible(input.spec, c, input.now))
            .collect();
        let free = clusters
            .iter()
            .map(|c| {
                c.status
                    .pools
                    .iter()
                    .map(|p| {
                        let key = (c.metadata.name.clone(), p.name.clone());
                        let used = input.used_elsewhere.get(&key).copied().unwrap_or(0);
                        i64::from(p.capacity()).saturating_sub(i64::try_from(used).unwrap_or(i64::MAX))
                    })
                    .collect()
            })
            .collect();
        let growth = clusters
            .iter()
            .map(|c| {
                c.status
                    .pools
                    .iter()
                    .map(|p| i64::from(p.capacity()) - i64::from(p.node_count))
                    .collect()
            })
            .collect();
        let needs = input
            .spec
            .engines
            .iter()
            .map(|e| i64::try_from(engine_nodes(e)).unwrap_or(i64::MAX))
            .collect();
        Ok(Self {
            input,
            matcher,
            order,
            ineligible,
            free,
            growth,
            replicas_on: vec![0; clusters.len()],
            needs,
        })
    }

    /// Fails once a selector failed at run time or the call's deadline passed.
    fn check(&self) -> Result<(), ComposeError> {
        match self.matcher.failure() {
            Some(e) => Err(e.clone()),
            None => crate::limits::check_deadline(),
        }
    }

    /// Keeps a running replica where it is, if it still may stay there.
    fn keep(&mut self, pin: &Pin) -> Option<Placement<'a>> {
        let clusters = self.input.clusters;
        let c = clusters.iter().position(|c| c.metadata.name == pin.cluster)?;
        let cluster = &clusters[c];
        let untolerated = cluster
            .untolerated_taint(&self.input.spec.tolerations, &[TaintEffect::NoExecute])
            .is_some();
        if untolerated || !cluster.availability(self.input.now).keeps_replicas() {
            return None;
        }
        let mut engines = Vec::new();
        let mut pools = Vec::new();
        for (e, engine) in self.input.spec.engines.iter().enumerate() {
            let name = pin.pools.get(&engine.name)?;
            let p = cluster.status.pools.iter().position(|p| &p.name == name)?;
            let binding = self.matcher.fit(&cluster.status.pools[p], e, engine).ok()?;
            engines.push(EnginePlacement {
                pool: &cluster.status.pools[p],
                binding,
                waits_for_scale_up: false,
            });
            pools.push(p);
        }
        for ((e, p), placed) in pools.into_iter().enumerate().zip(&mut engines) {
            placed.waits_for_scale_up = self.take(c, p, e);
        }
        self.replicas_on[c] += 1;
        Some(Placement {
            cluster,
            engines,
            pinned: true,
        })
    }

    /// Places one new replica, or returns None when nothing fits.
    fn place(&mut self) -> Option<Placement<'a>> {
        // (this deployment's replicas there, cluster index, pool and binding per engine)
        let mut best: Option<(u32, usize, EnginePools)> = None;
        for i in 0..self.order.len() {
            let c = self.order[i];
            if self.ineligible[c].is_some() || best.as_ref().is_some_and(|b| b.0 <= self.replicas_on[c]) {
                continue;
            }
            if let Some(pools) = self.fit_cluster(c) {
                best = Some((self.replicas_on[c], c, pools));
            }
        }
        let (_, c, pools) = best?;
        let cluster = &self.input.clusters[c];
        let mut engines = Vec::with_capacity(pools.len());
        for (e, (p, binding)) in pools.into_iter().enumerate() {
            let waits_for_scale_up = self.take(c, p, e);
            engines.push(EnginePlacement {
                pool: &cluster.status.pools[p],
                binding,
                waits_for_scale_up,
            });
        }
        self.replicas_on[c] += 1;
        Some(Placement {
            cluster,
            engines,
            pinned: false,
        })
    }

    /// Takes engine `e`'s nodes from pool `p` of cluster `c`; true when some of them are not running yet.
    fn take(&mut self, c: usize, p: usize, e: usize) -> bool {
        self.free[c][p] = self.free[c][p].saturating_sub(self.needs[e]);
        self.free[c][p] < self.growth[c][p]
    }

    /// A pool per engine in cluster `c`, best fit first, or None.
    fn fit_cluster(&mut self, c: usize) -> Option<EnginePools> {
        let cluster = &self.input.clusters[c];
        let mut free = self.free[c].clone();
        let mut chosen = Vec::with_capacity(self.input.spec.engines.len());
        for (e, engine) in self.input.spec.engines.iter().enumerate() {
            let mut best: Option<(i64, &str, usize, Rc<Binding>)> = None;
            for (p, pool) in cluster.status.pools.iter().enumerate() {
                let left = free[p].saturating_sub(self.needs[e]);
                let better = best
                    .as_ref()
                    .is_none_or(|b| (left, pool.name.as_str()) < (b.0, b.1));
                if left < 0 || !better {
                    continue;
                }
                if let Ok(binding) = self.matcher.fit(pool, e, engine) {
                    best = Some((left, pool.name.as_str(), p, binding));
                }
            }
            let (_, _, p, binding) = best?;
            free[p] = free[p].saturating_sub(self.needs[e]);
            chosen.push((p, binding));
        }
        Some(chosen)
    }

    /// Why no cluster takes another replica now: every ineligible cluster, and every pool of an eligible one
    /// with each engine it cannot take.
    fn explain(&mut self) -> Unplaced {
        let mut rejections = Vec::new();
        let mut short_of_nodes = false;
        // Pools of one device list fail the same engines for the same reasons: say it once per list.
        let mut device_reasons: HashMap<usize, (Option<String>, Vec<bool>)> = HashMap::new();
        if self.order.is_empty() {
            rejections.push(Rejection {
                cluster: String::new(),
                pool: None,
                reason: "no InferenceClusters exist".into(),
            });
        }
        // Said in name order, the order a reader looks clusters up in.
        let mut by_name = self.order.clone();
        by_name.sort_by_key(|&c| self.input.clusters[c].metadata.name.as_str());
        for c in by_name {
            let cluster = &self.input.clusters[c];
            if let Some(reason) = &self.ineligible[c] {
                rejections.push(Rejection {
                    cluster: cluster.metadata.name.clone(),
                    pool: None,
                    reason: reason.clone(),
                });
                continue;
            }
            if cluster.status.pools.is_empty() {
                rejections.push(Rejection {
                    cluster: cluster.metadata.name.clone(),
                    pool: None,
                    reason: "cluster reports no schedulable pools".into(),
                });
            }
            for (p, pool) in cluster.status.pools.iter().enumerate() {
                let set = self.matcher.set_of(pool);
                if let std::collections::hash_map::Entry::Vacant(entry) = device_reasons.entry(set) {
                    entry.insert(self.device_reasons(pool));
                }
                let (devices_why, fits) = &device_reasons[&set];
                let mut why: Vec<String> = devices_why.iter().cloned().collect();
                for (e, engine) in self.input.spec.engines.iter().enumerate() {
                    if fits[e] && self.free[c][p] < self.needs[e] {
                        short_of_nodes = true;
                        why.push(format!(
                            "engine {:?}: needs {} nodes, {} free",
                            engine.name,
                            self.needs[e],
                            self.free[c][p].max(0)
                        ));
                    }
                }
                if !why.is_empty() {
                    rejections.push(Rejection {
                        cluster: cluster.metadata.name.clone(),
                        pool: Some(pool.name.clone()),
                        reason: why.join("; "),
                    });
                }
            }
        }
        let reason = if short_of_nodes {
            UnplacedReason::InsufficientCapacity
        } else {
            UnplacedReason::NoMatchingCluster
        };
        Unplaced { reason, rejections }
    }
}

impl<'a> State<'_, 'a> {
    /// Which engines fit `pool`'s devices, and why the others do not.
    fn device_reasons(&mut self, pool: &'a PoolStatus) -> (Option<String>, Vec<bool>) {
        let mut why = Vec::new();
        let mut fits = Vec::with_capacity(self.input.spec.engines.len());
        for (e, engine) in self.input.spec.engines.iter().enumerate() {
            match self.matcher.fit(pool, e, engine) {
                Ok(_) => fits.push(true),
                Err(reason) => {
                    fits.push(false);
                    why.push(format!("engine {:?}: {reason}", engine.name));
                }
            }
        }
        ((!why.is_empty()).then(|| why.join("; ")), fits)
    }
}

/// Refuses, before anything is placed or built, a deployment whose replicas could never fit in one response:
/// every placed replica carries each member's containers as the user wrote them, so `replicas` times their size
/// is a floor on the response. The replica count is also capped here, whatever the schema said, because the
/// scheduler's memory is linear in it.
fn check_output_bound(input: &Input) -> Result<(), ComposeError> {
    if input.replicas > MAX_REPLICAS {
        return Err(ComposeError::new(
            "spec.replicas",
            format!("{} replicas; at most {MAX_REPLICAS} are allowed", input.replicas),
        ));
    }
    let per_replica = input
        .spec
        .engines
        .iter()
        .flat_map(|e| &e.members)
        .map(|m| {
            let containers = m.template.spec.containers.iter().map(json_len).sum::<usize>();
            containers
                + m.template
                    .spec
                    .image_pull_secrets
                    .iter()
                    .map(json_len)
                    .sum::<usize>()
        })
        .fold(0usize, usize::saturating_add);
    let floor = per_replica.saturating_mul(input.replicas as usize);
    if floor > MAX_RESPONSE_BYTES {
        return Err(ComposeError::new(
            "spec.replicas",
            format!(
                "{} replicas of this template compose at least {floor} bytes (their containers alone), over the \
                 {MAX_RESPONSE_BYTES} bytes a function response may carry; use fewer replicas per ModelDeployment",
                input.replicas
            ),
        ));
    }
    Ok(())
}

/// The length of `value` written as JSON, counted as it is written: nothing is kept.
fn json_len<T: serde::Serialize>(value: &T) -> usize {
    let mut counted = Counted(0);
    serde_json::to_writer(&mut counted, value).map_or(0, |()| counted.0)
}

/// A writer that only counts what it is given.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The components a replica of `spec` cannot run without on `cluster`: the DRA driver (and the node labels it
/// is scheduled by) when it claims devices, and its stack's gang scheduler when it runs a gang.
pub fn needed_components(spec: &ReplicaSpec, cluster: &ClusterView) -> Vec<&'static str> {
    let mut needed = Vec::new();
    let members = || spec.engines.iter().flat_map(|e| &e.members);
    if members().any(|m| !m.device_requests().is_empty()) {
        needed.extend(components::DRA_COMPONENTS);
    }
    if members().any(|m| m.role == Role::Leader) {
        needed.extend(serving_stack(cluster.status.stack).gang_components());
    }
    needed
}

/// Why a cluster can take no new replica of this deployment, before looking at its pools.
fn ineligible(spec: &ReplicaSpec, cluster: &ClusterView, now: jiff::Timestamp) -> Option<String> {
    let availability = cluster.availability(now);
    if !availability.takes_new() {
        return availability.describe();
    }
    if let Some(why) = cluster.not_usable(&needed_components(spec, cluster)) {
        return Some(why);
    }
    if let Some(selector) = &spec.cluster_selector
        && !selector.matches(&cluster.metadata.labels)
    {
        return Some("cluster labels do not match clusterSelector".into());
    }
    let effects = [TaintEffect::NoSchedule, TaintEffect::NoExecute];
    cluster
        .untolerated_taint(&spec.tolerations, &effects)
        .map(|t| format!("untolerated taint {}={}:{:?}", t.key, t.value, t.effect))
}

#[cfg(test)]
mod tests;
