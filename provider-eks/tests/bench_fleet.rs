//! Benchmark, not a test (ignored by default): a fleet of Clusters with 8 NodePools each, through the real
//! binary, the in-process `FastKube` (Kubernetes) and `FastEks` (AWS: moto cannot serve thousands of node
//! groups; the correctness suites keep moto). Two ProviderConfigs share one AWS account, whose per-API limits
//! the stand-in enforces with throttling answers. Reports time to converge, AWS calls at steady state, the time
//! a restarted provider takes to look at every resource again, throttling answers, the calls a permanently
//! rejected create makes, and the provider's peak RSS.
//!
//! `BENCH_MRS=1000 cargo test -p modelplane-provider-eks --test bench_fleet -- --ignored --nocapture`
//!
//! The schedule is compressed by `BENCH_COMPRESS` (10 by default): poll 6 s, calm polls up to 60 s, busy 1.5 s,
//! longest backoff 12 s, against the defaults 60 s / 600 s / 15 s / 120 s; the AWS limits (the stand-in's and
//! the provider's flags alike) are raised by the same factor, from 10 calls/s per EKS API (burst 20), so the
//! compressed run loads them as the real schedule would. Per-hour numbers are scaled back to the defaults.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::PostParams;
use modelplane_eks_api::{Condition, Scaling};
use support::fasteks::Behaviour;
use support::fleet::{Fleet, provider_config};
use support::objects::{cluster_in, is_true, pool_in};
use support::peak_rss_mib;
use support::world::NS;

const POOLS_PER_CLUSTER: usize = 8;
const PROVIDER_CONFIGS: usize = 2;
/// EKS publishes no request rates; these are the provider's defaults (`--eks-rate`, `--eks-burst`).
const EKS_RATE: f64 = 10.0;
const EKS_BURST: f64 = 20.0;

struct Schedule {
    compress: f64,
}

impl Schedule {
    fn secs(&self, real: f64) -> f64 {
        real / self.compress
    }

    fn flag(&self, real: f64) -> String {
        format!("{}", self.secs(real).max(1.0).round())
    }
}

fn start(fleet: &mut Fleet, s: &Schedule) {
    let rate = format!("{}", EKS_RATE * s.compress);
    let burst = format!("{}", EKS_BURST * s.compress);
    let (poll, max_poll, busy, backoff) = (s.flag(60.0), s.flag(600.0), s.flag(15.0), s.flag(120.0));
    fleet.start_provider(&[
        "--poll-interval-seconds",
        &poll,
        "--max-poll-interval-seconds",
        &max_poll,
        "--busy-interval-seconds",
        &busy,
        "--max-backoff-seconds",
        &backoff,
        "--eks-rate",
        &rate,
        "--eks-burst",
        &burst,
    ]);
}

fn ready(conditions: Option<&Vec<Condition>>) -> bool {
    conditions.is_some_and(|c| is_true(c, "Ready") && is_true(c, "Synced"))
}

async fn not_ready(fleet: &Fleet) -> usize {
    let pools = fleet.pools().list(&Default::default()).await.unwrap();
    let clusters = fleet.clusters().list(&Default::default()).await.unwrap();
    let pools_waiting = pools
        .items
        .iter()
        .filter(|p| !ready(p.status.as_ref().map(|s| &s.conditions)))
        .count();
    let clusters_waiting = clusters
        .items
        .iter()
        .filter(|c| !ready(c.status.as_ref().map(|s| &s.conditions)))
        .count();
    pools_waiting + clusters_waiting
}

async fn create_fleet(fleet: &Fleet, clusters: usize) {
    let pp = PostParams::default();
    let jobs = (0..clusters).flat_map(|c| {
        let name = format!("c{c:04}");
        let config = provider_config(c % PROVIDER_CONFIGS);
        let mut jobs: Vec<futures::future::BoxFuture<'static, ()>> = Vec::new();
        let mut object = cluster_in(NS, &name);
        object.spec.resource.provider_config_ref.name = config.clone();
        let (api, p) = (fleet.clusters(), pp.clone());
        jobs.push(Box::pin(async move {
            api.create(&p, &object).await.unwrap();
        }));
        for i in 0..POOLS_PER_CLUSTER {
            let mut object = pool_in(NS, &format!("{name}-p{i}"), &name);
            object.spec.resource.provider_config_ref.name = config.clone();
            let (api, p) = (fleet.pools(), pp.clone());
            jobs.push(Box::pin(async move {
                api.create(&p, &object).await.unwrap();
            }));
        }
        jobs
    });
    futures::stream::iter(jobs)
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run explicitly with --ignored"]
async fn bench_a_fleet_of_clusters_and_node_pools() {
    let env = |name: &str, default: f64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let wanted = env("BENCH_MRS", 100.0) as usize;
    let s = Schedule {
        compress: env("BENCH_COMPRESS", 10.0),
    };
    let clusters = (wanted / (POOLS_PER_CLUSTER + 1)).max(1);
    let pools = clusters * POOLS_PER_CLUSTER;
    let mrs = clusters + pools;
    let behaviour = Behaviour {
        // A real cluster takes ~10 min and a node group ~3 min; compressed further here to keep the run short.
        create_takes: Duration::from_secs_f64(s.secs(300.0)),
        delete_takes: Duration::from_secs_f64(s.secs(120.0)),
        rate: EKS_RATE * s.compress,
        burst: EKS_BURST * s.compress,
    };
    let mut fleet = Fleet::start(behaviour, PROVIDER_CONFIGS).await;
    create_fleet(&fleet, clusters).await;
    start(&mut fleet, &s);

    let started = Instant::now();
    fleet.activate().await;
    let mut last_report = Instant::now();
    loop {
        let waiting = not_ready(&fleet).await;
        if waiting == 0 {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(60) {
            eprintln!(
                "  {:.0} s: {waiting} MRs not Ready, {} AWS calls, {} throttled",
                started.elapsed().as_secs_f64(),
                fleet.aws.total_calls(),
                fleet.aws.throttled()
            );
            last_report = Instant::now();
        }
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "the fleet did not converge; provider log tail:\n{}",
            fleet.log_tail(40)
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let converged = started.elapsed();
    let calls_to_converge = fleet.aws.total_calls();
    let throttled_converging = fleet.aws.throttled();
    println!(
        "provider-eks fleet benchmark: {clusters} Clusters + {pools} NodePools = {mrs} MRs (FastEks, FastKube), \
         schedule compressed x{}, {PROVIDER_CONFIGS} ProviderConfigs of one account",
        s.compress
    );
    println!(
        "  converge (activation -> all Ready and Synced): {:.1} s ({:.0} s at real speed), {calls_to_converge} AWS \
         calls, {throttled_converging} throttled",
        converged.as_secs_f64(),
        converged.as_secs_f64() * s.compress
    );

    // Calm: every resource has its polls stretched to the bound (poll doubling: 1+2+4+8 poll intervals).
    let max_poll = s.secs(600.0);
    tokio::time::sleep(Duration::from_secs_f64(2.0 * max_poll)).await;
    let (before, describes_before) = (fleet.aws.total_calls(), fleet.aws.describes());
    let window = 2.0 * max_poll;
    tokio::time::sleep(Duration::from_secs_f64(window)).await;
    let steady = fleet.aws.total_calls() - before;
    let steady_describes = fleet.aws.describes() - describes_before;
    let per_mr_hour = steady as f64 * 3600.0 / window / mrs as f64 / s.compress;
    let rss_first = fleet.provider_pid().map(peak_rss_mib).unwrap_or_default();
    let throttled_calm = fleet.aws.throttled() - throttled_converging;
    println!(
        "  calm steady state: {steady} AWS calls ({steady_describes} describes) in {window:.0} s = \
         {per_mr_hour:.2} per MR per hour at the defaults; {throttled_calm} throttled"
    );

    // Restart: how long until the new process has described every resource once.
    fleet.kill_provider();
    let described_before = fleet.aws.describes();
    let restarted = Instant::now();
    start(&mut fleet, &s);
    fleet.activate().await;
    while fleet.aws.describes() - described_before < mrs as u64 {
        assert!(
            restarted.elapsed() < Duration::from_secs(3600),
            "the restarted provider did not look at every resource"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let relooked = restarted.elapsed();
    println!(
        "  restart: every MR described again after {:.1} s ({:.0} s at real speed)",
        relooked.as_secs_f64(),
        relooked.as_secs_f64() * s.compress
    );

    // A permanent error: a node group EKS rejects (max size 0), created once the fleet is calm again.
    let mut bad = pool_in(NS, "c0000-rejected", "c0000");
    bad.spec.resource.provider_config_ref.name = provider_config(0);
    bad.spec.for_provider.scaling = Scaling {
        min_size: 0,
        max_size: 0,
        desired_size: 0,
    };
    fleet.pools().create(&PostParams::default(), &bad).await.unwrap();
    let target = "c0000/c0000-rejected";
    let first_try = Instant::now();
    while fleet.aws.calls_for("CreateNodegroup", target) == 0 {
        assert!(
            first_try.elapsed() < Duration::from_secs(120),
            "the rejected pool was never created"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs_f64(s.secs(120.0))).await;
    let after_rejection = fleet.aws.calls_for("CreateNodegroup", target);
    let rss_restart = fleet.provider_pid().map(peak_rss_mib).unwrap_or_default();

    println!(
        "  permanent error: {after_rejection} CreateNodegroup calls in the first 2 minutes (compressed)"
    );
    println!("  provider peak RSS: {rss_first:.1} MiB (first run), {rss_restart:.1} MiB (after restart)");
    println!("  calls by operation: {:?}", fleet.aws.calls());
    println!(
        "  throttled by operation: {:?}",
        fleet.aws.throttled_by_operation()
    );
    assert!(
        fleet.aws.unsupported().is_empty(),
        "requests the stand-in does not speak: {:?}",
        fleet.aws.unsupported()
    );
}
