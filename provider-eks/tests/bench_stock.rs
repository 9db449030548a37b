//! Benchmark, not a test (ignored by default): stock EKS InferenceClusters (the seed's, region only) composed
//! stage by stage by the real function and reconciled by the real provider binary on the real kube-apiserver,
//! against moto with the EKS stand-in (as `e2e_stock.rs` drives them). For 1 and for 20 clusters it reports the
//! time from the first apply to every managed resource Ready, the AWS calls that took, the steady-state AWS
//! calls per managed resource per poll (target <= 1; upbound's providers describe every resource on every
//! poll, so 1 is theirs at best) and the provider's memory.
//!
//! `cargo test -p modelplane-provider-eks --test bench_stock -- --ignored --nocapture`
//! (`BENCH_CLUSTERS=1,20` is the default list.)

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

#[path = "stock/driver.rs"]
mod driver;

use std::time::{Duration, Instant};

use driver::StockCluster;
use support::world::World;
use support::{peak_rss_mib, rss_mib};

/// Polls of a calm resource, and of one being made, in the benchmark (the production defaults are 60 s and
/// 15 s; shorter here so a run takes minutes; calls per poll do not depend on the length).
const POLL_SECONDS: u64 = 10;
const BUSY_SECONDS: u64 = 1;
const STEADY_POLLS: u64 = 6;
const CONVERGE_WITHIN: Duration = Duration::from_secs(900);

struct Run {
    clusters: usize,
    managed: usize,
    converged: Duration,
    calls_to_converge: usize,
    steady_calls: usize,
    /// The steady window's calls by operation, most first.
    steady_by_operation: Vec<(String, usize)>,
    rss_steady: f64,
    rss_peak: f64,
}

async fn run(count: usize) -> Run {
    let mut world = World::start_with_eks_standin().await;
    let (poll, busy) = (POLL_SECONDS.to_string(), BUSY_SECONDS.to_string());
    world.start_provider_with(&["--poll-interval-seconds", &poll, "--busy-interval-seconds", &busy]);
    let mut clusters: Vec<StockCluster> = (0..count)
        .map(|i| StockCluster::example_named(&format!("stock-{i:02}")))
        .collect();
    let started = Instant::now();
    let mut settled = vec![false; count];
    while !settled.iter().all(|s| *s) {
        for (cluster, done) in clusters.iter_mut().zip(settled.iter_mut()) {
            *done = cluster.step_settled(&world).await;
        }
        assert!(
            started.elapsed() < CONVERGE_WITHIN,
            "{count} stock clusters did not converge; not Ready:\n{}",
            clusters
                .iter()
                .flat_map(StockCluster::not_ready)
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let converged = started.elapsed();
    let calls_to_converge = world.proxy.requests().len();
    let managed = clusters.iter().map(|c| c.applied.len()).sum();

    // The last creates' follow-up looks settle first; then one window of calm polls.
    tokio::time::sleep(Duration::from_secs(2 * POLL_SECONDS)).await;
    let before = world.proxy.requests().len();
    tokio::time::sleep(Duration::from_secs(STEADY_POLLS * POLL_SECONDS)).await;
    let steady: Vec<String> = world.proxy.requests()[before..].to_vec();
    let mut by_operation = std::collections::BTreeMap::<String, usize>::new();
    for call in &steady {
        *by_operation.entry(call.clone()).or_default() += 1;
    }
    let mut steady_by_operation: Vec<(String, usize)> = by_operation.into_iter().collect();
    steady_by_operation.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let pid = world.provider_pid().unwrap();
    Run {
        clusters: count,
        managed,
        converged,
        calls_to_converge,
        steady_calls: steady.len(),
        steady_by_operation,
        rss_steady: rss_mib(pid),
        rss_peak: peak_rss_mib(pid),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run explicitly with --ignored"]
async fn bench_stock_clusters_against_moto() {
    let counts: Vec<usize> = std::env::var("BENCH_CLUSTERS")
        .unwrap_or_else(|_| "1,20".into())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    println!(
        "provider-eks stock-cluster benchmark (real function, real provider, real kube-apiserver, moto + EKS stand-in; poll {POLL_SECONDS} s, busy {BUSY_SECONDS} s)"
    );
    println!(
        "| clusters | managed resources | first apply -> all Ready | AWS calls to converge (per MR) | steady AWS calls per MR per poll (vs 1 for describe-every-poll) | provider RSS steady / peak |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut breakdowns = Vec::new();
    for count in counts {
        let r = run(count).await;
        let calls: Vec<String> = r
            .steady_by_operation
            .iter()
            .map(|(operation, n)| format!("{operation} {n}"))
            .collect();
        breakdowns.push(format!(
            "{} clusters, steady window: {}",
            r.clusters,
            calls.join(", ")
        ));
        let per_mr = r.calls_to_converge as f64 / r.managed as f64;
        let per_poll = r.steady_calls as f64 / (r.managed as f64 * STEADY_POLLS as f64);
        println!(
            "| {} | {} | {:.1} s | {} ({per_mr:.1}) | {per_poll:.2} ({:.2}x) | {:.1} / {:.1} MiB |",
            r.clusters,
            r.managed,
            r.converged.as_secs_f64(),
            r.calls_to_converge,
            per_poll,
            r.rss_steady,
            r.rss_peak
        );
        assert!(
            per_poll <= 1.05,
            "more than one AWS call per managed resource per poll"
        );
    }
    for line in breakdowns {
        println!("{line}");
    }
}
