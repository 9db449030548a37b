//! The manifests that stage one cache on one cluster: the volume, the token, the download Job.

use crate::wire::tree::{Tree, tree};

use crate::api::model_cache::{HuggingFace, MOUNT_PATH, pvc_name};

/// The downloader runs `huggingface_hub.snapshot_download`, which writes the Hub cache layout
/// (`models--org--name/{blobs,refs,snapshots}`) under `cache_dir` and resumes partial blobs left by an earlier
/// attempt. Pinned so every cluster stages the same layout.
const DOWNLOADER_IMAGE: &str = "python:3.12.12-slim-bookworm";
const HUGGINGFACE_HUB: &str = "huggingface_hub[hf_transfer]==0.36.0";

/// Attempts before the Job fails. Each attempt resumes where the last one stopped, so retries are cheap.
const BACKOFF_LIMIT: u32 = 10;

/// Key of the token in the Secret propagated to the workload cluster.
pub const TOKEN_KEY: &str = "token";

/// Downloads into the volume, then writes a marker naming the repo and revision. The marker is written only
/// after `snapshot_download` returns, so a crashed or killed attempt never looks complete; a Job re-created
/// after completion sees the marker and exits at once. Values reach the script through the environment, never
/// by splicing them into the script text.
const SCRIPT: &str = r#"set -eu
marker="$HF_HUB_CACHE/.modelplane/$MARKER"
if [ -f "$marker" ]; then echo "already staged: $REPO@$REVISION"; exit 0; fi
python -m pip install --no-cache-dir --quiet --user "$HUGGINGFACE_HUB"
python - <<'PY'
import os
from huggingface_hub import snapshot_download
path = snapshot_download(repo_id=os.environ["REPO"], revision=os.environ["REVISION"],
                         cache_dir=os.environ["HF_HUB_CACHE"], token=os.environ.get("HF_TOKEN") or None)
print("staged", path)
PY
mkdir -p "$(dirname "$marker")"
touch "$marker"
"#;

/// File name of the completion marker: the repo id and revision with `/` made safe.
pub fn marker(hf: &HuggingFace) -> String {
    format!(
        "{}@{}.complete",
        hf.repo.replace('/', "--"),
        hf.revision.replace('/', "--")
    )
}

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

pub fn job(cache: &str, namespace: &str, hf: &HuggingFace) -> Tree {
    let mut env = vec![
        tree!({"name": "HF_HUB_CACHE", "value": MOUNT_PATH}),
        tree!({"name": "REPO", "value": &hf.repo}),
        tree!({"name": "REVISION", "value": &hf.revision}),
        tree!({"name": "MARKER", "value": marker(hf)}),
        tree!({"name": "HUGGINGFACE_HUB", "value": HUGGINGFACE_HUB}),
        tree!({"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "1"}),
        // pip --user needs a writable home; the image's is root's.
        tree!({"name": "HOME", "value": "/tmp"}),
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
            "template": {
                "metadata": {"labels": labels(cache)},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000},
                    "containers": [{
                        "name": "hydrate",
                        "image": DOWNLOADER_IMAGE,
                        "command": ["/bin/sh", "-c", SCRIPT],
                        "env": env,
                        "volumeMounts": [{"name": "cache", "mountPath": MOUNT_PATH}],
                        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
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
