//! Fleet-scale benchmark (not a test) for the placement ledger, docs/scheduling.md:
//! `cargo bench -p modelplane-tests --bench fleet_scale`.
//!
//! In process, the requests of `modelplane_tests::fleet::scale` (the ones `tests/bench.sh --requests
//! fleet-scale` sends over gRPC): one ModelDeployment reconcile in a 100-cluster fleet with 0, 1,000 and 10,000
//! other deployments. Prints the request's bytes and RunFunction's p50 (decode, compose, encode) for a settled
//! deployment and for a waiting one, beside the bytes the old way's request carried, and how many composites
//! one replica change concerns either way.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use modelplane_function::{proto::v1::RunFunctionRequest, run_function};
use modelplane_tests::fleet::scale::{OTHER_DEPLOYMENTS, concerned, old_way, settled, waiting};
use prost::Message;

fn p50(bytes: &[u8], runs: usize) -> Duration {
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let rsp = run_function(RunFunctionRequest::decode(bytes).unwrap());
            std::hint::black_box(rsp.encode_to_vec());
            start.elapsed()
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

// The allocator the server runs on, so in-process figures are the server's (`modelplane_function::memory`).
#[global_allocator]
static ALLOCATOR: modelplane_function::memory::Mimalloc = modelplane_function::memory::Mimalloc;

fn main() {
    println!(
        "| other deployments | settled: request, p50 | waiting: request, p50 | old way: request | composites one replica change concerns, before / after |"
    );
    println!("|---:|---|---|---:|---|");
    let mut settled_zero = Duration::ZERO;
    for others in OTHER_DEPLOYMENTS {
        let settled = settled(others).encode_to_vec();
        let waiting = waiting(others).encode_to_vec();
        if others == 0 {
            // Warm caches and the allocator before the row everything is compared with.
            p50(&settled, 200);
        }
        let (settled_p50, waiting_p50) = (p50(&settled, 400), p50(&waiting, 40));
        if others == 0 {
            settled_zero = settled_p50;
        }
        let (before, after) = concerned(others);
        println!(
            "| {others} | {:.1} KB, {:.3} ms ({:.2}x of 0) | {:.1} KB, {:.2} ms | {:.1} KB | {before} / {after} |",
            settled.len() as f64 / 1e3,
            settled_p50.as_secs_f64() * 1e3,
            settled_p50.as_secs_f64() / settled_zero.as_secs_f64(),
            waiting.len() as f64 / 1e3,
            waiting_p50.as_secs_f64() * 1e3,
            old_way(others).encoded_len() as f64 / 1e3,
        );
    }
}
