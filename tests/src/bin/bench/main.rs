//! RunFunction round trips over loopback: our server against no-op functions on Crossplane's Rust and Python
//! SDKs, in one run, at 1 and 16 concurrent callers, for the requests in `modelplane_tests::fleet` (`--requests`
//! picks the standard set, the fleet-scale reconciles of `modelplane_tests::fleet::scale`, or both).
//!
//! Run it through `tests/bench.sh`, which builds the three servers and the Python venv. Every call count and the
//! time spent per measurement are bounded, and only loopback addresses are used.

mod instructions;
mod limits;
mod load;
mod micro;
mod report;
mod servers;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use bytes::Bytes;
use clap::{Parser, ValueEnum};
use modelplane_tests::fleet::{FLEET_CLUSTERS, Scenario};
use tonic::transport::Channel;

use crate::{
    load::{Caller, Load},
    report::Row,
    servers::Spec,
};

// The in-process decode comparison (`micro`) runs on the server's allocator, as the server does.
#[global_allocator]
static ALLOCATOR: modelplane_function::memory::Mimalloc = modelplane_function::memory::Mimalloc;

#[derive(Parser)]
#[command(about = "Benchmark RunFunction against no-op functions on Crossplane's Rust and Python SDKs")]
struct Cli {
    /// The modelplane-function binary (release build).
    #[arg(long, required_unless_present = "micro_only")]
    ours: Option<PathBuf>,
    /// The no-op function built on crates.io function-sdk-rust (tests/peers/noop-rust).
    #[arg(long, required_unless_present = "micro_only")]
    rust_noop: Option<PathBuf>,
    /// Python interpreter with crossplane-function-sdk-python installed.
    #[arg(long, required_unless_present_any = ["micro_only", "instructions"])]
    python: Option<PathBuf>,
    /// The Python no-op function (tests/peers/noop_python.py).
    #[arg(long, required_unless_present_any = ["micro_only", "instructions"])]
    python_noop: Option<PathBuf>,
    /// Which requests to send.
    #[arg(long, value_enum, default_value_t = RequestSet::Standard)]
    requests: RequestSet,
    /// Multiplies every call count; 0.1 gives a quick smoke run.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Only the in-process decode comparison; starts no server (handy under a profiler).
    #[arg(long)]
    micro_only: bool,
    /// Instead of timing, count instructions per request under callgrind for ours and the Rust no-op (the
    /// measure that holds on a loaded machine); the Python flags are then not needed.
    #[arg(long)]
    instructions: bool,
    /// Requests counted per server and stream with --instructions (each server runs this many and twice as many).
    #[arg(long, default_value_t = 200)]
    instruction_calls: usize,
    /// The valgrind program for --instructions.
    #[arg(long, default_value = "valgrind")]
    valgrind: PathBuf,
    /// Where the servers' logs go.
    #[arg(long, default_value_os_t = std::env::temp_dir().join("modelplane-bench"))]
    log_dir: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RequestSet {
    /// The trivial XR, the gang's first call and the two fleets (`Scenario::ALL`).
    Standard,
    /// One ModelDeployment reconcile, settled and waiting, with 0, 1,000 and 10,000 other deployments.
    FleetScale,
    /// One settled InferenceCluster reconcile per cloud (the 100-cluster mixed-cloud fleet's unit).
    Clouds,
    /// All of the above.
    All,
}

impl RequestSet {
    fn scenarios(self) -> Vec<Scenario> {
        let standard = || Scenario::ALL.into_iter();
        match self {
            RequestSet::Standard => standard().collect(),
            RequestSet::FleetScale => Scenario::fleet_scale().collect(),
            RequestSet::Clouds => Scenario::clouds().collect(),
            RequestSet::All => standard()
                .chain(Scenario::fleet_scale())
                .chain(Scenario::clouds())
                .collect(),
        }
    }
}

/// Calls per measurement. Small requests take ~0.2-0.6 ms, fleet requests 5-30 ms, so the counts differ to keep
/// the whole run to a few minutes; `TIME_LIMIT` caps any one measurement regardless.
struct Plan {
    warmup: usize,
    sequential: usize,
    concurrent: usize,
}

const CONCURRENCY: [usize; 2] = [1, 16];
const TIME_LIMIT: Duration = Duration::from_secs(20);

fn plan(scenario: Scenario) -> Plan {
    match scenario {
        // A settled fleet-scale reconcile is 6-15 KB and composes one replica: a small request.
        Scenario::Trivial
        | Scenario::Gang
        | Scenario::PlacedGang
        | Scenario::FleetScale { waiting: false, .. } => Plan {
            warmup: 300,
            sequential: 2_000,
            concurrent: 20_000,
        },
        Scenario::Fleet { clusters } if clusters < FLEET_CLUSTERS => Plan {
            warmup: 30,
            sequential: 300,
            concurrent: 1_600,
        },
        // Waiting reconciles carry every cluster's ledger: 88 KB with no others, ~900 KB with 10,000.
        Scenario::FleetScale {
            others,
            waiting: true,
        } if others < 10_000 => Plan {
            warmup: 30,
            sequential: 300,
            concurrent: 1_600,
        },
        // A settled cluster carries its ~100 composed resources back as observed: 200-400 KB.
        Scenario::Fleet { .. }
        | Scenario::SettledFleet { .. }
        | Scenario::FleetScale { .. }
        | Scenario::SettledCluster { .. } => Plan {
            warmup: 15,
            sequential: 150,
            concurrent: 800,
        },
    }
}

struct Request {
    scenario: Scenario,
    tag: String,
    bytes: Bytes,
}

fn requests(set: RequestSet) -> Vec<Request> {
    set.scenarios()
        .into_iter()
        .map(|scenario| {
            let request = scenario.request();
            let tag = request.meta.as_ref().map(|m| m.tag.clone()).unwrap_or_default();
            let bytes = Bytes::from(prost::Message::encode_to_vec(&request));
            Request { scenario, tag, bytes }
        })
        .collect()
}

fn given(path: &Option<PathBuf>, flag: &str) -> Result<PathBuf, String> {
    path.clone().ok_or_else(|| format!("{flag} is required"))
}

fn scaled(calls: usize, scale: f64) -> usize {
    ((calls as f64 * scale).round() as usize).max(1)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Stopping early must still stop the servers: leaving `run` drops them, and dropping kills them.
    let outcome = tokio::select! {
        outcome = run(&cli) => outcome,
        () = interrupted() => Err("interrupted; servers stopped".into()),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("bench: some calls failed; the numbers above do not stand");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn interrupted() {
    #[cfg(unix)]
    if let Ok(mut terminate) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        tokio::select! {
            _ = terminate.recv() => {},
            _ = tokio::signal::ctrl_c() => {},
        }
        return;
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Returns whether every call succeeded.
async fn run(cli: &Cli) -> Result<bool, String> {
    if cli.instructions {
        return count_instructions(cli).await.map(|()| true);
    }
    let requests = requests(cli.requests);

    // In-process numbers first, while no server competes for the cores.
    for request in &requests {
        if let Scenario::Fleet { .. } = request.scenario {
            micro::print(&request.scenario.label(), &request.bytes, scaled(50, cli.scale));
        }
    }

    limits::print_cel();

    if cli.micro_only {
        return Ok(true);
    }
    std::fs::create_dir_all(&cli.log_dir)
        .map_err(|e| format!("cannot create {}: {e}", cli.log_dir.display()))?;
    let [ours, rust_noop] = rust_specs(cli)?;
    let specs = [
        ours,
        rust_noop,
        Spec {
            name: "python-sdk no-op",
            program: given(&cli.python, "--python")?,
            args: vec![
                given(&cli.python_noop, "--python-noop")?.display().to_string(),
                "--insecure".into(),
            ],
        },
    ];
    let mut running = Vec::new();
    for spec in &specs {
        running.push(servers::start(spec, &cli.log_dir)?);
    }
    let mut channels = Vec::new();
    for server in &mut running {
        channels.push(servers::ready(server, &requests[0].bytes).await?);
        println!(
            "started {} on 127.0.0.1:{} (log: {})",
            server.name,
            server.port,
            server.log.display()
        );
    }

    let mut rows = Vec::new();
    let mut answers = Vec::new();
    for request in &requests {
        let plan = plan(request.scenario);
        for (server, channel) in running.iter().zip(&channels) {
            let answer = warm_up(channel, &request.bytes, scaled(plan.warmup, cli.scale)).await?;
            answers.push(format!(
                "- {}, {}: {}",
                request.scenario.label(),
                server.name,
                report::describe_answer(&request.tag, &answer)
            ));
        }
        for concurrency in CONCURRENCY {
            let calls = if concurrency == 1 {
                plan.sequential
            } else {
                plan.concurrent
            };
            let load = Load {
                concurrency,
                calls: scaled(calls, cli.scale),
                time_limit: TIME_LIMIT,
            };
            let mut samples = Vec::new();
            for channel in &channels {
                samples.push(load::measure(channel, &request.bytes, load).await);
            }
            rows.push(Row {
                scenario: request.scenario,
                request: request.scenario.label(),
                request_bytes: request.bytes.len(),
                concurrency,
                samples,
            });
        }
    }
    if let (Some(ours), Some(channel), Some(fleet)) = (
        running.first(),
        channels.first(),
        requests
            .iter()
            .rfind(|r| matches!(r.scenario, Scenario::Fleet { .. })),
    ) {
        limits::print_memory(ours, channel, &fleet.bytes, cli.scale).await;
    }
    drop(running);

    let names: Vec<&str> = specs.iter().map(|spec| spec.name).collect();
    println!();
    report::print_table(&names, &rows);
    report::print_fleet_scale(&names, &rows);
    report::print_clouds(&names, &rows);
    println!("\nWhat each server answered (one response per request, decoded after warm-up):");
    for answer in &answers {
        println!("{answer}");
    }
    let mut all_succeeded = true;
    for row in &rows {
        for (name, sample) in names.iter().zip(&row.samples) {
            if let Some(error) = &sample.first_error {
                all_succeeded = false;
                eprintln!(
                    "{} x{} on {name}: {} errors, first: {error}",
                    row.request, row.concurrency, sample.errors
                );
            }
        }
    }
    Ok(all_succeeded)
}

/// Our server and the function-sdk-rust no-op, with the flags each needs.
fn rust_specs(cli: &Cli) -> Result<[Spec; 2], String> {
    Ok([
        Spec {
            name: "ours",
            program: given(&cli.ours, "--ours")?,
            args: vec!["serve".into(), "--insecure".into()],
        },
        Spec {
            name: "rust-sdk no-op",
            program: given(&cli.rust_noop, "--rust-noop")?,
            args: vec!["--insecure".into(), "--metrics-address=".into()],
        },
    ])
}

/// Prints instructions per request for ours and the Rust SDK no-op, for each of [`instructions::STREAMS`].
async fn count_instructions(cli: &Cli) -> Result<(), String> {
    std::fs::create_dir_all(&cli.log_dir)
        .map_err(|e| format!("cannot create {}: {e}", cli.log_dir.display()))?;
    let specs = rust_specs(cli)?;
    println!(
        "instructions per request (callgrind, whole server process, {} counted calls):",
        cli.instruction_calls
    );
    for stream in &instructions::STREAMS {
        let mut counts = Vec::new();
        for spec in &specs {
            counts.push(
                instructions::per_request(&cli.valgrind, spec, stream, cli.instruction_calls, &cli.log_dir)
                    .await?,
            );
        }
        let ratio = counts[0] as f64 / counts[1].max(1) as f64;
        println!(
            "- {}: ours {}, rust-sdk no-op {} ({ratio:.2}x)",
            stream.label, counts[0], counts[1]
        );
    }
    Ok(())
}

/// Sends `calls` requests one after another and returns the last answer.
async fn warm_up(channel: &Channel, request: &Bytes, calls: usize) -> Result<Bytes, String> {
    let mut caller = Caller::new(channel);
    let mut last = Bytes::new();
    for _ in 0..calls {
        last = caller
            .call(request)
            .await
            .map_err(|e| format!("warm-up call failed: {e}"))?;
    }
    Ok(last)
}
