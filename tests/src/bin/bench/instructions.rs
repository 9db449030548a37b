//! Instructions per RunFunction, counted by callgrind: on a shared machine wall-clock numbers drift with the load,
//! instruction counts do not. Each server runs twice under `valgrind --tool=callgrind`, once answering `calls`
//! requests and once `2 × calls`, after the same warm-up; the difference between the two totals, divided by
//! `calls`, is what one more request costs the whole process (gRPC, HTTP/2, decode, work, encode), with start-up
//! and warm-up cancelling out.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use bytes::Bytes;
use modelplane_function::render::RequestBuilder;
use modelplane_tests::fleet::{Scenario, model_deployment, placed_gang_request};
use prost::Message;

use crate::{
    load::Caller,
    servers::{self, Spec},
};

/// Calls before counting starts: fills the server's thread pools, connection buffers and caches.
const WARM_UP: usize = 50;

/// How long a server under callgrind may take to stop and write its counts.
const EXIT_LIMIT: Duration = Duration::from_secs(60);

/// One request stream to count.
pub struct Stream {
    pub label: &'static str,
    /// Request `i` of the stream; the same index always gives the same bytes.
    pub nth: fn(usize) -> Bytes,
}

fn repeated(scenario: Scenario) -> Bytes {
    Bytes::from(scenario.encoded())
}

/// The gang composite with a label of its own per call, so every call is the first the server sees of that
/// composite and pays its full XRD check (Crossplane sends a composite it has not checked before after any edit).
fn distinct_gang(i: usize) -> Bytes {
    Bytes::from(RequestBuilder::new(&edited_gang(i)).build().encode_to_vec())
}

/// The gang composite as after edit `i`: a label of its own, so its content differs from every other edit's.
fn edited_gang(i: usize) -> serde_json::Value {
    let mut composite = model_deployment(1);
    composite["metadata"]["labels"] = serde_json::json!({"bench.modelplane.ai/edit": i.to_string()});
    composite
}

/// The gang's first placement (its clusters, classes and cache answered) with a label of its own per call: the
/// first call that composes, paying the XRD check and the whole composition.
fn distinct_placed_gang(i: usize) -> Bytes {
    Bytes::from(placed_gang_request(&edited_gang(i)).encode_to_vec())
}

/// The gang composite with only its resource version and status moved per call, as after each status write of a
/// reconcile: the content the check reads is the same, so it is checked once.
fn status_moved_gang(i: usize) -> Bytes {
    let mut composite = model_deployment(1);
    composite["metadata"]["resourceVersion"] = i.to_string().into();
    composite["status"] = serde_json::json!({"placedReplicas": 0, "observedCalls": i});
    Bytes::from(RequestBuilder::new(&composite).build().encode_to_vec())
}

pub const STREAMS: [Stream; 6] = [
    Stream {
        label: "trivial XR, same bytes every call",
        nth: |_| repeated(Scenario::Trivial),
    },
    Stream {
        label: "1-replica 2-node gang, same bytes every call (repeat call)",
        nth: |_| repeated(Scenario::Gang),
    },
    Stream {
        label: "1-replica 2-node gang, only status moved every call",
        nth: status_moved_gang,
    },
    Stream {
        label: "1-replica 2-node gang, a new composite every call (first call)",
        nth: distinct_gang,
    },
    Stream {
        label: "1-replica 2-node gang, first placement, same bytes every call",
        nth: |_| repeated(Scenario::PlacedGang),
    },
    Stream {
        label: "1-replica 2-node gang, first placement, a new composite every call",
        nth: distinct_placed_gang,
    },
];

/// Instructions the server process spent per request of `stream`, as a whole number.
pub async fn per_request(
    valgrind: &Path,
    spec: &Spec,
    stream: &Stream,
    calls: usize,
    log_dir: &Path,
) -> Result<u64, String> {
    let once = total(valgrind, spec, stream, calls, log_dir).await?;
    let twice = total(valgrind, spec, stream, 2 * calls, log_dir).await?;
    let extra = twice.checked_sub(once).ok_or_else(|| {
        format!(
            "{}: {} calls counted fewer instructions ({twice}) than {calls} ({once})",
            spec.name,
            2 * calls
        )
    })?;
    Ok(extra / calls as u64)
}

async fn total(
    valgrind: &Path,
    spec: &Spec,
    stream: &Stream,
    calls: usize,
    log_dir: &Path,
) -> Result<u64, String> {
    let out = log_dir.join(format!("callgrind-{}-{}.out", spec.name.replace(' ', "-"), calls));
    let mut args = vec![
        "--tool=callgrind".to_owned(),
        // Without it a server whose threads hand work to each other can stall under valgrind's scheduler.
        "--fair-sched=yes".to_owned(),
        format!("--callgrind-out-file={}", out.display()),
        spec.program.display().to_string(),
    ];
    args.extend(spec.args.iter().cloned());
    let wrapped = Spec {
        name: spec.name,
        program: valgrind.to_path_buf(),
        args,
    };
    let mut server = servers::start(&wrapped, log_dir)?;
    let channel = servers::ready(&mut server, &(stream.nth)(0)).await?;
    let mut caller = Caller::new(&channel);
    // Bytes are built before the server is called, so the client's own work happens outside the counted calls'
    // time (it runs in another process anyway) and the same index always means the same request.
    let requests: Vec<Bytes> = (1..=WARM_UP + calls).map(stream.nth).collect();
    for request in &requests {
        caller
            .call(request)
            .await
            .map_err(|e| format!("{}: call failed under callgrind: {e}", spec.name))?;
    }
    drop(caller);
    drop(channel);
    // Callgrind writes its totals when the process exits; SIGTERM lets it (SIGKILL would not).
    let pid = server.pid().to_string();
    Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .map_err(|e| format!("cannot signal {}: {e}", spec.name))?;
    server.exited(EXIT_LIMIT).await?;
    summary(&out)
}

/// The `summary:` (or `totals:`) line of a callgrind output file: instructions executed in all.
fn summary(out: &PathBuf) -> Result<u64, String> {
    let text = std::fs::read_to_string(out).map_err(|e| format!("cannot read {}: {e}", out.display()))?;
    text.lines()
        .find_map(|line| {
            line.strip_prefix("summary:")
                .or_else(|| line.strip_prefix("totals:"))
        })
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("{} has no summary line", out.display()))
}
