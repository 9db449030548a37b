//! Samples the fleet's Prometheus: fourteen instant queries per interval (seven figures, each per replica and per
//! deployment), whatever the size of the fleet. Every answer is bounded before it is read: its bytes, its series
//! and the replica indices it names.

use std::{
    collections::HashMap,
    time::{Duration, SystemTime},
};

use serde::Deserialize;

use super::{DeploymentFigures, Snapshot, publish};
use crate::api::model_deployment::ServingFigures;

/// How long one query may take before the poll counts as failed.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read (a fleet of 10,000 replicas answers about 2 MiB per query).
const MAX_ANSWER_BYTES: usize = 16 << 20;
/// Series read per query; the rest are dropped, and the poll says so in the log.
const MAX_SERIES: usize = 50_000;
/// The XRD's largest `spec.replicas`: a `replica` label above it is not ours.
const MAX_REPLICA: u32 = 1000;
/// A sample this many intervals old is stale.
const STALE_INTERVALS: u32 = 3;

/// One figure of [`ServingFigures`] and the PromQL that answers it, grouped by `by`.
#[derive(Debug, Clone, Copy)]
enum Figure {
    RequestsWaiting,
    RequestsRunning,
    PromptTokensPerSecond,
    GenerationTokensPerSecond,
    TimeToFirstTokenP95,
    TimePerOutputTokenP95,
    KvCacheUtilization,
}

const FIGURES: [Figure; 7] = [
    Figure::RequestsWaiting,
    Figure::RequestsRunning,
    Figure::PromptTokensPerSecond,
    Figure::GenerationTokensPerSecond,
    Figure::TimeToFirstTokenP95,
    Figure::TimePerOutputTokenP95,
    Figure::KvCacheUtilization,
];

const PER_REPLICA: &str = "namespace, deployment, replica";
const PER_DEPLOYMENT: &str = "namespace, deployment";

impl Figure {
    fn promql(self, by: &str) -> String {
        let quantile = |series: &str| format!("histogram_quantile(0.95, sum by ({by}, le) ({series}))");
        match self {
            Figure::RequestsWaiting => format!("sum by ({by}) (modelplane_requests_waiting)"),
            Figure::RequestsRunning => format!("sum by ({by}) (modelplane_requests_running)"),
            Figure::PromptTokensPerSecond => format!("sum by ({by}) (modelplane_prompt_tokens:rate1m)"),
            Figure::GenerationTokensPerSecond => {
                format!("sum by ({by}) (modelplane_generation_tokens:rate1m)")
            }
            Figure::TimeToFirstTokenP95 => quantile("modelplane_time_to_first_token_seconds_bucket:rate1m"),
            Figure::TimePerOutputTokenP95 => {
                quantile("modelplane_time_per_output_token_seconds_bucket:rate1m")
            }
            Figure::KvCacheUtilization => format!("avg by ({by}) (modelplane_kv_cache_utilization)"),
        }
    }

    /// Stores `value`, rounded to what a reader can use: whole requests, tenths of tokens per second,
    /// milliseconds of first-token time, tenths of a millisecond per output token.
    fn set(self, figures: &mut ServingFigures, value: f64) {
        let round = |v: f64, places: i32| {
            let scale = 10f64.powi(places);
            (v * scale).round() / scale
        };
        match self {
            Figure::RequestsWaiting => figures.requests_waiting = Some(whole(value)),
            Figure::RequestsRunning => figures.requests_running = Some(whole(value)),
            Figure::PromptTokensPerSecond => figures.prompt_tokens_per_second = Some(round(value, 1)),
            Figure::GenerationTokensPerSecond => figures.generation_tokens_per_second = Some(round(value, 1)),
            Figure::TimeToFirstTokenP95 => figures.time_to_first_token_p95_seconds = Some(round(value, 3)),
            Figure::TimePerOutputTokenP95 => {
                figures.time_per_output_token_p95_seconds = Some(round(value, 4))
            }
            Figure::KvCacheUtilization => figures.kv_cache_utilization = Some(round(value, 3)),
        }
    }
}

fn whole(value: f64) -> u64 {
    // A gauge sum is a count; `as` saturates, and the value is finite and not negative here.
    value.round().max(0.0) as u64
}

#[derive(Debug, thiserror::Error)]
pub enum PollError {
    /// The client's error with its causes ("...: tcp connect error: Connection refused"), without the URL: the
    /// reader already has the source, and the query would bury the cause.
    #[error("{}", chain(.0))]
    Request(reqwest::Error),
    #[error("answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("answered more than {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
    #[error("answered what is not a Prometheus query result: {0}")]
    Malformed(String),
}

/// The fleet's Prometheus and how often to ask it.
#[derive(Debug, Clone)]
pub struct Options {
    /// Its query API's base, e.g. `http://prometheus-operated.monitoring.svc:9090`.
    pub url: String,
    pub interval: Duration,
}

impl Options {
    /// Refuses what the poller cannot serve, naming the flag.
    pub fn check(&self) -> Result<(), String> {
        if !self.url.starts_with("http://") {
            return Err(format!(
                "--fleet-metrics-url {:?}: only http:// is read (the control plane's in-cluster Prometheus service)",
                self.url
            ));
        }
        if self.interval < Duration::from_secs(5) {
            return Err("--fleet-metrics-interval-seconds: at least 5 seconds".into());
        }
        Ok(())
    }
}

impl From<reqwest::Error> for PollError {
    fn from(e: reqwest::Error) -> Self {
        PollError::Request(e.without_url())
    }
}

fn chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

fn client() -> Result<reqwest::Client, PollError> {
    Ok(reqwest::Client::builder().timeout(QUERY_TIMEOUT).build()?)
}

/// Polls for ever, publishing each sample; a failed poll keeps the last good figures until they are stale.
pub async fn run(options: Options) {
    let stale_after = options.interval * STALE_INTERVALS;
    let mut snapshot = Snapshot {
        source: options.url.clone(),
        error: Some("not polled yet".into()),
        stale_after,
        ..Snapshot::default()
    };
    publish(snapshot.clone());
    let client = match client() {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the fleet metrics client; no serving figures");
            return;
        }
    };
    let mut ticks = tokio::time::interval(options.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let sampled = sample(&client, &options.url).await;
        // Once per distinct failure: a control plane without Prometheus would otherwise log every interval.
        if let Some(error) = snapshot.record(sampled) {
            tracing::warn!(source = %options.url, error = %error, "fleet metrics poll failed");
        }
        publish(snapshot.clone());
    }
}

impl Snapshot {
    /// Takes a poll's outcome: its figures, or its error beside the last good figures. Returns the error when it
    /// differs from the last one.
    fn record(
        &mut self,
        sampled: Result<HashMap<(String, String), DeploymentFigures>, PollError>,
    ) -> Option<String> {
        match sampled {
            Ok(deployments) => {
                self.sampled_at = Some(SystemTime::now());
                self.error = None;
                self.deployments = deployments;
                None
            }
            Err(e) => {
                let error = e.to_string();
                let new = self.error.as_deref() != Some(error.as_str());
                self.error = Some(error.clone());
                new.then_some(error)
            }
        }
    }
}

/// One sample, for `render`: the snapshot a server would hold after its first poll.
pub async fn once(url: &str) -> Snapshot {
    let mut snapshot = Snapshot {
        source: url.to_owned(),
        stale_after: Duration::from_secs(60),
        ..Snapshot::default()
    };
    let sampled = match client() {
        Ok(client) => sample(&client, url).await,
        Err(e) => Err(e),
    };
    snapshot.record(sampled);
    snapshot
}

/// Every deployment's figures, from all fourteen queries; any query failing fails the sample, so a sample is
/// never half old and half new.
pub async fn sample(
    client: &reqwest::Client,
    url: &str,
) -> Result<HashMap<(String, String), DeploymentFigures>, PollError> {
    let mut deployments: HashMap<(String, String), DeploymentFigures> = HashMap::new();
    for figure in FIGURES {
        for by in [PER_REPLICA, PER_DEPLOYMENT] {
            let answer = query(client, url, &figure.promql(by)).await?;
            for series in answer {
                let Some(value) = series.value().filter(|v| v.is_finite() && *v >= 0.0) else {
                    continue;
                };
                let labels = &series.metric;
                let (Some(namespace), Some(deployment)) = (labels.get("namespace"), labels.get("deployment"))
                else {
                    continue;
                };
                let entry = deployments.entry((namespace.clone(), deployment.clone()));
                if by == PER_DEPLOYMENT {
                    figure.set(&mut entry.or_default().total, value);
                    continue;
                }
                let Some(replica) = labels.get("replica").and_then(|r| r.parse::<u32>().ok()) else {
                    continue;
                };
                if replica < MAX_REPLICA {
                    figure.set(entry.or_default().replicas.entry(replica).or_default(), value);
                }
            }
        }
    }
    Ok(deployments)
}

#[derive(Debug, Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<Series>,
}

#[derive(Debug, Deserialize)]
struct Series {
    #[serde(default)]
    metric: HashMap<String, String>,
    /// `[unix time, "value"]`.
    value: (f64, String),
}

impl Series {
    fn value(&self) -> Option<f64> {
        self.value.1.parse().ok()
    }
}

async fn query(client: &reqwest::Client, url: &str, promql: &str) -> Result<Vec<Series>, PollError> {
    let mut response = client
        .get(format!("{}/api/v1/query", url.trim_end_matches('/')))
        .query(&[("query", promql)])
        .send()
        .await?;
    let status = response.status();
    if response
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
    {
        return Err(PollError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(PollError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    parse(status.as_u16(), &body)
}

fn parse(status: u16, body: &[u8]) -> Result<Vec<Series>, PollError> {
    let answer: Answer = serde_json::from_slice(body).map_err(|e| {
        if (200..300).contains(&status) {
            PollError::Malformed(e.to_string())
        } else {
            PollError::Status {
                status,
                body: String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
            }
        }
    })?;
    if answer.status != "success" {
        return Err(PollError::Status {
            status,
            body: answer.error.unwrap_or(answer.status),
        });
    }
    let data = answer
        .data
        .ok_or_else(|| PollError::Malformed("no data".into()))?;
    if data.result_type != "vector" {
        return Err(PollError::Malformed(format!(
            "a {} where a vector was asked for",
            data.result_type
        )));
    }
    let mut result = data.result;
    if result.len() > MAX_SERIES {
        tracing::warn!(
            series = result.len(),
            kept = MAX_SERIES,
            "fleet metrics answer truncated"
        );
        result.truncate(MAX_SERIES);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_group_each_figure_per_replica_and_read_the_recorded_vocabulary() {
        assert_eq!(
            Figure::RequestsWaiting.promql(PER_REPLICA),
            "sum by (namespace, deployment, replica) (modelplane_requests_waiting)"
        );
        assert_eq!(
            Figure::TimeToFirstTokenP95.promql(PER_DEPLOYMENT),
            "histogram_quantile(0.95, sum by (namespace, deployment, le) \
             (modelplane_time_to_first_token_seconds_bucket:rate1m))"
        );
    }

    #[test]
    fn an_answer_is_read_as_prometheus_writes_it_and_refused_otherwise() {
        let ok = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"namespace":"ml","deployment":"q","replica":"0"},"value":[1.5,"6"]},
            {"metric":{"namespace":"ml","deployment":"q","replica":"1"},"value":[1.5,"NaN"]}]}}"#;
        let series = parse(200, ok).unwrap();
        assert_eq!(series[0].value(), Some(6.0));
        assert!(series[1].value().unwrap().is_nan());

        let bad_query = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert_eq!(
            parse(400, bad_query).unwrap_err().to_string(),
            "answered HTTP 400: parse error"
        );
        assert_eq!(
            parse(502, b"<html>bad gateway</html>").unwrap_err().to_string(),
            "answered HTTP 502: <html>bad gateway</html>"
        );
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert!(
            parse(200, matrix)
                .unwrap_err()
                .to_string()
                .contains("a matrix where a vector")
        );
    }

    #[test]
    fn figures_are_rounded_to_what_a_reader_uses() {
        let mut f = ServingFigures::default();
        Figure::RequestsWaiting.set(&mut f, 5.6);
        Figure::GenerationTokensPerSecond.set(&mut f, 412.345);
        Figure::TimeToFirstTokenP95.set(&mut f, 0.97512);
        Figure::TimePerOutputTokenP95.set(&mut f, 0.0123456);
        Figure::KvCacheUtilization.set(&mut f, 0.51234);
        assert_eq!(f.requests_waiting, Some(6));
        assert_eq!(f.generation_tokens_per_second, Some(412.3));
        assert_eq!(f.time_to_first_token_p95_seconds, Some(0.975));
        assert_eq!(f.time_per_output_token_p95_seconds, Some(0.0123));
        assert_eq!(f.kv_cache_utilization, Some(0.512));
    }

    #[test]
    fn only_http_and_a_sane_interval_are_accepted() {
        let options = |url: &str, secs| Options {
            url: url.into(),
            interval: Duration::from_secs(secs),
        };
        assert!(
            options("http://prometheus-operated.monitoring.svc:9090", 30)
                .check()
                .is_ok()
        );
        assert!(
            options("https://prom", 30)
                .check()
                .unwrap_err()
                .contains("only http://")
        );
        assert!(
            options("http://prom", 1)
                .check()
                .unwrap_err()
                .contains("at least 5 seconds")
        );
    }
}
