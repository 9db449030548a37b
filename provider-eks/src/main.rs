//! `modelplane-provider-eks [run]`: the provider. `modelplane-provider-eks crds`: print the CRDs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use modelplane_provider_eks::activation;
use modelplane_provider_eks::controllers::{self, Shared};
use modelplane_provider_eks::crds;
use modelplane_provider_eks::eks::clients::ClientCache;
use modelplane_provider_eks::eks::throttle::{Limits, Rate};
use modelplane_provider_eks::leader::Elector;
use modelplane_provider_eks::managed::reconciler::Timing;
use modelplane_provider_eks::metrics::{self, Metrics};
use modelplane_provider_eks::provider_config;
use tower::limit::ConcurrencyLimitLayer;

#[derive(Parser)]
#[command(version, about = "Crossplane provider for EKS clusters and node pools")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the provider (the default).
    Run,
    /// Print the CRDs generated from the Rust types, or write one file per CRD into --out-dir.
    Crds {
        #[arg(long)]
        out_dir: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Serve /metrics, /healthz and /readyz here.
    #[arg(long, env = "METRICS_ADDRESS", default_value = "0.0.0.0:8080")]
    metrics_address: SocketAddr,
    /// Seconds between observations of an up-to-date resource.
    #[arg(long, env = "POLL_INTERVAL_SECONDS", default_value_t = 60)]
    poll_interval_seconds: u64,
    /// Seconds between observations while AWS is creating, updating or deleting.
    #[arg(long, env = "BUSY_INTERVAL_SECONDS", default_value_t = 15)]
    busy_interval_seconds: u64,
    /// First retry after an error; doubles per consecutive failure up to --max-backoff-seconds.
    #[arg(long, env = "BACKOFF_SECONDS", default_value_t = 1)]
    backoff_seconds: u64,
    /// Longest wait between retries, and the wait after a permanent AWS error (validation, quota, ...).
    #[arg(long, env = "MAX_BACKOFF_SECONDS", default_value_t = 120)]
    max_backoff_seconds: u64,
    /// Longest wait between polls of a resource that stays in sync: the poll interval doubles per calm poll
    /// up to this (a spec change is acted on at once, whatever the interval).
    #[arg(long, env = "MAX_POLL_INTERVAL_SECONDS", default_value_t = 600)]
    max_poll_interval_seconds: u64,
    /// Client-side rate limit per (AWS account, region, EKS API): requests per second and burst.
    #[arg(long, env = "EKS_RATE", default_value_t = 10.0)]
    eks_rate: f64,
    #[arg(long, env = "EKS_BURST", default_value_t = 20.0)]
    eks_burst: f64,
    /// Per EC2 Describe* API (AWS documents a 100-token bucket refilled at 20/s).
    #[arg(long, env = "EC2_READ_RATE", default_value_t = 20.0)]
    ec2_read_rate: f64,
    #[arg(long, env = "EC2_READ_BURST", default_value_t = 100.0)]
    ec2_read_burst: f64,
    /// Per mutating EC2 API (launch templates).
    #[arg(long, env = "EC2_WRITE_RATE", default_value_t = 5.0)]
    ec2_write_rate: f64,
    #[arg(long, env = "EC2_WRITE_BURST", default_value_t = 50.0)]
    ec2_write_burst: f64,
    /// Reconciles of one kind in flight at once (the rest wait their turn in its queue), 0 for unbounded: caps
    /// the memory a whole fleet's activation takes, but a bound below the fleet's size queues creates behind busy
    /// polls before they reach the rate limiter, which serves creates first (see the README).
    #[arg(long, env = "MAX_CONCURRENT_RECONCILES", default_value_t = 0)]
    max_concurrent_reconciles: u16,
    /// Kubernetes API requests in flight at once (the rest wait their turn). Each one in flight holds a
    /// connection, and idle connections are kept: unbounded, a fleet's activation opened one per managed
    /// resource, most of the provider's peak memory. Watches count only until their response starts.
    #[arg(long, env = "KUBE_MAX_IN_FLIGHT", default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    kube_max_in_flight: u16,
    /// Reconciles of one kind doing Kubernetes work at once; the others wait, holding almost nothing, and a
    /// reconcile gives its place up as soon as it waits for an AWS token (so creates never queue behind polls
    /// waiting for theirs). Bounds the memory a fleet's activation takes without slowing it.
    #[arg(long, env = "ADMITTED_RECONCILES", default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    admitted_reconciles: u16,
    /// Start every controller once its CRD is Established, without waiting for ManagedResourceDefinitions
    /// (Crossplane < v2).
    #[arg(long, env = "ACTIVATE_ALL")]
    activate_all: bool,
    /// Act only while holding the Lease `modelplane-provider-eks` (run more than one replica safely).
    #[arg(long, env = "LEADER_ELECTION")]
    leader_election: bool,
    /// Namespace of the leader Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "crossplane-system")]
    namespace: String,
    /// This replica's name in the Lease.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    #[arg(long, env = "DEBUG")]
    debug: bool,
}

fn write_crds(out_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let Some(dir) = out_dir else {
        print!("{}", crds::all_yaml()?);
        return Ok(());
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for crd in crds::all() {
        let path = dir.join(crds::file_name(&crd));
        std::fs::write(&path, crds::to_yaml(&crd)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// The rate-limit flags, each checked: a rate must be positive and a burst at least one call.
fn limits(args: &RunArgs) -> anyhow::Result<Limits> {
    let rate = |name: &str, per_second: f64, burst: f64| {
        if per_second.is_finite() && per_second > 0.0 && burst.is_finite() && burst >= 1.0 {
            Ok(Rate { per_second, burst })
        } else {
            Err(anyhow::anyhow!(
                "--{name}-rate must be > 0 and --{name}-burst >= 1 (got {per_second} and {burst})"
            ))
        }
    };
    Ok(Limits {
        eks: rate("eks", args.eks_rate, args.eks_burst)?,
        ec2_read: rate("ec2-read", args.ec2_read_rate, args.ec2_read_burst)?,
        ec2_write: rate("ec2-write", args.ec2_write_rate, args.ec2_write_burst)?,
    })
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let filter = if args.debug {
        "info,modelplane_provider_eks=debug"
    } else {
        "info"
    };
    tracing_subscriber::fmt().with_env_filter(filter).json().init();
    // kube (ring) and the AWS SDK (aws-lc-rs) both link a rustls provider; rustls needs one chosen.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let config = kube::Config::infer()
        .await
        .context("cannot find a Kubernetes configuration")?;
    let kube = kube::client::ClientBuilder::try_from(config)
        .context("cannot build Kubernetes client")?
        .with_layer(&ConcurrencyLimitLayer::new(args.kube_max_in_flight.into()))
        .build();
    let metrics = Arc::new(Metrics::default());
    let shared = Shared {
        aws: Arc::new(ClientCache::with_limits(kube.clone(), limits(&args)?)),
        kube: kube.clone(),
        metrics: metrics.clone(),
        timing: Timing {
            poll: Duration::from_secs(args.poll_interval_seconds),
            busy: Duration::from_secs(args.busy_interval_seconds),
            backoff: Duration::from_secs(args.backoff_seconds),
            max_backoff: Duration::from_secs(args.max_backoff_seconds),
            max_poll: Duration::from_secs(args.max_poll_interval_seconds),
            jitter: 0.1,
            // Each kind's steady polls use one EKS API (DescribeCluster, DescribeNodegroup); a fifth of its rate
            // is left for creates, updates and deletes.
            steady_rate: args.eks_rate * 0.8,
        },
        concurrency: args.max_concurrent_reconciles,
        admitted: args.admitted_reconciles,
    };
    let server = tokio::spawn(metrics::serve(args.metrics_address, metrics));
    if args.leader_election {
        let identity = args
            .identity
            .clone()
            .unwrap_or_else(|| format!("provider-eks-{}", std::process::id()));
        let elector = Elector::new(kube.clone(), &args.namespace, &identity);
        tracing::info!(%identity, "waiting to lead");
        elector.acquire().await;
        tracing::info!(%identity, "leading");
        tokio::spawn(async move {
            elector.keep().await;
            // Another replica may act from now on: stop at once rather than race it.
            tracing::error!("lost the leader Lease; exiting");
            std::process::exit(1);
        });
    }
    // Configs are guarded whether or not any managed kind is active: a usage may outlive an activation.
    tokio::spawn(provider_config::run(kube.clone()));
    activation::run(kube, args.activate_all, |kind| {
        controllers::spawn(&shared, kind);
    })
    .await;
    tokio::select! {
        served = server => served.context("metrics server stopped")?.context("metrics server failed"),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Crds { out_dir }) => write_crds(out_dir),
        Some(Command::Run) | None => run(cli.run).await,
    }
}
