//! The fleet benchmark's phases, in the order one run goes through them. Each prints what it measured (times
//! at real speed, the compressed ones beside them) and returns its row's cells (docs/benchmarks.md).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use kube::api::{Patch, PatchParams, PostParams};
use modelplane_eks_api::{ConditionStatus, Scaling};
use serde_json::json;

use super::support::fleet::provider_config;
use super::support::objects::{cluster_in, condition, pool_in};
use super::support::peak_rss_mib;
use super::support::world::NS;
use super::{Bench, cluster_name, load_average, pool_name};

/// Part of the name of every managed resource the permanent-error phase makes; the fleet's counts skip them.
pub const REJECTED: &str = "rejected";
/// A Kubernetes version EKS no longer offers: CreateCluster answers InvalidParameterException, for good.
const UNSUPPORTED_VERSION: &str = "1.29";

fn limit() -> Duration {
    let secs = std::env::var("BENCH_TIMEOUT_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3600);
    Duration::from_secs(secs)
}

/// What the provider's reconciles failed with, and how often Synced flapped, from a point on.
struct Marks {
    calls: u64,
    throttled: u64,
    errors: BTreeMap<String, u64>,
    flaps: u64,
}

impl Marks {
    fn now(b: &Bench) -> Self {
        Self {
            calls: b.fleet.aws.total_calls(),
            throttled: b.fleet.aws.throttled(),
            errors: b.fleet.reconcile_errors(),
            flaps: b.status.flaps().0,
        }
    }

    /// Calls, throttling answers, Deferred reconciles and flaps since `self` (the process's own error counters
    /// when it was restarted in between).
    fn since(&self, b: &Bench, same_process: bool) -> (u64, u64, u64, u64) {
        let now = Self::now(b);
        let deferred = |m: &BTreeMap<String, u64>| m.get("deferred").copied().unwrap_or(0);
        let deferred_before = if same_process { deferred(&self.errors) } else { 0 };
        (
            now.calls - self.calls,
            now.throttled - self.throttled,
            deferred(&now.errors).saturating_sub(deferred_before),
            now.flaps - self.flaps,
        )
    }
}

fn progress(b: &Bench, phase: &str, started: Instant, detail: &str) {
    eprintln!(
        "  [{phase} {:.0} s] {} of {} Ready, {} AWS calls, {} throttled, errors {:?}, flaps {}, load {}{detail}",
        started.elapsed().as_secs_f64(),
        b.ready(),
        b.mrs(),
        b.fleet.aws.total_calls(),
        b.fleet.aws.throttled(),
        b.fleet.reconcile_errors(),
        b.status.flaps().0,
        load_average()
    );
}

/// Activation -> every managed resource Ready and Synced.
pub async fn converge(b: &Bench, started: Instant) -> String {
    let mut last = Instant::now();
    while b.ready() < b.mrs() {
        if last.elapsed() > Duration::from_secs(30) {
            progress(b, "converge", started, "");
            last = Instant::now();
        }
        assert!(
            started.elapsed() < limit(),
            "the fleet did not converge; provider log tail:\n{}",
            b.fleet.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let took = started.elapsed();
    let errors = b.fleet.reconcile_errors();
    let (flaps, flapped) = b.status.flaps();
    let (calls, throttled) = (b.fleet.aws.total_calls(), b.fleet.aws.throttled());
    let deferred = errors.get("deferred").copied().unwrap_or(0);
    println!(
        "  converge (activation -> all Ready and Synced): {:.0} s at real speed ({:.1} s compressed), {calls} AWS \
         calls, {throttled} throttled, {deferred} Deferred; reconcile errors {errors:?}; Synced flaps {flaps} \
         {flapped:?}",
        b.s.real(took),
        took.as_secs_f64()
    );
    format!(
        "{:.0} s | {calls} | {throttled} | {deferred} | {flaps}",
        b.s.real(took)
    )
}

/// Waits until `op` has named `target` at the stand-in; the time it took, or None past `within`.
async fn first_call(b: &Bench, op: &str, target: &str, within: Duration) -> Option<Duration> {
    let since = Instant::now();
    while b.fleet.aws.calls_for(op, target) == 0 {
        if since.elapsed() > within {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Some(since.elapsed())
}

/// Calm: every resource's polls stretched to the bound; then a spec change and drift made in AWS behind the
/// provider's back, each timed until the provider's UpdateNodegroupConfig reaches the stand-in.
pub async fn calm(b: &Bench) -> String {
    let bound = b.calm_bound();
    // Poll doubling (6, 12, 24, 48 s compressed) reaches the bound well within two of them.
    tokio::time::sleep(Duration::from_secs_f64(2.0 * bound)).await;
    let marks = Marks::now(b);
    let describes = b.fleet.aws.describes();
    let window = 2.0 * bound;
    tokio::time::sleep(Duration::from_secs_f64(window)).await;
    let (calls, throttled, deferred, flaps) = marks.since(b, true);
    let described = b.fleet.aws.describes() - describes;
    let real_window = window * b.s.compress;
    let per_mr_hour = calls as f64 * 3600.0 / real_window / b.mrs() as f64;
    let per_minute = calls as f64 * 60.0 / real_window;
    println!(
        "  calm steady state: {calls} AWS calls ({described} describes) in {window:.0} s compressed = \
         {per_mr_hour:.2} per MR per hour, {per_minute:.0} per minute for the fleet, at real speed; {throttled} \
         throttled, {deferred} Deferred, {flaps} Synced flaps (calm bound here {:.0} s at real speed)",
        bound * b.s.compress
    );

    let (changed, drifted) = (pool_name(0, 0), pool_name(0, 1));
    let patch = Patch::Merge(json!({ "spec": { "forProvider": { "scaling": { "maxSize": 5 } } } }));
    b.fleet
        .pools()
        .patch(&changed, &PatchParams::default(), &patch)
        .await
        .unwrap();
    b.fleet.aws.drop_labels(&cluster_name(0), &drifted);
    let within = Duration::from_secs_f64(3.0 * bound + 30.0);
    let update = "UpdateNodegroupConfig";
    let spec = first_call(b, update, &format!("{}/{changed}", cluster_name(0)), within).await;
    let drift = first_call(b, update, &format!("{}/{drifted}", cluster_name(0)), within).await;
    let at_real = |d: Option<Duration>| match d {
        Some(d) => format!("{:.0} s", b.s.real(d)),
        None => format!("not within {:.0} s", b.s.real(within)),
    };
    let (spec, drift) = (at_real(spec), at_real(drift));
    println!(
        "  a spec change reached AWS after {spec}; drift made in AWS was corrected after {drift} (real speed)"
    );
    format!(
        "{per_mr_hour:.2} ({per_minute:.0}/min), {throttled} throttled, {deferred} Deferred, {flaps} flaps | {spec} / {drift}"
    )
}

/// The results of the restart phase, and the first process's peak RSS (read just before it was killed).
pub struct Restart {
    pub cells: String,
    pub first_rss: f64,
}

impl std::fmt::Display for Restart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.cells)
    }
}

/// Restart: how long until a new process has described every resource again, and what that cost.
pub async fn restart(b: &mut Bench) -> Restart {
    let first_rss = b.fleet.provider_pid().map(peak_rss_mib).unwrap_or_default();
    let targets = b.targets();
    let before = b.fleet.aws.described();
    let marks = Marks::now(b);
    b.fleet.kill_provider();
    let started = Instant::now();
    b.start_provider();
    b.fleet.activate().await;
    let unseen = |now: &HashMap<String, u64>| {
        targets
            .iter()
            .filter(|t| now.get(*t).copied().unwrap_or(0) <= before.get(*t).copied().unwrap_or(0))
            .count()
    };
    let mut last = Instant::now();
    loop {
        let left = unseen(&b.fleet.aws.described());
        if left == 0 {
            break;
        }
        if last.elapsed() > Duration::from_secs(30) {
            progress(b, "restart", started, &format!(", {left} not described yet"));
            last = Instant::now();
        }
        assert!(
            started.elapsed() < limit(),
            "the restarted provider did not look at every resource; log tail:\n{}",
            b.fleet.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let took = started.elapsed();
    let (calls, throttled, deferred, flaps) = marks.since(b, false);
    println!(
        "  restart: every MR described again after {:.0} s at real speed ({:.1} s compressed), {calls} AWS calls, \
         {throttled} throttled, {deferred} Deferred, {flaps} Synced flaps",
        b.s.real(took),
        took.as_secs_f64()
    );
    Restart {
        cells: format!(
            "{:.0} s, {calls} calls, {throttled} throttled, {deferred} Deferred, {flaps} flaps",
            b.s.real(took)
        ),
        first_rss,
    }
}

/// One managed resource AWS rejects for good, and when its first Create reached the stand-in.
struct Rejected {
    kind: &'static str,
    name: String,
    /// The Describe and Create operations and the AWS name they carry.
    ops: [&'static str; 2],
    target: String,
    first: Option<Instant>,
    /// (Create calls, all calls) in the 2 and the 4 minutes (two longest backoffs) from the first Create.
    two_minutes: Option<(u64, u64)>,
    four_minutes: Option<(u64, u64)>,
}

impl Rejected {
    fn counts(&self, b: &Bench) -> (u64, u64) {
        let [describe, create] = self.ops;
        let creates = b.fleet.aws.calls_for(create, &self.target);
        (creates, creates + b.fleet.aws.calls_for(describe, &self.target))
    }
}

async fn make_rejected(b: &Bench) -> Vec<Rejected> {
    let n = (b.clusters / 100).max(1);
    let pp = PostParams::default();
    let mut made = Vec::new();
    for i in 0..n {
        let name = format!("r{i:03}-{REJECTED}");
        let mut cluster = cluster_in(NS, &name);
        cluster.spec.resource.provider_config_ref.name = provider_config(0);
        cluster.spec.for_provider.version = UNSUPPORTED_VERSION.into();
        b.fleet.clusters().create(&pp, &cluster).await.unwrap();
        made.push(Rejected {
            kind: "Cluster",
            target: name.clone(),
            name,
            ops: ["DescribeCluster", "CreateCluster"],
            first: None,
            two_minutes: None,
            four_minutes: None,
        });
        // EKS wants a node group of at least one node.
        let owner = cluster_name(i % b.clusters);
        let name = format!("{owner}-{REJECTED}");
        let mut pool = pool_in(NS, &name, &owner);
        pool.spec.resource.provider_config_ref.name = provider_config(0);
        pool.spec.for_provider.scaling = Scaling {
            min_size: 0,
            max_size: 0,
            desired_size: 0,
        };
        b.fleet.pools().create(&pp, &pool).await.unwrap();
        made.push(Rejected {
            kind: "NodePool",
            target: format!("{owner}/{name}"),
            name,
            ops: ["DescribeNodegroup", "CreateNodegroup"],
            first: None,
            two_minutes: None,
            four_minutes: None,
        });
    }
    made
}

/// A permanent error: Clusters with a version EKS does not offer and NodePools with no nodes, made once the
/// fleet is calm; their calls counted over two longest backoffs from each one's first rejected Create.
pub async fn permanent_error(b: &Bench) -> String {
    let mut rejected = make_rejected(b).await;
    let started = Instant::now();
    // A retry that lands right at the window's end still counts.
    let slack = Duration::from_secs_f64(b.s.secs(3.0));
    let two = Duration::from_secs_f64(b.s.secs(120.0)) + slack;
    let four = Duration::from_secs_f64(b.s.secs(240.0)) + slack;
    while rejected.iter().any(|r| r.four_minutes.is_none()) {
        for r in rejected.iter_mut() {
            let (counts, first) = (r.counts(b), r.first);
            match first {
                None if counts.0 > 0 => r.first = Some(Instant::now()),
                None => {}
                Some(t) if t.elapsed() >= two && r.two_minutes.is_none() => r.two_minutes = Some(counts),
                Some(t) if t.elapsed() >= four && r.four_minutes.is_none() => r.four_minutes = Some(counts),
                Some(_) => {}
            }
        }
        assert!(
            rejected.iter().all(|r| r.first.is_some()) || started.elapsed() < limit(),
            "a rejected managed resource was never created"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut says_permanent = 0;
    for r in &rejected {
        let conditions = match r.kind {
            "Cluster" => b
                .fleet
                .clusters()
                .get(&r.name)
                .await
                .unwrap()
                .status
                .map(|s| s.conditions),
            _ => b
                .fleet
                .pools()
                .get(&r.name)
                .await
                .unwrap()
                .status
                .map(|s| s.conditions),
        };
        let synced = condition(conditions.as_ref(), "Synced");
        if synced.is_some_and(|c| {
            c.status == ConditionStatus::False && c.message.unwrap_or_default().contains("permanent error")
        }) {
            says_permanent += 1;
        }
    }
    let worst = |pick: fn(&Rejected) -> Option<(u64, u64)>| {
        rejected
            .iter()
            .filter_map(pick)
            .fold((0, 0), |(c, a), (c2, a2)| (c.max(c2), a.max(a2)))
    };
    let (two_creates, two_all) = worst(|r| r.two_minutes);
    let (four_creates, four_all) = worst(|r| r.four_minutes);
    println!(
        "  permanent error ({} Clusters with version {UNSUPPORTED_VERSION}, {} NodePools of max size 0): at most \
         {two_creates} Create calls ({two_all} calls in all) per MR in the 2 minutes from its first rejection, \
         {four_creates} ({four_all}) in 4 minutes (two longest backoffs); {says_permanent} of {} say \"permanent \
         error\" on Synced",
        rejected.len() / 2,
        rejected.len() / 2,
        rejected.len()
    );
    format!(
        "{two_creates} ({two_all}) / {four_creates} ({four_all}), {} MRs",
        rejected.len()
    )
}
