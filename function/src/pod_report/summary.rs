//! What one engine workload's pods say about it, in one reason and one sentence: pure, so every case is a unit
//! test on pods as the API server returns them.
//!
//! The reason is the first failure a user must fix, in the order they would meet it: a pod that cannot be
//! scheduled never pulls its image, an image that cannot be pulled never starts, a container that cannot start
//! never crashes, and one that crashes is never probed.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use crate::workload::pod_report::{PodReason, Report};

/// A sentence is cut here: it ends up in a condition message next to others.
const MESSAGE_LIMIT: usize = 512;

/// Waiting reasons of a container whose image the kubelet could not pull.
const PULL_FAILURES: [&str; 5] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "RegistryUnavailable",
];
/// Waiting reasons of a container the runtime could not create or start.
const START_FAILURES: [&str; 3] = [
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// The last failed probe the kubelet reported for a pod (an `Unhealthy` event): its message and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedProbe {
    pub message: String,
    pub count: i32,
}

/// The report for `pods`, all of one workload; `probe` looks up a pod's last failed probe.
pub fn summarize<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    probe: impl Fn(&Pod) -> Option<FailedProbe>,
) -> Report {
    let mut total = 0usize;
    let mut ready = 0usize;
    let mut worst: Option<(PodReason, String)> = None;
    for pod in pods {
        total += 1;
        if is_ready(pod) {
            ready += 1;
            continue;
        }
        if let Some((reason, message)) = failure(pod, &probe)
            && worst.as_ref().is_none_or(|(seen, _)| reason < *seen)
        {
            worst = Some((reason, message));
        }
    }
    let (reason, message) = worst.unwrap_or_else(|| {
        if total > 0 && ready == total {
            (
                PodReason::EnginesRunning,
                format!("{ready} of {total} pod(s) ready"),
            )
        } else {
            (
                PodReason::EnginesStarting,
                format!("{ready} of {total} pod(s) ready"),
            )
        }
    });
    Report {
        reason,
        message: cut(message),
        pods: total,
        ready,
    }
}

fn is_ready(pod: &Pod) -> bool {
    condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

fn condition<'p>(pod: &'p Pod, type_: &str) -> Option<&'p k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Why `pod` is not ready, if it is failing rather than still starting.
fn failure(pod: &Pod, probe: &impl Fn(&Pod) -> Option<FailedProbe>) -> Option<(PodReason, String)> {
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    if let Some(scheduled) = condition(pod, "PodScheduled")
        && scheduled.status == "False"
    {
        let why = scheduled
            .message
            .as_deref()
            .or(scheduled.reason.as_deref())
            .unwrap_or("no reason given");
        return Some((
            PodReason::Unschedulable,
            format!("pod {name} cannot be scheduled: {why}"),
        ));
    }
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() == Some("Failed") {
        let why = status
            .message
            .as_deref()
            .or(status.reason.as_deref())
            .unwrap_or("no reason given");
        return Some((PodReason::EngineCrashing, format!("pod {name} failed: {why}")));
    }
    let containers = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    let mut worst: Option<(PodReason, String)> = None;
    for container in containers {
        if let Some(found) = container_failure(name, container)
            && worst.as_ref().is_none_or(|(seen, _)| found.0 < *seen)
        {
            worst = Some(found);
        }
    }
    if worst.is_some() {
        return worst;
    }
    let running = status.container_statuses.iter().flatten().any(is_running);
    let failed = probe(pod).filter(|_| running)?;
    let times = if failed.count > 1 {
        format!(" ({} times)", failed.count)
    } else {
        String::new()
    };
    Some((
        PodReason::EngineNotHealthy,
        format!(
            "pod {name} runs but is not ready: {}{times}",
            failed.message.trim()
        ),
    ))
}

fn is_running(container: &ContainerStatus) -> bool {
    container.state.as_ref().is_some_and(|s| s.running.is_some())
}

fn container_failure(pod: &str, container: &ContainerStatus) -> Option<(PodReason, String)> {
    let waiting = container.state.as_ref()?.waiting.as_ref();
    let reason = waiting.and_then(|w| w.reason.as_deref()).unwrap_or("");
    let detail = waiting.and_then(|w| w.message.as_deref()).unwrap_or(reason);
    let name = &container.name;
    if PULL_FAILURES.contains(&reason) {
        let image = &container.image;
        return Some((
            PodReason::ImagePullFailed,
            format!("pod {pod}: container {name} cannot pull image {image}: {detail}"),
        ));
    }
    if START_FAILURES.contains(&reason) {
        return Some((
            PodReason::EngineConfigInvalid,
            format!("pod {pod}: container {name} cannot start ({reason}): {detail}"),
        ));
    }
    let restarts = container.restart_count;
    if reason == "CrashLoopBackOff" || restarts > 0 && !container.ready && !is_running(container) {
        let last = container.last_state.as_ref().and_then(|s| s.terminated.as_ref());
        let exit = last.map_or_else(
            || "no exit recorded".to_owned(),
            |t| {
                format!(
                    "last exit code {} ({})",
                    t.exit_code,
                    t.reason.as_deref().unwrap_or("no reason")
                )
            },
        );
        return Some((
            PodReason::EngineCrashing,
            format!("pod {pod}: container {name} keeps exiting: restarted {restarts} time(s), {exit}"),
        ));
    }
    None
}

/// `message` cut to [`MESSAGE_LIMIT`] bytes on a character boundary.
fn cut(mut message: String) -> String {
    if message.len() > MESSAGE_LIMIT {
        let mut end = MESSAGE_LIMIT;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "qwen-0-engine-abc"}, "status": status})).unwrap()
    }

    fn no_probe(_: &Pod) -> Option<FailedProbe> {
        None
    }

    fn ready() -> Pod {
        pod(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}))
    }

    #[test]
    fn every_pod_ready_is_running() {
        let pods = [ready(), ready()];
        let report = summarize(&pods, no_probe);
        assert_eq!(
            (report.reason, report.pods, report.ready),
            (PodReason::EnginesRunning, 2, 2)
        );
    }

    #[test]
    fn no_pods_and_pods_still_starting_are_starting() {
        assert_eq!(summarize(&[], no_probe).reason, PodReason::EnginesStarting);
        let creating = pod(json!({"phase": "Pending", "containerStatuses": [{
            "name": "engine", "image": "vllm", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}}}]}));
        assert_eq!(
            summarize(&[creating, ready()], no_probe).reason,
            PodReason::EnginesStarting
        );
    }

    #[test]
    fn an_image_that_cannot_be_pulled_is_named_with_the_kubelets_message() {
        let pulling = pod(json!({"phase": "Pending", "containerStatuses": [{
            "name": "engine", "image": "registry.invalid/vllm:0", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}));
        let report = summarize(&[ready(), pulling], no_probe);
        assert_eq!(report.reason, PodReason::ImagePullFailed);
        assert_eq!(
            report.message,
            "pod qwen-0-engine-abc: container engine cannot pull image registry.invalid/vllm:0: Back-off pulling image"
        );
        assert_eq!((report.pods, report.ready), (2, 1));
    }

    #[test]
    fn an_unschedulable_pod_says_what_the_scheduler_said_and_comes_first() {
        let unschedulable = pod(
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0/2 nodes are available: cannot allocate all claims."}]}),
        );
        let pulling = pod(
            json!({"containerStatuses": [{"name": "engine", "image": "x", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ErrImagePull"}}}]}),
        );
        let report = summarize(&[pulling, unschedulable], no_probe);
        assert_eq!(report.reason, PodReason::Unschedulable);
        assert!(
            report.message.ends_with("cannot allocate all claims."),
            "{}",
            report.message
        );
    }

    #[test]
    fn a_crashing_engine_names_its_exit() {
        let crashing = pod(
            json!({"phase": "Running", "containerStatuses": [{"name": "engine", "image": "x",
            "imageID": "", "ready": false, "restartCount": 4,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}),
        );
        let report = summarize(&[crashing], no_probe);
        assert_eq!(report.reason, PodReason::EngineCrashing);
        assert!(
            report
                .message
                .contains("restarted 4 time(s), last exit code 137 (OOMKilled)"),
            "{}",
            report.message
        );
    }

    #[test]
    fn a_running_engine_whose_probe_fails_says_what_the_probe_saw() {
        let running = pod(
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"name": "engine", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"running": {}}}]}),
        );
        let probe = |_: &Pod| {
            Some(FailedProbe {
                message: "Readiness probe failed: HTTP probe failed with statuscode: 503\n".into(),
                count: 7,
            })
        };
        let report = summarize(std::slice::from_ref(&running), probe);
        assert_eq!(report.reason, PodReason::EngineNotHealthy);
        assert_eq!(
            report.message,
            "pod qwen-0-engine-abc runs but is not ready: Readiness probe failed: HTTP probe failed with \
             statuscode: 503 (7 times)"
        );
        // Without a failed probe it is only starting.
        assert_eq!(summarize([&running], no_probe).reason, PodReason::EnginesStarting);
    }

    #[test]
    fn a_container_that_cannot_start_is_a_configuration_error() {
        let config = pod(
            json!({"containerStatuses": [{"name": "engine", "image": "x", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "CreateContainerConfigError",
            "message": "secret \"hf-token\" not found"}}}]}),
        );
        let report = summarize(&[config], no_probe);
        assert_eq!(report.reason, PodReason::EngineConfigInvalid);
        assert!(
            report.message.ends_with("secret \"hf-token\" not found"),
            "{}",
            report.message
        );
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MESSAGE_LIMIT);
        let cut = cut(long);
        assert!(cut.len() <= MESSAGE_LIMIT + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
