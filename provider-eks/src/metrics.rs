//! Prometheus metrics and the health endpoints, served on one small HTTP listener.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabel {
    kind: &'static str,
    error: &'static str,
}

pub struct Metrics {
    registry: Registry,
    reconciles: Family<KindLabel, Counter>,
    errors: Family<ErrorLabel, Counter>,
    active_controllers: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("modelplane_provider_eks");
        let reconciles = Family::<KindLabel, Counter>::default();
        let errors = Family::<ErrorLabel, Counter>::default();
        let active_controllers = Gauge::default();
        registry.register("reconciles", "Reconciles started, per kind", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, per kind and error class",
            errors.clone(),
        );
        registry.register(
            "active_controllers",
            "Controllers started because their ManagedResourceDefinition is Active",
            active_controllers.clone(),
        );
        Self {
            registry,
            reconciles,
            errors,
            active_controllers,
        }
    }
}

impl Metrics {
    pub fn reconcile(&self, kind: &'static str) {
        self.reconciles.get_or_create(&KindLabel { kind }).inc();
    }

    pub fn reconcile_error(&self, kind: &'static str, error: &'static str) {
        self.errors.get_or_create(&ErrorLabel { kind, error }).inc();
    }

    pub fn controller_started(&self) {
        self.active_controllers.inc();
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Encoding into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

async fn metrics(State(metrics): State<Arc<Metrics>>) -> String {
    metrics.encode()
}

async fn healthz() -> (StatusCode, &'static str) {
    (StatusCode::OK, "ok")
}

/// Serves `/metrics`, `/healthz` and `/readyz` until the process ends.
pub async fn serve(address: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(self::metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(healthz))
        .with_state(metrics);
    let listener = tokio::net::TcpListener::bind(address).await?;
    axum::serve(listener, app).await
}
