//! `modelplane-function`: `serve` (the default, as Crossplane runs it) or `render` (offline, same handler).

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::{Args, Parser, Subcommand, builder::BoolishValueParser};
use modelplane_function::{
    fleet_metrics,
    render::{self, Format, RenderError, command::Rendered},
    server::{self, ConnectionLimits, ServeOptions},
};

// Composing is allocation-bound; see `modelplane_function::memory` for why mimalloc, and why here.
#[global_allocator]
static ALLOCATOR: modelplane_function::memory::Mimalloc = modelplane_function::memory::Mimalloc;

#[derive(Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand the function serves, as Crossplane starts it.
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve RunFunction over gRPC (what Crossplane runs).
    Serve(ServeArgs),
    /// Run one composite through the function offline and print what it composes, like `crossplane render`.
    Render(RenderArgs),
    /// Answer requests for scaled-to-zero deployments with 503 and Retry-After, and report them as demand (what
    /// an InferenceGateway runs on its cluster; docs/metrics.md).
    Standby(StandbyArgs),
    /// Report why engine pods are not ready, one ConfigMap per workload, for ModelDeployments to read (what each
    /// workload cluster runs; docs/api.md).
    ReportPods(ReportPodsArgs),
    /// Download a Hugging Face repo's revision into the Hub cache layout, checked and resumable, reporting
    /// progress (what a ModelCache's hydration Job runs; docs/api.md).
    Stage(StageArgs),
}

#[derive(Args)]
struct ReportPodsArgs {
    /// The label every engine pod carries; its value names the workload.
    #[arg(long, env = "SELECTOR", default_value = modelplane_function::workload::well_known::WORKLOAD_LABEL)]
    selector: String,
    /// Seconds between two rounds of writing the reports that changed.
    #[arg(long, env = "PERIOD_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    period_seconds: u64,
}

#[derive(Args)]
struct StageArgs {
    /// Repo id, `org/name`.
    #[arg(long, env = "REPO")]
    repo: String,
    /// Branch, tag or commit.
    #[arg(long, env = "REVISION", default_value = "main")]
    revision: String,
    /// The cache folder engines read (`HF_HUB_CACHE`).
    #[arg(long, env = "HF_HUB_CACHE")]
    cache_dir: PathBuf,
    /// The Hub, or a mirror of its API.
    #[arg(long, env = "HF_ENDPOINT", default_value = "https://huggingface.co")]
    endpoint: String,
    /// Files downloading at once.
    #[arg(long, env = "STAGE_CONCURRENCY", default_value_t = 8)]
    concurrency: usize,
    /// Attempts per request before this run gives up (the Job then starts another pod, which resumes).
    #[arg(long, env = "STAGE_ATTEMPTS", default_value_t = 6)]
    attempts: u32,
    /// Milliseconds before the second attempt, doubled for each one after.
    #[arg(long, env = "STAGE_BACKOFF_MS", default_value_t = 1000)]
    backoff_ms: u64,
    /// The longest wait between two attempts in milliseconds, the Hub's Retry-After included.
    #[arg(long, env = "STAGE_MAX_BACKOFF_MS", default_value_t = 60_000)]
    max_backoff_ms: u64,
    /// ConfigMap (in --progress-namespace) whose data receives the progress, through the in-cluster config.
    #[arg(long, env = "PROGRESS_CONFIGMAP")]
    progress_configmap: Option<String>,
    #[arg(long, env = "PROGRESS_NAMESPACE", default_value = "default")]
    progress_namespace: String,
    /// A file the progress is written to as JSON, replaced at each report.
    #[arg(long, env = "PROGRESS_FILE")]
    progress_file: Option<PathBuf>,
    /// Seconds between two progress reports.
    #[arg(long, env = "PROGRESS_INTERVAL_SECONDS", default_value_t = 5)]
    progress_interval_seconds: u64,
}

#[derive(Args)]
struct StandbyArgs {
    /// Address to listen on.
    #[arg(long, env = "ADDRESS", default_value = "0.0.0.0:8080")]
    address: String,
}

#[derive(Args, Clone)]
struct ServeArgs {
    /// Address to listen on; `:9443` means every interface.
    #[arg(long, env = "ADDRESS", default_value = "0.0.0.0:9443")]
    address: String,
    /// Directory holding tls.crt, tls.key and ca.crt for mutual TLS.
    #[arg(long, env = "TLS_SERVER_CERTS_DIR")]
    tls_certs_dir: Option<PathBuf>,
    /// Serve plaintext gRPC (for `crossplane render`'s Development runtime). Wins over --tls-certs-dir.
    /// INSECURE accepts true/false, 1/0, yes/no, on/off.
    #[arg(long, env = "INSECURE", value_parser = BoolishValueParser::new(), num_args = 0..=1,
          default_value = "false", default_missing_value = "true")]
    insecure: bool,
    /// Log at debug level. DEBUG accepts true/false, 1/0, yes/no, on/off.
    #[arg(long, short = 'd', env = "DEBUG", value_parser = BoolishValueParser::new(), num_args = 0..=1,
          default_value = "false", default_missing_value = "true")]
    debug: bool,
    /// Largest request accepted, in MiB. Fleet-sized observed states can pass Crossplane's 4 MiB default.
    #[arg(long, env = "MAX_RECV_MESSAGE_SIZE", default_value_t = 16)]
    max_recv_message_size: usize,
    /// Connections open at once; more wait in the kernel's backlog, unaccepted.
    #[arg(long, env = "MAX_CONNECTIONS", default_value_t = ConnectionLimits::default().max_connections)]
    max_connections: usize,
    /// Calls in flight on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS).
    #[arg(long, env = "MAX_CONCURRENT_STREAMS",
          default_value_t = ConnectionLimits::default().max_concurrent_streams)]
    max_concurrent_streams: u32,
    /// Calls composing at once across all connections; the others wait their turn.
    #[arg(long, env = "MAX_CONCURRENT_CALLS", default_value_t = ConnectionLimits::default().max_concurrent_calls)]
    max_concurrent_calls: usize,
    /// Seconds a new connection has to send the HTTP/2 preface (or finish the TLS handshake) before it is closed.
    #[arg(long, env = "HANDSHAKE_TIMEOUT_SECONDS",
          default_value_t = ConnectionLimits::default().handshake_timeout.as_secs())]
    handshake_timeout_seconds: u64,
    /// The Prometheus query API holding every cluster's `modelplane_*` series, read for ModelDeployments'
    /// serving figures and `Serving` condition (docs/metrics.md). Empty: read none. Plain http only.
    #[arg(long, env = "FLEET_METRICS_URL", default_value = DEFAULT_FLEET_METRICS)]
    fleet_metrics_url: String,
    /// Requests under this many bytes compose on the gRPC worker that received them, saving two thread
    /// wake-ups; larger ones on a composing thread of their own. 0 composes every request on its own thread.
    #[arg(long, env = "COMPOSE_INLINE_BELOW_BYTES", default_value_t = server::COMPOSE_INLINE_BELOW)]
    compose_inline_below_bytes: usize,
    /// Seconds between two samples of the fleet's metrics (at least 5).
    #[arg(long, env = "FLEET_METRICS_INTERVAL_SECONDS", default_value_t = 30)]
    fleet_metrics_interval_seconds: u64,
}

/// Where the control plane's Prometheus answers when installed as docs/metrics.md says (the same default as
/// `spec.autoscaling.metricsServer`).
const DEFAULT_FLEET_METRICS: &str = "http://prometheus-operated.monitoring.svc:9090";

#[derive(Args)]
struct RenderArgs {
    /// The composite resource to render.
    composite: PathBuf,
    /// Files or directories with resources the function may require (InferenceClasses, InferenceClusters...).
    #[arg(long = "required", short = 'e')]
    required: Vec<PathBuf>,
    /// Files or directories with the composed resources as they exist now.
    #[arg(long = "observed", short = 'b')]
    observed: Vec<PathBuf>,
    /// A file with the pipeline context object to start from.
    #[arg(long)]
    context: Option<PathBuf>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "yaml")]
    output: Format,
    /// Send the requests to a running server (plaintext) instead of running the handler in-process.
    #[arg(long)]
    function_address: Option<String>,
    /// Simulate repeated reconciles: observe what each round composed as Ready, with invented provider status,
    /// and print where the composition settles (YAML, under a header saying it is a simulation). Modelplane
    /// composites among --required without a status are simulated alongside. Exits 4 if it never gets Ready.
    #[arg(long)]
    until_ready: bool,
    /// With --until-ready (implied): print each round's new resources and what the composite still waited for.
    #[arg(long)]
    stages: bool,
    /// Sample this Prometheus query API once first, so ModelDeployments show their serving figures and
    /// `Serving` condition as a server polling it would.
    #[arg(long)]
    fleet_metrics_url: Option<String>,
}

fn main() -> ExitCode {
    // The fleet metrics poller's HTTP client asks rustls for the process's crypto provider whenever a build turns
    // its TLS on (a workspace build unifies a test dependency's TLS feature into it), and panics without one.
    // Name ring, the provider the server's TLS already uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    // Serving composes small calls on the runtime's workers, which then need a call's stack.
    let runtime = match server::runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Some(Command::Render(args)) => {
            init_logging(false, true);
            runtime.block_on(render_command(args))
        }
        Some(Command::Serve(args)) => runtime.block_on(serve_command(args)),
        Some(Command::Standby(args)) => runtime.block_on(standby_command(args)),
        Some(Command::ReportPods(args)) => runtime.block_on(report_pods_command(args)),
        Some(Command::Stage(args)) => runtime.block_on(stage_command(args)),
        None => runtime.block_on(serve_command(cli.serve)),
    }
}

fn init_logging(debug: bool, to_stderr_plain: bool) {
    // --debug is for our own events; the HTTP/2 and TLS crates at debug log every frame.
    let level = if debug {
        "info,modelplane_function=debug"
    } else {
        "info"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(if to_stderr_plain { "error" } else { level })
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if to_stderr_plain {
        builder.init()
    } else {
        builder.json().flatten_event(true).with_current_span(true).init()
    }
}

async fn report_pods_command(args: ReportPodsArgs) -> ExitCode {
    init_logging(false, false);
    let options = modelplane_function::pod_report::Options {
        selector: args.selector,
        period: std::time::Duration::from_secs(args.period_seconds),
    };
    match modelplane_function::pod_report::run(options).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "pod reporter failed");
            ExitCode::FAILURE
        }
    }
}

async fn standby_command(args: StandbyArgs) -> ExitCode {
    init_logging(false, false);
    let address = match parse_address(&args.address) {
        Ok(address) => address,
        Err(e) => {
            tracing::error!(error = %e, "invalid --address");
            return ExitCode::FAILURE;
        }
    };
    match modelplane_function::standby::serve(address).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "standby server failed");
            ExitCode::FAILURE
        }
    }
}

async fn stage_command(args: StageArgs) -> ExitCode {
    use modelplane_function::stage::{self, Failure, progress::Sink};
    init_logging(false, false);
    let mut sinks = Vec::new();
    if let Some(name) = &args.progress_configmap {
        match Sink::config_map(&args.progress_namespace, name).await {
            Ok(sink) => sinks.push(sink),
            // Staging matters more than reporting it.
            Err(e) => tracing::warn!(error = %e, "no Kubernetes client: progress goes to the log only"),
        }
    }
    if let Some(path) = args.progress_file {
        sinks.push(Sink::File(path));
    }
    let options = stage::Options {
        repo: args.repo,
        revision: args.revision,
        cache_dir: args.cache_dir,
        endpoint: args.endpoint,
        // Read here, never a flag: a token on a command line is visible to every process on the node.
        token: std::env::var("HF_TOKEN").ok(),
        concurrency: args.concurrency,
        attempts: args.attempts,
        backoff: std::time::Duration::from_millis(args.backoff_ms),
        max_backoff: std::time::Duration::from_millis(args.max_backoff_ms),
        sinks,
        report_interval: std::time::Duration::from_secs(args.progress_interval_seconds.max(1)),
    };
    match stage::run(options).await {
        Ok(snapshot) => {
            tracing::info!(snapshot = %snapshot.display(), "staged");
            ExitCode::SUCCESS
        }
        Err(Failure::Permanent(message)) => {
            tracing::error!(error = %message, "staging failed for good");
            ExitCode::from(stage::EXIT_FINAL)
        }
        Err(failure) => {
            tracing::error!(error = %failure.message(), "staging failed; another attempt resumes");
            ExitCode::FAILURE
        }
    }
}

async fn serve_command(args: ServeArgs) -> ExitCode {
    init_logging(args.debug, false);
    let address = match parse_address(&args.address) {
        Ok(address) => address,
        Err(e) => {
            tracing::error!(error = %e, "invalid --address");
            return ExitCode::FAILURE;
        }
    };
    let tls_certs_dir = match (args.insecure, args.tls_certs_dir) {
        (true, _) => None,
        (false, Some(dir)) => Some(dir),
        (false, None) => {
            tracing::error!(
                "no credentials were provided: supply --tls-certs-dir (or TLS_SERVER_CERTS_DIR) or use --insecure"
            );
            return ExitCode::FAILURE;
        }
    };
    if !args.fleet_metrics_url.is_empty() {
        let poll = fleet_metrics::poll::Options {
            url: args.fleet_metrics_url.clone(),
            interval: std::time::Duration::from_secs(args.fleet_metrics_interval_seconds),
        };
        if let Err(e) = poll.check() {
            tracing::error!(error = %e, "invalid fleet metrics options");
            return ExitCode::FAILURE;
        }
        tokio::spawn(fleet_metrics::poll::run(poll));
    }
    let options = ServeOptions {
        address,
        tls_certs_dir,
        max_recv_message_size: args.max_recv_message_size.saturating_mul(1024 * 1024),
        limits: ConnectionLimits {
            max_connections: args.max_connections,
            max_concurrent_streams: args.max_concurrent_streams,
            max_concurrent_calls: args.max_concurrent_calls,
            handshake_timeout: std::time::Duration::from_secs(args.handshake_timeout_seconds),
        },
        compose_inline_below: args.compose_inline_below_bytes,
    };
    match server::serve(options).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "server failed");
            ExitCode::FAILURE
        }
    }
}

/// Accepts Go-style `:9443` as well as `host:port`.
fn parse_address(address: &str) -> Result<SocketAddr, std::net::AddrParseError> {
    match address.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}").parse(),
        None => address.parse(),
    }
}

async fn render_command(args: RenderArgs) -> ExitCode {
    let options = render::command::Options {
        composite: args.composite,
        required: args.required,
        observed: args.observed,
        context: args.context,
        output: args.output,
        function_address: args.function_address,
        until_ready: args.until_ready,
        stages: args.stages,
        fleet_metrics_url: args.fleet_metrics_url,
    };
    match render::command::to_stdout(options).await {
        Ok(Rendered::Composed) => ExitCode::SUCCESS,
        // As Crossplane's render exits on a FATAL result.
        Ok(Rendered::Fatal) => ExitCode::from(3),
        Ok(Rendered::NotReady) => ExitCode::from(4),
        // As `yes | head` ends: the reader took what it wanted.
        Err(RenderError::ReaderGone) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("render: {e}");
            ExitCode::FAILURE
        }
    }
}
