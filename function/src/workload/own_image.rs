//! How Modelplane runs its own binary on a cluster (the standby server, the pod reporter): the function's image
//! as a one-replica Deployment, as an unprivileged user with a read-only root, so each server says only what is
//! its own (its arguments, ports, probes, account).

use crate::wire::tree::{Fields, Tree, fields, tree};

use super::well_known::FUNCTION_IMAGE;

/// The pod label the Deployment selects (and Services and policies may too).
pub const APP_LABEL: &str = "app.kubernetes.io/name";

/// A container of the function's image, named `name`, running `args` within `memory` (request, limit).
pub fn container(name: &str, args: Tree, memory: (&str, &str)) -> Fields {
    fields!({
        "name": name,
        "image": FUNCTION_IMAGE,
        "args": args,
        "resources": {"requests": {"cpu": "10m", "memory": memory.0}, "limits": {"memory": memory.1}},
        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]}},
    })
}

/// A one-replica Deployment `name` in `namespace` whose pods are `pod` (its containers, account, tolerations)
/// run as user 2000 under the runtime's default seccomp profile, labelled [`APP_LABEL`]`: name`.
pub fn deployment(name: &str, namespace: &str, mut pod: Fields) -> Tree {
    pod.insert(
        "securityContext",
        tree!({"runAsNonRoot": true, "runAsUser": 2000, "runAsGroup": 2000,
               "seccompProfile": {"type": "RuntimeDefault"}}),
    );
    let selector = || tree!({APP_LABEL: name});
    tree!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            // One replica: each server's state is rebuilt from what it observes, or renewed by its callers.
            "replicas": 1,
            "selector": {"matchLabels": selector()},
            "template": {"metadata": {"labels": selector()}, "spec": pod},
        },
    })
}
