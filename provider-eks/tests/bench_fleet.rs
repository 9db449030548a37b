//! Benchmark, not a test (ignored by default): a fleet of Clusters with 8 NodePools each, through the real
//! binary, the in-process `FastKube` (Kubernetes) and `FastEks` (AWS: moto cannot serve thousands of node
//! groups; the correctness suites keep moto). Two ProviderConfigs share one AWS account, whose per-API limits
//! the stand-in enforces with throttling answers. One run measures every phase for one fleet size: activation
//! to all Ready, a calm window (with a spec change and drift made outside Kubernetes), a restart of the
//! provider, a permanent error, and the provider's peak RSS; it prints one row of docs/benchmarks.md's table.
//!
//! `BENCH_MRS=1000 cargo test --release -p modelplane-provider-eks --test bench_fleet -- --ignored --nocapture`
//! (`--release` builds the provider binary, the stand-ins and this bench in release; without it, debug).
//! `BENCH_PHASES=converge` stops after activation (convergence and peak RSS only); `BENCH_PROVIDER_WRAPPER`
//! runs the provider under a profiler (`heaptrack -o FILE`), whose own memory the RSS figure then includes.
//!
//! The schedule is compressed by `BENCH_COMPRESS` (10 by default): poll 6 s, calm polls up to 60 s, busy 2 s,
//! longest backoff 12 s, against the defaults 60 s / 600 s / 15 s / 120 s; the AWS limits (the stand-in's and
//! the provider's flags alike) are raised by the same factor, from 10 calls/s per EKS API (burst 20), so the
//! compressed run loads them as the real schedule would. Times and rates are printed scaled back to real speed.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "bench_fleet/phases.rs"]
mod phases;
mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::PostParams;
use support::fasteks::Behaviour;
use support::fleet::{Fleet, provider_config};
use support::fleet_status::FleetStatus;
use support::objects::{cluster_in, pool_in};
use support::world::NS;

pub const POOLS_PER_CLUSTER: usize = 8;
const PROVIDER_CONFIGS: usize = 2;
/// EKS publishes no request rates; these are the provider's defaults (`--eks-rate`, `--eks-burst`).
pub const EKS_RATE: f64 = 10.0;
const EKS_BURST: f64 = 20.0;
/// The share of `--eks-rate` the provider gives steady-state polls of one kind (its `steady_rate`).
pub const STEADY_SHARE: f64 = 0.8;

pub struct Schedule {
    pub compress: f64,
}

impl Schedule {
    /// A real-speed duration in seconds, compressed.
    pub fn secs(&self, real: f64) -> f64 {
        real / self.compress
    }

    /// A compressed duration, back at real speed.
    pub fn real(&self, compressed: Duration) -> f64 {
        compressed.as_secs_f64() * self.compress
    }

    fn flag(&self, real: f64) -> String {
        format!("{}", self.secs(real).max(1.0).round())
    }
}

/// The benchmark's world and its fleet.
pub struct Bench {
    pub fleet: Fleet,
    pub status: FleetStatus,
    pub s: Schedule,
    pub clusters: usize,
    pub pools: usize,
}

impl Bench {
    pub fn mrs(&self) -> usize {
        self.clusters + self.pools
    }

    pub fn start_provider(&mut self) {
        let rate = format!("{}", EKS_RATE * self.s.compress);
        let burst = format!("{}", EKS_BURST * self.s.compress);
        let s = &self.s;
        let (poll, max_poll, busy, backoff) = (s.flag(60.0), s.flag(600.0), s.flag(15.0), s.flag(120.0));
        self.fleet.start_provider(&[
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

    /// Managed resources of the fleet (not the rejected ones of the permanent-error phase) Ready and Synced.
    pub fn ready(&self) -> usize {
        self.status.ready(|name| !name.contains(phases::REJECTED))
    }

    /// The AWS name of every managed resource of the fleet: "cluster" and "cluster/nodegroup".
    pub fn targets(&self) -> Vec<String> {
        (0..self.clusters)
            .flat_map(|c| {
                let cluster = cluster_name(c);
                let pools =
                    (0..POOLS_PER_CLUSTER).map(move |i| format!("{}/{}", cluster_name(c), pool_name(c, i)));
                std::iter::once(cluster).chain(pools)
            })
            .collect()
    }

    /// The longest a calm resource waits between polls here (compressed): the calm bound, or the capacity
    /// window when the node groups are too many for the describe rate (`managed/pacing.rs`).
    pub fn calm_bound(&self) -> f64 {
        let capacity = self.pools as f64 / (STEADY_SHARE * EKS_RATE * self.s.compress);
        self.s.secs(600.0).max(capacity)
    }
}

pub fn cluster_name(c: usize) -> String {
    format!("c{c:04}")
}

pub fn pool_name(c: usize, i: usize) -> String {
    format!("c{c:04}-p{i}")
}

async fn create_fleet(fleet: &Fleet, clusters: usize) {
    let pp = PostParams::default();
    let jobs = (0..clusters).flat_map(|c| {
        let name = cluster_name(c);
        let config = provider_config(c % PROVIDER_CONFIGS);
        let mut jobs: Vec<futures::future::BoxFuture<'static, ()>> = Vec::new();
        let mut object = cluster_in(NS, &name);
        object.spec.resource.provider_config_ref.name = config.clone();
        let (api, p) = (fleet.clusters(), pp.clone());
        jobs.push(Box::pin(async move {
            api.create(&p, &object).await.unwrap();
        }));
        for i in 0..POOLS_PER_CLUSTER {
            let mut object = pool_in(NS, &pool_name(c, i), &name);
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

pub fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
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
    let behaviour = Behaviour {
        // A real cluster takes ~10 min and a node group ~3 min; compressed further here to keep the run short.
        create_takes: Duration::from_secs_f64(s.secs(300.0)),
        delete_takes: Duration::from_secs_f64(s.secs(120.0)),
        rate: EKS_RATE * s.compress,
        burst: EKS_BURST * s.compress,
    };
    let fleet = Fleet::start(behaviour, PROVIDER_CONFIGS).await;
    let status = FleetStatus::watch(&fleet.kube);
    let mut bench = Bench {
        fleet,
        status,
        s,
        clusters,
        pools: clusters * POOLS_PER_CLUSTER,
    };
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "provider-eks fleet benchmark: {} Clusters + {} NodePools = {} MRs (FastEks, FastKube), {build} build, \
         schedule compressed x{}, {PROVIDER_CONFIGS} ProviderConfigs of one account; load average {}",
        bench.clusters,
        bench.pools,
        bench.mrs(),
        bench.s.compress,
        load_average()
    );
    create_fleet(&bench.fleet, bench.clusters).await;
    bench.start_provider();
    let started = Instant::now();
    bench.fleet.activate().await;

    let converge = phases::converge(&bench, started).await;
    if std::env::var("BENCH_PHASES").as_deref() == Ok("converge") {
        // Activation alone: its convergence and the peak it reached (the other phases need ~3x as long).
        let rss = bench
            .fleet
            .provider_pid()
            .map(support::peak_rss_mib)
            .unwrap_or_default();
        println!(
            "| {} ({} + {}), {build} build | {converge} | {rss:.1} MiB |",
            bench.mrs(),
            bench.clusters,
            bench.pools
        );
        return;
    }
    let calm = phases::calm(&bench).await;
    let restart = phases::restart(&mut bench).await;
    let rejected = phases::permanent_error(&bench).await;
    let rss_restarted = bench
        .fleet
        .provider_pid()
        .map(support::peak_rss_mib)
        .unwrap_or_default();

    println!("  calls by operation: {:?}", bench.fleet.aws.calls());
    println!(
        "  throttled by operation: {:?}",
        bench.fleet.aws.throttled_by_operation()
    );
    println!("  load average at the end: {}", load_average());
    println!(
        "| {} ({} + {}), FastEks, {build} build | {converge} | {calm} | {restart} | {rejected} | {:.1} MiB ({:.1} MiB after the restart) | {} |",
        bench.mrs(),
        bench.clusters,
        bench.pools,
        restart.first_rss,
        rss_restarted,
        load_average()
    );
    assert!(
        bench.fleet.aws.unsupported().is_empty(),
        "requests the stand-in does not speak: {:?}",
        bench.fleet.aws.unsupported()
    );
}
