//! Pod reports: why an engine's pods are not ready, as the pods themselves say, where the function can read it.
//!
//! The function reaches a workload cluster only through provider-kubernetes `Object`s, each observing one named
//! object; pods have generated names. So each cluster runs the pod reporter (`modelplane-function report-pods`,
//! [`crate::pod_report`]), which watches the pods of every engine workload and writes one ConfigMap per workload,
//! named after it, in [`REPORT_NAMESPACE`]. A ModelDeployment observes the report of each workload it composed
//! and names the failure in its `EnginesRunning` condition. This module is the contract between the two: the
//! names, the vocabulary, the data layout, and the reporter's objects on the cluster.

use std::collections::BTreeMap;

use strum::{EnumString, IntoStaticStr};

use crate::wire::tree::{Tree, fields, tree};

use super::{
    own_image,
    well_known::{GATEWAY_NAMESPACE, WORKLOAD_LABEL},
};

/// The reporter's Deployment, ServiceAccount and RBAC objects, and its field manager.
pub const REPORTER: &str = "modelplane-pod-reporter";
/// Where reports are written: the namespace Modelplane owns on every cluster, so the reporter writes nowhere else.
pub const REPORT_NAMESPACE: &str = GATEWAY_NAMESPACE;
/// Labels every report, so the reporter finds (and removes) its own after a restart.
pub const REPORT_LABEL: &str = "modelplane.ai/pod-report";

const REASON_KEY: &str = "reason";
const MESSAGE_KEY: &str = "message";
const PODS_KEY: &str = "pods";
const READY_KEY: &str = "ready";

/// Where an engine workload's pods stand, most urgent first: a user fixes the first one a pod meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, IntoStaticStr, EnumString)]
pub enum PodReason {
    /// The scheduler cannot place a pod (no node fits, or no device satisfies its claims).
    Unschedulable,
    /// The kubelet cannot pull a container's image.
    ImagePullFailed,
    /// The runtime cannot create or start a container (a missing Secret or ConfigMap, a bad command).
    EngineConfigInvalid,
    /// A container keeps exiting.
    EngineCrashing,
    /// A container runs, but its probes fail.
    EngineNotHealthy,
    /// Pods are being created or started, and nothing has failed.
    EnginesStarting,
    /// Every pod is ready.
    EnginesRunning,
}

impl PodReason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether this is a failure a user must act on, rather than progress.
    pub fn is_failure(self) -> bool {
        self < PodReason::EnginesStarting
    }
}

/// One workload's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub reason: PodReason,
    pub message: String,
    pub pods: usize,
    pub ready: usize,
}

impl Report {
    /// The ConfigMap `data` the report is written as.
    pub fn to_data(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (REASON_KEY.to_owned(), self.reason.as_str().to_owned()),
            (MESSAGE_KEY.to_owned(), self.message.clone()),
            (PODS_KEY.to_owned(), self.pods.to_string()),
            (READY_KEY.to_owned(), self.ready.to_string()),
        ])
    }

    /// The report a ConfigMap's `data` holds; none when it is not one (a reason this release does not know).
    pub fn from_data(data: &BTreeMap<String, String>) -> Option<Report> {
        let count = |key: &str| data.get(key).and_then(|v| v.parse().ok()).unwrap_or(0);
        Some(Report {
            reason: data.get(REASON_KEY)?.parse().ok()?,
            message: data.get(MESSAGE_KEY).cloned().unwrap_or_default(),
            pods: count(PODS_KEY),
            ready: count(READY_KEY),
        })
    }
}

/// The report's name for the workload `workload` in `namespace`: both are DNS labels, so the name is a valid
/// ConfigMap name (at most 127 characters) and no two workloads share one.
pub fn report_name(namespace: &str, workload: &str) -> String {
    format!("pods.{namespace}.{workload}")
}

/// The reporter's objects on a cluster, by composed-resource key suffix: it reads pods and their `Unhealthy`
/// events everywhere, and writes ConfigMaps only in [`REPORT_NAMESPACE`].
pub fn objects() -> [(&'static str, Tree); 6] {
    let metadata = || tree!({"name": REPORTER, "namespace": REPORT_NAMESPACE});
    let subject = || tree!([{"kind": "ServiceAccount", "name": REPORTER, "namespace": REPORT_NAMESPACE}]);
    let rbac = "rbac.authorization.k8s.io/v1";
    [
        (
            "service-account",
            tree!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata()}),
        ),
        (
            "cluster-role",
            tree!({
                "apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": REPORTER},
                "rules": [{"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"]}],
            }),
        ),
        (
            "cluster-role-binding",
            tree!({
                "apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": REPORTER},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": REPORTER},
                "subjects": subject(),
            }),
        ),
        (
            "role",
            tree!({
                "apiVersion": rbac, "kind": "Role", "metadata": metadata(),
                "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                           "verbs": ["get", "list", "create", "patch", "delete"]}],
            }),
        ),
        (
            "role-binding",
            tree!({
                "apiVersion": rbac, "kind": "RoleBinding", "metadata": metadata(),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": REPORTER},
                "subjects": subject(),
            }),
        ),
        ("deployment", deployment()),
    ]
}

fn deployment() -> Tree {
    let args = tree!(["report-pods", "--selector", WORKLOAD_LABEL]);
    let container = own_image::container("reporter", args, ("32Mi", "128Mi"));
    own_image::deployment(
        REPORTER,
        REPORT_NAMESPACE,
        fields!({
            "serviceAccountName": REPORTER,
            // A cluster of GPU nodes only (an on-premises one, often) taints every node: the reporter must run
            // there too, and uses no device.
            "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
            "containers": [container],
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_as_written() {
        let report = Report {
            reason: PodReason::ImagePullFailed,
            message: "pod p: container engine cannot pull image x: not found".into(),
            pods: 2,
            ready: 1,
        };
        assert_eq!(Report::from_data(&report.to_data()), Some(report));
        let unknown = BTreeMap::from([(REASON_KEY.to_owned(), "SomethingNewer".to_owned())]);
        assert_eq!(Report::from_data(&unknown), None);
    }

    #[test]
    fn failures_come_before_progress() {
        assert!(PodReason::Unschedulable.is_failure());
        assert!(PodReason::EngineNotHealthy.is_failure());
        assert!(!PodReason::EnginesStarting.is_failure());
        assert!(!PodReason::EnginesRunning.is_failure());
    }

    #[test]
    fn names_fit_a_config_map() {
        let name = report_name(&"n".repeat(63), &"w".repeat(63));
        assert!(name.len() <= 253, "{name}");
    }
}
