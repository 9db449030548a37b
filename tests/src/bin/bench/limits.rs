//! What the bounds cost: the slowest DRA selector the CEL budget still accepts, and our server's memory at rest,
//! under 16 concurrent fleet calls and around the largest call the XRD accepts (1000 replicas).

use std::time::{Duration, Instant};

use bytes::Bytes;
use modelplane_function::{
    api::inference_class::Device,
    cel,
    limits::{Deadline, MAX_REPLICAS, run_bounded},
    proto::v1::{RunFunctionResponse, Severity},
    schedule::devices::context_for,
};
use modelplane_tests::fleet::{FLEET_CLUSTERS, fleet_request_with_replicas};
use prost::Message;
use tonic::transport::Channel;

use crate::{
    load::{self, Caller, Load},
    servers::Running,
};

/// Builds a selector of size `n`.
type Shape = fn(usize) -> String;

/// Selector shapes whose cost grows with `n`; the budget decides the largest `n` accepted.
const SHAPES: &[(&str, Shape)] = &[
    ("nested all() over list literals", |n| {
        let l = list(n);
        format!("{l}.all(a, {l}.all(b, a == b))")
    }),
    ("triple nested exists()", |n| {
        let l = list(n);
        format!("{l}.exists(a, {l}.exists(b, {l}.exists(c, a + b + c == -1)))")
    }),
    ("map() growing its accumulator", |n| {
        let l = list(n);
        format!("{l}.map(x, {l}).size() == 0")
    }),
    ("regex over device strings", |n| {
        format!(
            "{}device.driver.matches('^g.*u$')",
            "device.driver.matches('^g.*u$') && ".repeat(n)
        )
    }),
];

fn list(n: usize) -> String {
    format!("[{}]", vec!["1"; n].join(","))
}

fn device() -> Option<Device> {
    serde_json::from_value(
        serde_json::json!({"name": "gpu", "claim": "DRA", "driver": "gpu.nvidia.com",
        "count": 8, "attributes": {"productName": {"string": "NVIDIA H200"}},
        "capacity": {"memory": {"value": "141Gi"}}}),
    )
    .ok()
}

/// The largest `n` whose selector the budget accepts (costs grow with `n`).
fn largest_accepted(shape: Shape) -> usize {
    let (mut low, mut high) = (1usize, 20_000usize);
    while low < high {
        let mid = (low + high).div_ceil(2);
        if cel::compile(&shape(mid)).is_ok() {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    low
}

/// Prints, per shape, the largest accepted selector's estimated cost and its evaluation time (median of 5).
pub fn print_cel() {
    println!(
        "\nSlowest accepted DRA selectors (per evaluation against one device; budget {}):",
        cel::MAX_COST
    );
    let Some(device) = device() else {
        return;
    };
    for (name, shape) in SHAPES {
        let (name, shape, device) = (*name, *shape, device.clone());
        let measured = run_bounded(Deadline::after(Duration::from_secs(10)), move || {
            let n = largest_accepted(shape);
            let source = shape(n);
            let selector = cel::compile(&source).ok()?;
            let context = context_for(&device).ok()?;
            let mut times: Vec<Duration> = (0..5)
                .map(|_| {
                    let started = Instant::now();
                    let _ = std::hint::black_box(selector.matches(&context));
                    started.elapsed()
                })
                .collect();
            times.sort();
            Some((n, source.len(), selector.cost, times[2]))
        });
        if let Some(Some((n, bytes, cost, median))) = measured {
            println!(
                "- {name}: n = {n} ({bytes} B), estimated cost {cost}: {:.2} ms",
                median.as_secs_f64() * 1e3
            );
        }
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Peak RSS of `pid` while `work` runs, sampled every 5 ms.
async fn peak_during<F: std::future::Future>(pid: u32, work: F) -> (u64, F::Output) {
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let sampler = tokio::spawn(async move {
        let mut peak = rss_kib(pid);
        loop {
            tokio::select! {
                _ = &mut stopped => return peak,
                () = tokio::time::sleep(Duration::from_millis(5)) => peak = peak.max(rss_kib(pid)),
            }
        }
    });
    let out = work.await;
    let _ = stop.send(());
    (sampler.await.unwrap_or(0).max(rss_kib(pid)), out)
}

fn outcome(answer: &Result<Bytes, tonic::Status>) -> String {
    match answer {
        Err(status) => format!("error {status}"),
        Ok(bytes) => match RunFunctionResponse::decode(bytes.as_ref()) {
            Err(e) => format!("undecodable: {e}"),
            Ok(rsp) => match rsp.results.iter().find(|r| r.severity == Severity::Fatal as i32) {
                Some(fatal) => format!("FATAL {:.100}", fatal.message),
                None => format!(
                    "{} desired resources, {} B",
                    rsp.desired.map_or(0, |d| d.resources.len()),
                    bytes.len()
                ),
            },
        },
    }
}

/// Prints our server's memory at rest, at peak under 16 concurrent fleet calls, and around the largest call.
pub async fn print_memory(ours: &Running, channel: &Channel, fleet: &Bytes, scale: f64) {
    let pid = ours.pid();
    println!("\nMemory of our server (RSS, /proc/{pid}/status):");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rest = rss_kib(pid);
    println!("- at rest after the table: {}", mib(rest));
    let load = Load {
        concurrency: 16,
        calls: ((400.0 * scale) as usize).max(16),
        time_limit: Duration::from_secs(20),
    };
    let (peak, _) = peak_during(pid, load::measure(channel, fleet, load)).await;
    println!(
        "- peak under 16 concurrent fleet calls ({} B each): {}",
        fleet.len(),
        mib(peak)
    );
    let largest = Bytes::from(fleet_request_with_replicas(FLEET_CLUSTERS, 8, MAX_REPLICAS).encode_to_vec());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_kib(pid);
    let (peak, answer) = peak_during(pid, Caller::new(channel).call(&largest)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(pid);
    println!(
        "- {MAX_REPLICAS}-replica call ({} B in; {}): before {}, peak {}, 2 s after {}",
        largest.len(),
        outcome(&answer),
        mib(before),
        mib(peak),
        mib(after)
    );
}
