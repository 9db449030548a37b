//! The manifests that stage one cache on one cluster: the volume, the token, the download Job (the function's
//! own image running `modelplane-function stage`), the ConfigMap it reports progress to, and the least RBAC that
//! lets it: patch that one ConfigMap.

use crate::wire::tree::{Tree, tree};

use super::progress;
use crate::api::model_cache::{HuggingFace, MOUNT_PATH, pvc_name};
use crate::stage::EXIT_FINAL;
use crate::workload::well_known::FUNCTION_IMAGE;

/// Attempts before the Job fails. Each attempt resumes where the last one stopped, so retries are cheap; what no
/// retry can fix (the Hub refusing the repo or a file, a full volume) fails the Job at once (`EXIT_FINAL`).
const BACKOFF_LIMIT: u32 = 10;

/// Key of the token in the Secret propagated to the workload cluster.
pub const TOKEN_KEY: &str = "token";

/// Seconds between two progress reports of the downloader: a report is one PATCH of a small ConfigMap.
const REPORT_INTERVAL_SECONDS: u32 = 10;

pub fn volume_claim(cache: &str, namespace: &str, size: &str, storage_class: &str) -> Tree {
    tree!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": pvc_name(cache), "namespace": namespace, "labels": labels(cache)},
        "spec": {
            // Every engine pod of every replica on the cluster mounts the same volume.
            "accessModes": ["ReadWriteMany"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": size}},
        },
    })
}

/// The cluster-side Secret holding the Hub token. Its data is filled by provider-kubernetes from the Secret on
/// the control plane (see `token_reference`), so the token never passes through the function.
pub fn token_secret(cache: &str, namespace: &str) -> Tree {
    tree!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": token_secret_name(cache), "namespace": namespace, "labels": labels(cache)},
        "type": "Opaque",
    })
}

/// A provider-kubernetes reference that copies `key` of the control-plane Secret into the token Secret.
pub fn token_reference(source_namespace: &str, secret: &str, key: &str) -> Tree {
    tree!({
        "patchesFrom": {
            "apiVersion": "v1", "kind": "Secret", "name": secret, "namespace": source_namespace,
            "fieldPath": format!("data.{key}"),
        },
        "toFieldPath": format!("data.{TOKEN_KEY}"),
    })
}

fn token_secret_name(cache: &str) -> String {
    format!("{}-hf-token", pvc_name(cache))
}

/// The ServiceAccount, Role and RoleBinding of the Job.
fn account_name(cache: &str) -> String {
    format!("{}-stage", pvc_name(cache))
}

/// Created empty; only the Job writes its data (the composing Object never updates it).
pub fn progress(cache: &str, namespace: &str) -> Tree {
    tree!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": progress::name(cache), "namespace": namespace, "labels": labels(cache)},
    })
}

pub fn service_account(cache: &str, namespace: &str) -> Tree {
    tree!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": account_name(cache), "namespace": namespace, "labels": labels(cache)},
    })
}

/// Patching its own progress ConfigMap, by name: nothing else, not even reading another.
pub fn role(cache: &str, namespace: &str) -> Tree {
    tree!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": account_name(cache), "namespace": namespace, "labels": labels(cache)},
        "rules": [{
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [progress::name(cache)],
            "verbs": ["get", "patch"],
        }],
    })
}

pub fn role_binding(cache: &str, namespace: &str) -> Tree {
    tree!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": account_name(cache), "namespace": namespace, "labels": labels(cache)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account_name(cache)},
        "subjects": [{"kind": "ServiceAccount", "name": account_name(cache), "namespace": namespace}],
    })
}

pub fn job(cache: &str, namespace: &str, hf: &HuggingFace) -> Tree {
    let mut env = vec![
        tree!({"name": "HF_HUB_CACHE", "value": MOUNT_PATH}),
        tree!({"name": "REPO", "value": &hf.repo}),
        tree!({"name": "REVISION", "value": &hf.revision}),
        tree!({"name": "PROGRESS_CONFIGMAP", "value": progress::name(cache)}),
        tree!({"name": "PROGRESS_NAMESPACE", "value": namespace}),
        tree!({"name": "PROGRESS_INTERVAL_SECONDS", "value": REPORT_INTERVAL_SECONDS.to_string()}),
    ];
    if hf.auth_secret.is_some() {
        env.push(tree!({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": token_secret_name(cache), "key": TOKEN_KEY}}}));
    }
    tree!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": format!("{}-hydrate", pvc_name(cache)), "namespace": namespace, "labels": labels(cache)},
        "spec": {
            "backoffLimit": BACKOFF_LIMIT,
            // The Hub refusing the repo or a file, or a full volume, fails the Job at once: no retry would pass.
            "podFailurePolicy": {"rules": [{
                "action": "FailJob",
                "onExitCodes": {"containerName": "hydrate", "operator": "In", "values": [EXIT_FINAL]},
            }]},
            "template": {
                "metadata": {"labels": labels(cache)},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": account_name(cache),
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000},
                    "containers": [{
                        "name": "hydrate",
                        // The function's own image: nothing is installed at run time, and HTTP(S)_PROXY and
                        // NO_PROXY set on the cluster (by an admission policy, say) are honoured.
                        "image": FUNCTION_IMAGE,
                        "args": ["stage"],
                        "env": env,
                        "volumeMounts": [{"name": "cache", "mountPath": MOUNT_PATH}],
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }],
                    "volumes": [{"name": "cache", "persistentVolumeClaim": {"claimName": pvc_name(cache)}}],
                },
            },
        },
    })
}

fn labels(cache: &str) -> Tree {
    tree!({"modelplane.ai/model-cache": cache})
}
