//! One vocabulary for what every engine reports, whichever engine it is: Prometheus recording rules, composed on
//! every cluster next to its kube-prometheus-stack, that turn vLLM's, SGLang's and TensorRT-LLM's own metric names
//! into `modelplane_*` series. Dashboards, the fleet's status figures and autoscaling read only these, so a
//! deployment that moves from one engine to another keeps its graphs and its scaling.
//!
//! Every series keeps the labels the scrape gave the engine pod (`cluster`, `namespace`, `deployment`, `replica`,
//! `role`, `pod`) and drops the engine's own (`model_name`, `engine`, ranks): one series per serving pod. An engine
//! that does not report a figure has no series for it (TensorRT-LLM reports neither queue depth nor KV-cache use).
//! GPU utilisation and memory come from the cluster's DCGM exporter, per device, and are recorded per serving pod
//! under the same labels.

use crate::wire::tree::{Text, Tree, tree};

use super::well_known::ROLE_LABEL;

/// The labels every `modelplane_*` series keeps: where the engine pod runs and what it serves.
const KEPT: &str = "cluster, namespace, deployment, replica, role, pod";
/// How far back a rate looks: four scrapes at the 15 s interval engines are scraped at.
const RATE_WINDOW: &str = "1m";
/// How often the rules run; as often as engines are scraped.
const EVALUATION_INTERVAL: &str = "15s";
/// The PrometheusRule's name, in the monitoring namespace of the cluster's kube-prometheus-stack.
pub const RULES: &str = "modelplane-engine-metrics";

/// One normalised figure and where each engine reports it.
struct Figure {
    record: &'static str,
    how: How,
    /// The engines' own metric names, in order of preference: where an engine renamed a metric across releases
    /// (vLLM's KV-cache use), the newer name first, so a pod reporting both counts once.
    sources: &'static [&'static str],
}

enum How {
    /// A count, summed over the pod's engines (a data-parallel pod reports one per engine).
    Gauge,
    /// A fraction, averaged over the pod's engines.
    Level,
    /// A counter, as a per-second rate.
    Rate,
    /// A histogram's buckets, each as a per-second rate, `le` kept: `histogram_quantile` reads them.
    BucketRate,
}

const FIGURES: &[Figure] = &[
    Figure {
        record: "modelplane_requests_running",
        how: How::Gauge,
        sources: &["vllm:num_requests_running", "sglang:num_running_reqs"],
    },
    Figure {
        record: "modelplane_requests_waiting",
        how: How::Gauge,
        sources: &["vllm:num_requests_waiting", "sglang:num_queue_reqs"],
    },
    Figure {
        record: "modelplane_kv_cache_utilization",
        how: How::Level,
        sources: &[
            "vllm:kv_cache_usage_perc",
            "vllm:gpu_cache_usage_perc",
            "sglang:token_usage",
        ],
    },
    Figure {
        record: "modelplane_prompt_tokens:rate1m",
        how: How::Rate,
        sources: &["vllm:prompt_tokens_total", "sglang:prompt_tokens_total"],
    },
    Figure {
        record: "modelplane_generation_tokens:rate1m",
        how: How::Rate,
        sources: &["vllm:generation_tokens_total", "sglang:generation_tokens_total"],
    },
    Figure {
        record: "modelplane_time_to_first_token_seconds_bucket:rate1m",
        how: How::BucketRate,
        sources: &[
            "vllm:time_to_first_token_seconds_bucket",
            "sglang:time_to_first_token_seconds_bucket",
            "trtllm_time_to_first_token_seconds_bucket",
        ],
    },
    Figure {
        record: "modelplane_time_per_output_token_seconds_bucket:rate1m",
        how: How::BucketRate,
        sources: &[
            "vllm:inter_token_latency_seconds_bucket",
            "vllm:time_per_output_token_seconds_bucket",
            "sglang:inter_token_latency_seconds_bucket",
            "sglang:time_per_output_token_seconds_bucket",
            "trtllm_time_per_output_token_seconds_bucket",
        ],
    },
];

/// The `job` every engine scrape carries, so the GPU rules can tell serving pods' targets from every other.
const ENGINE_JOB: &str = "modelplane-engine";

/// One GPU figure from DCGM, whose exporter labels each device's series with the pod holding it. The series are
/// joined to the engine scrape's targets by pod, which gives them the deployment, replica and role labels, and
/// summed or averaged over the pod's GPUs.
struct GpuFigure {
    record: &'static str,
    /// `avg` or `sum` over the pod's devices.
    over_devices: &'static str,
    source: &'static str,
    /// What turns DCGM's unit into the record's.
    scale: &'static str,
}

const GPU_FIGURES: &[GpuFigure] = &[
    GpuFigure {
        record: "modelplane_gpu_utilization",
        over_devices: "avg",
        source: "DCGM_FI_DEV_GPU_UTIL",
        // Percent to a fraction, as KV-cache use is.
        scale: "/ 100",
    },
    GpuFigure {
        record: "modelplane_gpu_memory_used_bytes",
        over_devices: "sum",
        source: "DCGM_FI_DEV_FB_USED",
        // MiB to bytes.
        scale: "* 1048576",
    },
];

/// The PromQL of one GPU figure. An exporter scraped without `honorLabels` (the GPU Operator's) has its holder's
/// labels renamed `exported_pod` and `exported_namespace`; they are moved back first, so either exporter serves.
/// `group by` gives each serving pod one series of value 1 whatever its scrape's `up`, so a failing engine scrape
/// does not zero its GPUs' figures. A device no serving pod holds matches nothing.
fn gpu_expression(figure: &GpuFigure) -> String {
    let source = figure.source;
    let holder = format!(
        "label_replace(label_replace({source}, \"pod\", \"$1\", \"exported_pod\", \"(.+)\"), \
         \"namespace\", \"$1\", \"exported_namespace\", \"(.+)\")"
    );
    format!(
        "{over} by ({KEPT}) (\n  {holder}\n  * on (namespace, pod) group_left (cluster, deployment, replica, role)\n  \
         group by ({KEPT}) (up{{job=\"{ENGINE_JOB}\"}})\n) {scale}",
        over = figure.over_devices,
        scale = figure.scale,
    )
}

/// The engine metric names the rules read, for the scrape to keep (everything else an engine exposes stays out of
/// the cluster's Prometheus).
pub fn source_metrics() -> impl Iterator<Item = &'static str> {
    FIGURES.iter().flat_map(|f| f.sources.iter().copied())
}

/// The PromQL of one figure: each engine's source aggregated to [`KEPT`], the first that has a series for a pod
/// winning. `or on (<pod labels>)` decides per pod, not per series: a pod reporting a histogram under its new and
/// its old name, with different buckets, must not get the old name's extra buckets mixed into the new one's.
fn expression(figure: &Figure) -> String {
    let kept = match figure.how {
        How::BucketRate => format!("{KEPT}, le"),
        How::Gauge | How::Level | How::Rate => KEPT.to_owned(),
    };
    figure
        .sources
        .iter()
        .map(|source| match figure.how {
            How::Gauge => format!("sum by ({kept}) ({source})"),
            How::Level => format!("avg by ({kept}) ({source})"),
            How::Rate | How::BucketRate => format!("sum by ({kept}) (rate({source}[{RATE_WINDOW}]))"),
        })
        .collect::<Vec<_>>()
        .join(&format!("\nor on ({KEPT})\n"))
}

/// The recording rules, as the PrometheusRule the cluster's Prometheus loads.
pub fn recording_rules(namespace: &str) -> Tree {
    let engines = FIGURES
        .iter()
        .map(|f| tree!({"record": f.record, "expr": expression(f)}));
    let gpus = GPU_FIGURES
        .iter()
        .map(|f| tree!({"record": f.record, "expr": gpu_expression(f)}));
    let rules: Vec<Tree> = engines.chain(gpus).collect();
    tree!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
        "metadata": {"name": RULES, "namespace": namespace},
        "spec": {"groups": [{"name": "modelplane-engines", "interval": EVALUATION_INTERVAL, "rules": rules}]},
    })
}

/// How often each engine is scraped: four samples in every [`RATE_WINDOW`].
const SCRAPE_INTERVAL: &str = "15s";

/// What the scrape of one engine workload stamps on its series, beside the `namespace` and `pod` Prometheus adds.
pub struct ScrapeLabels<'a> {
    pub cluster: &'a str,
    pub deployment: &'a str,
    /// The replica's index in the deployment.
    pub replica: &'a str,
}

/// The PodMonitor that scrapes one engine workload's serving pods (`selector`) on `port`, keeping only the metrics
/// the rules read and labelling them with where they come from. Its name is the workload's, so each goes with the
/// workload it watches. Pods of a prefill/decode pair carry their phase, which becomes `role`.
pub fn pod_monitor(name: &str, namespace: &str, selector: Tree, port: u16, labels: &ScrapeLabels) -> Tree {
    // Metric names hold no regex metacharacters (`[a-zA-Z_:][a-zA-Z0-9_:]*`): they go in as they are.
    let keep = source_metrics().collect::<Vec<_>>().join("|");
    let stamp = |label: &'static str, value: &str| tree!({"targetLabel": Text::Borrowed(label), "replacement": value, "action": "replace"});
    tree!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": selector},
            "podMetricsEndpoints": [{
                "portNumber": port,
                "path": "/metrics",
                "interval": SCRAPE_INTERVAL,
                "relabelings": [
                    stamp("job", ENGINE_JOB),
                    stamp("cluster", labels.cluster),
                    stamp("deployment", labels.deployment),
                    stamp("replica", labels.replica),
                    {"sourceLabels": [format!("__meta_kubernetes_pod_label_{}", prometheus_label(ROLE_LABEL))],
                     "targetLabel": "role", "action": "replace"},
                ],
                "metricRelabelings": [
                    {"sourceLabels": ["__name__"], "regex": format!("({keep})"), "action": "keep"},
                ],
            }],
        },
    })
}

/// A pod label as Prometheus' Kubernetes discovery names it: every character outside `[a-zA-Z0-9_]` becomes `_`.
fn prometheus_label(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_is_recorded_once_under_a_modelplane_name_with_its_pod_labels() {
        let rules = recording_rules("monitoring").to_json();
        let rules = rules["spec"]["groups"][0]["rules"].as_array().unwrap();
        let mut names: Vec<&str> = rules.iter().map(|r| r["record"].as_str().unwrap()).collect();
        assert!(names.iter().all(|n| n.starts_with("modelplane_")), "{names:?}");
        let count = names.len();
        names.dedup();
        assert_eq!(
            names.len(),
            count,
            "one rule per figure: two rules writing one series would collide"
        );
        for rule in rules {
            let expr = rule["expr"].as_str().unwrap();
            assert!(expr.contains(KEPT), "{expr}");
        }
        let ttft = rules[5]["expr"].as_str().unwrap();
        assert!(ttft.contains(", le)") && ttft.contains("[1m]"), "{ttft}");
    }
}
