//! Benchmark, not a test (ignored by default): a fleet of Clusters with 8 NodePools each, through the real
//! binary, moto behind the counting proxy, and the in-process `FastKube` API stand-in (kmock saturates at about
//! 200 pools). Reports time to converge, AWS calls per minute once the fleet is calm, the time a restarted
//! provider takes to look at every resource again, and the provider's peak RSS.
//!
//! `BENCH_MRS=1000 cargo test --release -p modelplane-provider-eks --test bench_fleet -- --ignored --nocapture`
//!
//! The schedule is compressed: poll 5 s and calm polls up to 40 s, against the defaults of 60 s and 600 s
//! (x12 and x15). Per-hour numbers are given for the compressed schedule and scaled to the defaults.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::PostParams;
use support::peak_rss_mib;
use support::world::*;

const POLL: u64 = 5;
const MAX_POLL: u64 = 40;
const DEFAULT_MAX_POLL: u64 = 600;
const POOLS_PER_CLUSTER: usize = 8;

/// What moto (one Python process) answers without timing out on a busy 2-core machine; `BENCH_EKS_RATE`
/// overrides it.
const EKS_RATE: u32 = 50;

fn start(world: &mut World) {
    let (poll, max_poll) = (POLL.to_string(), MAX_POLL.to_string());
    let rate = std::env::var("BENCH_EKS_RATE").unwrap_or_else(|_| EKS_RATE.to_string());
    world.start_provider_with(&[
        "--poll-interval-seconds",
        &poll,
        "--max-poll-interval-seconds",
        &max_poll,
        "--busy-interval-seconds",
        "1",
        "--max-backoff-seconds",
        "10",
        // moto, not AWS, is the limit here: the buckets are sized for it.
        "--eks-rate",
        &rate,
        "--eks-burst",
        &rate,
    ]);
}

/// Describe calls (DescribeCluster, DescribeNodegroup) in `requests`.
fn describes(requests: &[String]) -> usize {
    requests
        .iter()
        .filter(|r| r.starts_with("GET /clusters/") && r.matches('/').count() != 3)
        .count()
}

async fn all_ready(world: &World) -> bool {
    let pools = world.pools().list(&Default::default()).await.unwrap();
    let clusters = world.clusters().list(&Default::default()).await.unwrap();
    let ready = |c: Option<Vec<modelplane_eks_api::Condition>>| is_true(&c.unwrap_or_default(), "Ready");
    pools
        .items
        .iter()
        .all(|p| ready(p.status.as_ref().map(|s| s.conditions.clone())))
        && clusters
            .items
            .iter()
            .all(|c| ready(c.status.as_ref().map(|s| s.conditions.clone())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run explicitly with --ignored"]
async fn bench_a_fleet_of_clusters_and_node_pools() {
    let wanted: usize = std::env::var("BENCH_MRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let clusters = (wanted / (POOLS_PER_CLUSTER + 1)).max(1);
    let pools = clusters * POOLS_PER_CLUSTER;
    let mrs = clusters + pools;
    let mut world = World::start_fast().await;
    world.proxy.limit_upstream(16);
    start(&mut world);
    let pp = PostParams::default();
    let objects = (0..clusters).flat_map(|c| {
        let name = format!("c{c:04}");
        let cluster_api = world.clusters();
        let pool_api = world.pools();
        let pp = pp.clone();
        let mut jobs: Vec<futures::future::BoxFuture<'static, ()>> = Vec::new();
        let cluster_object = cluster_in(NS, &name);
        let api = cluster_api.clone();
        let p = pp.clone();
        jobs.push(Box::pin(async move {
            api.create(&p, &cluster_object).await.unwrap();
        }));
        for i in 0..POOLS_PER_CLUSTER {
            let pool_object = pool_in(NS, &format!("{name}-p{i}"), &name);
            let api = pool_api.clone();
            let p = pp.clone();
            jobs.push(Box::pin(async move {
                api.create(&p, &pool_object).await.unwrap();
            }));
        }
        jobs
    });
    futures::stream::iter(objects)
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;

    let started = Instant::now();
    world.activate().await;
    let deadline = started + Duration::from_secs(3600);
    while !all_ready(&world).await {
        assert!(Instant::now() < deadline, "the fleet did not converge");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let converged = started.elapsed();
    let calls_to_converge = world.proxy.requests().len();

    // Calm: every resource has had its polls stretched to the bound.
    tokio::time::sleep(Duration::from_secs(3 * MAX_POLL)).await;
    let before = world.proxy.requests().len();
    let window = 2 * MAX_POLL;
    tokio::time::sleep(Duration::from_secs(window)).await;
    let steady = world.proxy.requests().len() - before;
    let per_minute = steady as f64 * 60.0 / window as f64;
    let per_mr_hour = steady as f64 * 3600.0 / window as f64 / mrs as f64;
    let per_mr_hour_defaults = per_mr_hour * MAX_POLL as f64 / DEFAULT_MAX_POLL as f64;
    let rss_first = world.provider_pid().map(peak_rss_mib).unwrap_or_default();

    // Restart: how long until the new process has described every resource once.
    world.kill_provider();
    let described_before = describes(&world.proxy.requests());
    let restarted = Instant::now();
    start(&mut world);
    world.activate().await;
    while describes(&world.proxy.requests()) - described_before < mrs {
        assert!(
            restarted.elapsed() < Duration::from_secs(3600),
            "the restarted provider did not look at every resource"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let relooked = restarted.elapsed();
    let rss_restart = world.provider_pid().map(peak_rss_mib).unwrap_or_default();

    println!(
        "provider-eks fleet benchmark: {clusters} Clusters + {pools} NodePools = {mrs} MRs (moto, FastKube)"
    );
    println!(
        "  converge (activation -> all Ready): {:.1} s, {calls_to_converge} AWS calls",
        converged.as_secs_f64()
    );
    println!(
        "  calm steady state: {steady} AWS calls in {window} s = {per_minute:.1}/min = {per_mr_hour:.1} per MR per hour \
         (poll {POLL} s, calm up to {MAX_POLL} s); at the defaults (60 s, calm up to {DEFAULT_MAX_POLL} s): \
         {per_mr_hour_defaults:.1} per MR per hour"
    );
    println!(
        "  restart: every MR described again after {:.1} s (spread over one poll interval of {POLL} s)",
        relooked.as_secs_f64()
    );
    println!("  provider peak RSS: {rss_first:.1} MiB (first run), {rss_restart:.1} MiB (after restart)");
}
