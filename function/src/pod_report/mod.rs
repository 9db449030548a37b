//! `modelplane-function report-pods`: the pod reporter each workload cluster runs (its objects and the report
//! format: [`crate::workload::pod_report`]).
//!
//! It mirrors the engine pods (those with the workload label) and the kubelets' `Unhealthy` events into memory
//! through watches, and every `--period` writes, for each workload whose summary changed, one ConfigMap with
//! server-side apply; a workload whose pods are all gone has its report removed. Nothing is written while the
//! watches are still listing, so a restart never replaces a report with a partial one, and a summary that did
//! not change is not written again, so an idle cluster costs the API server nothing.

pub mod summary;

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams},
    runtime::{WatchStreamExt, reflector, watcher},
};
use tokio_stream::StreamExt;

use modelplane_eks_api::names::is_dns_label;

use crate::workload::pod_report::{REPORT_LABEL, REPORT_NAMESPACE, REPORTER, Report, report_name};
use summary::FailedProbe;

/// Reports kept at once: far more engine workloads than a cluster runs, few enough that a flood of labelled pods
/// cannot fill the namespace.
pub const MAX_REPORTS: usize = 4096;

/// The pod reporter's settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// The label every engine pod has; its value names the workload.
    pub selector: String,
    /// How often changed summaries are written.
    pub period: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot reach the cluster's API server: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot list the reports in {REPORT_NAMESPACE}: {0}")]
    List(#[source] kube::Error),
}

/// Runs until the process is stopped. Fails only when it cannot start: once running, a failed write is logged
/// and retried on the next period.
pub async fn run(options: Options) -> Result<(), ReportError> {
    let client = Client::try_default().await.map_err(ReportError::Client)?;
    let pods = mirror::<Pod>(
        Api::all(client.clone()),
        watcher::Config::default().labels(&options.selector),
    );
    let events = mirror::<Event>(
        Api::all(client.clone()),
        watcher::Config::default().fields("reason=Unhealthy,involvedObject.kind=Pod"),
    );
    let reports: Api<ConfigMap> = Api::namespaced(client, REPORT_NAMESPACE);
    let mut written = existing(&reports).await?;
    tracing::info!(reports = written.len(), "pod reporter started");
    // A store answers only once its first list is in: until then its view is partial.
    let (pods, events) = (pods.await_ready().await, events.await_ready().await);
    let mut ticks = tokio::time::interval(options.period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let probes = failed_probes(&events.state());
        let desired = summaries(&pods.state(), &options.selector, &probes);
        write_changes(&reports, &mut written, desired).await;
    }
}

/// A store that a background task keeps in step with the API server.
struct Mirror<K: kube::Resource + 'static>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    store: reflector::Store<K>,
}

impl<K> Mirror<K>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    async fn await_ready(self) -> reflector::Store<K> {
        // The writer's task outlives this call: it only ends with the process.
        let _ = self.store.wait_until_ready().await;
        self.store
    }
}

fn mirror<K>(api: Api<K>, config: watcher::Config) -> Mirror<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + std::hash::Hash + Eq + Clone + Send + Sync,
{
    let (store, writer) = reflector::store();
    let stream = reflector(writer, watcher(api, config).default_backoff()).applied_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(object) = stream.next().await {
            if let Err(e) = object {
                tracing::warn!(error = %e, "watch interrupted; resuming");
            }
        }
    });
    Mirror { store }
}

/// The reports this reporter wrote before it (re)started, by name.
async fn existing(reports: &Api<ConfigMap>) -> Result<HashMap<String, Report>, ReportError> {
    let listed = reports
        .list(&ListParams::default().labels(REPORT_LABEL))
        .await
        .map_err(ReportError::List)?;
    Ok(listed
        .items
        .into_iter()
        .filter_map(|cm| Some((cm.name_any(), Report::from_data(cm.data.as_ref()?)?)))
        .collect())
}

/// Each pod's last failed probe, by (namespace, pod name).
fn failed_probes(events: &[Arc<Event>]) -> HashMap<(String, String), FailedProbe> {
    let mut last: HashMap<(String, String), (&Event, FailedProbe)> = HashMap::new();
    for event in events {
        let target = &event.involved_object;
        let (Some(namespace), Some(name)) = (&target.namespace, &target.name) else {
            continue;
        };
        let probe = FailedProbe {
            message: event.message.clone().unwrap_or_default(),
            count: event.count.unwrap_or(1),
        };
        let key = (namespace.clone(), name.clone());
        let newer = last
            .get(&key)
            .is_none_or(|(seen, _)| seen_at(event) >= seen_at(seen));
        if newer {
            last.insert(key, (event, probe));
        }
    }
    last.into_iter().map(|(key, (_, probe))| (key, probe)).collect()
}

fn seen_at(event: &Event) -> Option<&jiff::Timestamp> {
    event
        .last_timestamp
        .as_ref()
        .map(|t| &t.0)
        .or(event.event_time.as_ref().map(|t| &t.0))
}

/// Every workload's report, by report name. Anyone who may create pods can set the label: a value that is not a
/// DNS label (so no workload of ours) is skipped, and at most [`MAX_REPORTS`] workloads are reported.
fn summaries(
    pods: &[Arc<Pod>],
    selector: &str,
    probes: &HashMap<(String, String), FailedProbe>,
) -> BTreeMap<String, Report> {
    let mut workloads: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for pod in pods {
        let (Some(namespace), Some(workload)) =
            (pod.metadata.namespace.as_deref(), pod.labels().get(selector))
        else {
            continue;
        };
        let name = report_name(namespace, workload);
        if !is_dns_label(workload) || !workloads.contains_key(&name) && workloads.len() >= MAX_REPORTS {
            continue;
        }
        workloads.entry(name).or_default().push(pod);
    }
    workloads
        .into_iter()
        .map(|(name, pods)| {
            let probe = |pod: &Pod| {
                let key = (pod.namespace().unwrap_or_default(), pod.name_any());
                probes.get(&key).cloned()
            };
            (name, summary::summarize(pods, probe))
        })
        .collect()
}

/// Writes what changed since `written`, removes reports of workloads that are gone, and records what landed.
async fn write_changes(
    reports: &Api<ConfigMap>,
    written: &mut HashMap<String, Report>,
    desired: BTreeMap<String, Report>,
) {
    let gone: Vec<String> = written
        .keys()
        .filter(|name| !desired.contains_key(*name))
        .cloned()
        .collect();
    for name in gone {
        match reports.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(report = %name, error = %e, "cannot remove the report of a workload that is gone");
                continue;
            }
        }
        written.remove(&name);
    }
    for (name, report) in desired {
        if written.get(&name) == Some(&report) {
            continue;
        }
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(REPORT_NAMESPACE.to_owned()),
                labels: Some(BTreeMap::from([(REPORT_LABEL.to_owned(), "true".to_owned())])),
                ..ObjectMeta::default()
            },
            data: Some(report.to_data()),
            ..ConfigMap::default()
        };
        let params = PatchParams::apply(REPORTER).force();
        match reports.patch(&name, &params, &Patch::Apply(&config_map)).await {
            Ok(_) => {
                tracing::info!(report = %name, reason = report.reason.as_str(), "report written");
                written.insert(name, report);
            }
            Err(e) => tracing::warn!(report = %name, error = %e, "cannot write the report; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(namespace: &str, name: &str, workload: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"namespace": namespace, "name": name, "labels": {"modelplane.ai/workload": workload}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }))
            .unwrap(),
        )
    }

    fn unhealthy(pod: &str, message: &str, count: i32, at: &str) -> Arc<Event> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("{pod}.{count}"), "namespace": "ml"},
                "involvedObject": {"kind": "Pod", "namespace": "ml", "name": pod},
                "reason": "Unhealthy", "message": message, "count": count, "lastTimestamp": at,
            }))
            .unwrap(),
        )
    }

    #[test]
    fn pods_are_reported_by_namespace_and_workload() {
        let pods = [
            pod("ml", "a-1", "a"),
            pod("ml", "a-2", "a"),
            pod("other", "a-1", "a"),
            pod("ml", "b-1", "b"),
        ];
        let reports = summaries(&pods, "modelplane.ai/workload", &HashMap::new());
        let counts: Vec<(&str, usize)> = reports.iter().map(|(k, r)| (k.as_str(), r.pods)).collect();
        assert_eq!(counts, [("pods.ml.a", 2), ("pods.ml.b", 1), ("pods.other.a", 1)]);
    }

    #[test]
    fn a_label_that_names_no_workload_of_ours_is_not_reported() {
        let pods = [pod("ml", "x", "Not_A_Label"), pod("ml", "y", &"w".repeat(64))];
        assert!(summaries(&pods, "modelplane.ai/workload", &HashMap::new()).is_empty());
    }

    #[test]
    fn reports_are_bounded() {
        let pods: Vec<_> = (0..=MAX_REPORTS)
            .map(|i| pod("ml", "p", &format!("w{i}")))
            .collect();
        assert_eq!(
            summaries(&pods, "modelplane.ai/workload", &HashMap::new()).len(),
            MAX_REPORTS
        );
    }

    #[test]
    fn a_pods_latest_failed_probe_is_the_one_reported() {
        let events = [
            unhealthy(
                "p",
                "Startup probe failed: connection refused",
                3,
                "2026-01-01T00:00:00Z",
            ),
            unhealthy(
                "p",
                "Startup probe failed: HTTP probe failed with statuscode: 503",
                9,
                "2026-01-01T00:05:00Z",
            ),
        ];
        let probes = failed_probes(&events);
        let probe = &probes[&("ml".to_owned(), "p".to_owned())];
        assert_eq!(
            (probe.message.as_str(), probe.count),
            ("Startup probe failed: HTTP probe failed with statuscode: 503", 9)
        );
    }
}
