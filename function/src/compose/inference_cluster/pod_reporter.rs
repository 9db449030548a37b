//! The pod reporter on every cluster Modelplane reaches ([`crate::workload::pod_report`]), whatever provides its
//! other components: without it a ModelDeployment cannot say why its engines are not ready. It never holds the
//! cluster's readiness: reports only explain, and a cluster serves without them.

use crate::{
    compose::{Output, remote, shared::CONTROL_NAMESPACE},
    workload::pod_report::{self, REPORT_NAMESPACE},
};

use super::components::{cluster_object, provider_config_name};

/// Composes the reporter; its namespace too unless `namespace_composed` (the cluster gateway's component makes it).
pub fn compose(out: &mut Output, cluster: &str, namespace_composed: bool) {
    if !namespace_composed {
        // Shared with the cluster gateway a cluster may be given later, so kept when the reporter goes.
        let namespace = remote::namespace(REPORT_NAMESPACE, &provider_config_name(cluster))
            .named(format!("{cluster}-pod-reporter-namespace"), CONTROL_NAMESPACE);
        out.compose("pod-reporter-namespace", namespace.build(), true);
    }
    for (suffix, manifest) in pod_report::objects() {
        let part = format!("pod-reporter-{suffix}");
        let object = cluster_object(cluster, &part, manifest).ready_once_created();
        out.compose(part, object.build(), true);
    }
}
