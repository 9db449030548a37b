//! `modelplane-function standby`: what the fleet gateway routes a scaled-to-zero deployment's model to.
//!
//! A deployment whose `spec.autoscaling.minReplicas` is 0 keeps a standby ModelEndpoint pointing here under the
//! prefix `/<namespace>/<deployment>/v1`. ModelServices route it only while nothing else in its priority tier is
//! ready, so a caller's request for a model with no replica lands here instead of on no route at all. The
//! server answers 503 with `Retry-After` and an OpenAI-shaped error, and records when it last held a request for
//! each deployment. Those figures, scraped by the gateway cluster's Prometheus and remote-written with the rest of
//! the `modelplane_*` series, are the demand that KEDA's trigger reads to start the first replica.
//!
//! It never reads a request body, and tracks at most [`MAX_TRACKED`] deployments (the least recently asked for
//! go first), so no caller can grow its memory or its series without bound.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{SystemTime, UNIX_EPOCH},
};

use axum::{
    Router,
    extract::State,
    http::{StatusCode, Uri, header},
    response::{IntoResponse, Response},
    routing::get,
};
use modelplane_eks_api::names::{is_dns_label, is_dns_subdomain};
use serde_json::json;

/// Seconds a caller is asked to wait before retrying: a replica loads its weights in minutes, and each retry
/// renews the deployment's demand.
pub const RETRY_AFTER_SECONDS: u32 = 30;
/// Deployments tracked at once. Names are checked, but anyone reaching the server may invent them.
pub const MAX_TRACKED: usize = 4096;
/// When the server last held a request for a deployment (Unix seconds): KEDA's demand trigger.
pub const LAST_REQUEST_SERIES: &str = "modelplane_standby_last_request_timestamp_seconds";
/// Requests held per deployment, for dashboards.
pub const REQUESTS_SERIES: &str = "modelplane_standby_requests_total";

#[derive(Clone, Copy)]
struct Held {
    last: f64,
    count: u64,
}

/// The requests held so far, per (namespace, deployment).
#[derive(Default)]
pub struct Demand {
    held: Mutex<HashMap<(String, String), Held>>,
}

impl Demand {
    /// Records a request for `namespace/deployment` at `now` (Unix seconds), evicting the deployment asked for
    /// least recently when the table is full.
    pub fn record(&self, namespace: &str, deployment: &str, now: f64) {
        let mut held = self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = (namespace.to_owned(), deployment.to_owned());
        if !held.contains_key(&key) && held.len() >= MAX_TRACKED {
            let oldest = held
                .iter()
                .min_by(|a, b| a.1.last.total_cmp(&b.1.last))
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                held.remove(&oldest);
            }
        }
        let entry = held.entry(key).or_insert(Held { last: now, count: 0 });
        entry.last = entry.last.max(now);
        entry.count += 1;
    }

    /// The Prometheus text exposition of both series. Names are DNS labels and subdomains (checked on the way in),
    /// so no label value needs escaping.
    pub fn exposition(&self) -> String {
        let held = self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut rows: Vec<_> = held.iter().collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        let mut text = format!(
            "# HELP {LAST_REQUEST_SERIES} When a request for the deployment was last held while it had no replica.\n\
             # TYPE {LAST_REQUEST_SERIES} gauge\n"
        );
        for ((namespace, deployment), h) in &rows {
            text.push_str(&format!(
                "{LAST_REQUEST_SERIES}{{namespace=\"{namespace}\",deployment=\"{deployment}\"}} {:.3}\n",
                h.last
            ));
        }
        text.push_str(&format!(
            "# HELP {REQUESTS_SERIES} Requests held for the deployment while it had no replica.\n\
             # TYPE {REQUESTS_SERIES} counter\n"
        ));
        for ((namespace, deployment), h) in &rows {
            text.push_str(&format!(
                "{REQUESTS_SERIES}{{namespace=\"{namespace}\",deployment=\"{deployment}\"}} {}\n",
                h.count
            ));
        }
        text
    }
}

/// The deployment a held request's path names: `/<namespace>/<deployment>/...`, as the standby endpoint's prefix
/// sends it: a namespace (a DNS label) and a ModelDeployment's name (a DNS subdomain), as the API server admits
/// them.
pub fn deployment_of(path: &str) -> Option<(&str, &str)> {
    let mut parts = path.strip_prefix('/')?.splitn(3, '/');
    let namespace = parts.next()?;
    let deployment = parts.next()?;
    (is_dns_label(namespace) && is_dns_subdomain(deployment)).then_some((namespace, deployment))
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

fn openai_error(status: StatusCode, kind: &str, message: String) -> Response {
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": status.as_u16()}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn hold(State(demand): State<Arc<Demand>>, uri: Uri) -> Response {
    let Some((namespace, deployment)) = deployment_of(uri.path()) else {
        return openai_error(
            StatusCode::NOT_FOUND,
            "not_found_error",
            "no deployment at this path: the standby server answers /<namespace>/<deployment>/...".into(),
        );
    };
    demand.record(namespace, deployment, now());
    let mut response = openai_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "model_starting",
        format!(
            "ModelDeployment {namespace}/{deployment} has no replica serving yet: one is starting; retry after \
             {RETRY_AFTER_SECONDS} seconds"
        ),
    );
    if let Ok(value) = RETRY_AFTER_SECONDS.to_string().parse() {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

async fn metrics(State(demand): State<Arc<Demand>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        demand.exposition(),
    )
}

/// The server's routes: `/metrics`, `/healthz`, and every other path held.
pub fn router(demand: Arc<Demand>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .fallback(hold)
        .with_state(demand)
}

/// Serves until the process is stopped.
pub async fn serve(address: SocketAddr) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    tracing::info!(%address, "standby server listening");
    axum::serve(listener, router(Arc::default()))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_a_deployment_only_as_two_dns_labels() {
        assert_eq!(
            deployment_of("/ml-team/qwen3/v1/chat/completions"),
            Some(("ml-team", "qwen3"))
        );
        assert_eq!(deployment_of("/ml-team/qwen3"), Some(("ml-team", "qwen3")));
        assert_eq!(
            deployment_of("/ml-team/qwen3.v2/v1"),
            Some(("ml-team", "qwen3.v2"))
        );
        for bad in [
            "/",
            "/ml-team",
            "/ml-team//v1",
            "/ML/qwen3/v1",
            "/ml-team/qwen3%0a/v1",
            "/ml-team/-qwen3/v1",
            "/ml-team/qwen3\"}/v1",
            "/ml.team/qwen3/v1",
            "/ml-team/qwen3./v1",
            &format!("/{}/qwen3/v1", "a".repeat(64)),
        ] {
            assert_eq!(deployment_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_table_keeps_the_most_recently_asked_for_deployments() {
        let demand = Demand::default();
        for i in 0..MAX_TRACKED {
            demand.record("ns", &format!("d{i}"), i as f64);
        }
        demand.record("ns", "d0", 1e9);
        demand.record("ns", "newcomer", 1e9);
        let text = demand.exposition();
        assert!(
            text.contains("deployment=\"d0\"} 1000000000.000"),
            "renewed, kept"
        );
        assert!(!text.contains("deployment=\"d1\""), "the oldest went");
        assert!(text.contains("deployment=\"newcomer\""));
        assert_eq!(text.matches(REQUESTS_SERIES).count() - 2, MAX_TRACKED);
        assert!(text.contains(&format!(
            "{REQUESTS_SERIES}{{namespace=\"ns\",deployment=\"d0\"}} 2\n"
        )));
    }
}
