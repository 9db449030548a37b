//! Benchmark, not a test (ignored by default): one Cluster and 200 NodePools against moto through the real
//! binary and the real kube-apiserver (see `support::apiserver`). Reports time to converge, AWS calls per
//! managed resource per steady-state poll (target <= 1) and the provider's peak memory.
//!
//! `cargo test --release -p modelplane-provider-eks --test bench -- --ignored --nocapture`

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use futures::future::join_all;
use kube::api::PostParams;
use support::peak_rss_mib;
use support::world::*;

/// `BENCH_POOLS` overrides the pool count.
const POOLS: usize = 200;
const POLL_SECONDS: u64 = 10;
const STEADY_POLLS: u64 = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run explicitly with --ignored"]
async fn bench_200_node_pools_against_moto() {
    let pools_wanted: usize = std::env::var("BENCH_POOLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(POOLS);
    let mut world = World::start().await;
    let poll = POLL_SECONDS.to_string();
    world.start_provider_with(&[
        "--poll-interval-seconds",
        &poll,
        "--busy-interval-seconds",
        "1",
        "--debug",
    ]);
    let pp = PostParams::default();
    world
        .clusters()
        .create(&pp, &world.cluster("bench"))
        .await
        .unwrap();
    let pools = world.pools();
    let creates = (0..pools_wanted).map(|i| {
        let pools = pools.clone();
        let pp = pp.clone();
        let ns = world.ns.clone();
        async move {
            pools
                .create(&pp, &pool_in(&ns, &format!("pool-{i:03}"), "bench"))
                .await
                .unwrap()
        }
    });
    join_all(creates).await;

    let started = Instant::now();
    world.activate().await;
    wait_for("every NodePool Ready", &world, || async {
        let list = world.pools().list(&Default::default()).await.unwrap();
        list.items.iter().all(|p| {
            is_true(
                &p.status
                    .as_ref()
                    .map(|s| s.conditions.clone())
                    .unwrap_or_default(),
                "Ready",
            )
        })
    })
    .await;
    let converged = started.elapsed();
    let calls_to_converge = world.proxy.requests().len();

    // Let the last create/late-init requeues settle, then count one steady window.
    tokio::time::sleep(Duration::from_secs(2 * POLL_SECONDS)).await;
    let before = world.proxy.requests().len();
    tokio::time::sleep(Duration::from_secs(STEADY_POLLS * POLL_SECONDS)).await;
    let steady = world.proxy.requests().len() - before;
    let resources = (pools_wanted + 1) as f64;
    let per_mr_per_poll = steady as f64 / (resources * STEADY_POLLS as f64);
    let rss = world.provider_pid().map(peak_rss_mib).unwrap_or_default();

    println!(
        "provider-eks benchmark: 1 Cluster + {pools_wanted} NodePools against moto (on the real kube-apiserver)"
    );
    println!(
        "  time to converge (activation -> all Ready): {:.1} s",
        converged.as_secs_f64()
    );
    println!("  AWS calls until converged: {calls_to_converge}");
    println!(
        "  steady state: {steady} AWS calls in {STEADY_POLLS} polls of {POLL_SECONDS} s = {per_mr_per_poll:.2} per MR per poll"
    );
    println!("  provider peak RSS: {rss:.1} MiB");
    assert!(
        per_mr_per_poll <= 1.05,
        "more than one AWS call per managed resource per poll"
    );
}
