"""ModelCache through the real binary: what it composes on a cluster is what an API server would accept."""

from __future__ import annotations

from pathlib import Path

import yaml

import manifests
from conftest import render_documents as render

REPO = Path(__file__).resolve().parents[2]
FLEET = REPO / "tests" / "fixtures" / "model-cache" / "fleet.yaml"
EXAMPLE = REPO / "examples" / "caches" / "qwen3-coder.yaml"


def composed(docs: list[dict]) -> list[dict]:
    return [d for d in docs[1:] if d.get("kind") != "Result"]


def test_example_stages_a_volume_and_a_job_that_kubernetes_accepts(tmp_path):
    docs = render(EXAMPLE, FLEET)
    objects = composed(docs)
    kinds = sorted(manifests.unwrap(o)["kind"] for o in objects)
    assert kinds == ["ConfigMap", "Job", "Namespace", "PersistentVolumeClaim", "Role", "RoleBinding",
                     "ServiceAccount"], kinds
    for obj in objects:
        manifests.assert_valid(manifests.unwrap(obj))
    status = docs[0]["status"]
    assert status["clusters"] == [{"cluster": "eks-h200-us-east", "phase": "Pending",
                                   "reason": "waiting for the volume and the hydration Job"}]


def test_job_writes_the_hub_cache_layout_for_the_repo_and_revision():
    job = next(manifests.unwrap(o) for o in composed(render(EXAMPLE, FLEET))
               if manifests.unwrap(o)["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HF_HUB_CACHE"] == "/mnt/models"
    assert (env["REPO"], env["REVISION"]) == ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "main")
    # The function's own binary downloads (test_stage.py checks that what it writes under HF_HUB_CACHE is what
    # huggingface_hub resolves offline): nothing is installed at run time.
    assert container["image"].startswith("ghcr.io/modelplaneai/function-modelplane:v")
    assert container["args"] == ["stage"] and "command" not in container
    mounts = container["volumeMounts"]
    assert mounts == [{"name": "cache", "mountPath": "/mnt/models"}]


def test_auth_secret_reaches_the_cluster_as_a_valid_secret(tmp_path):
    xr = yaml.safe_load(EXAMPLE.read_text())
    xr["spec"]["huggingFace"]["authSecret"] = {"name": "hf-token", "key": "token"}
    path = tmp_path / "cache.yaml"
    path.write_text(yaml.safe_dump(xr))
    objects = composed(render(path, FLEET))
    secrets = [o for o in objects if manifests.unwrap(o)["kind"] == "Secret"]
    assert len(secrets) == 1
    manifests.assert_valid(manifests.unwrap(secrets[0]))
    assert "aGZfZXhhbXBsZQ==" not in yaml.safe_dump(objects), "the token is referenced, never copied"


def test_missing_auth_secret_is_a_condition_naming_it(tmp_path):
    xr = yaml.safe_load(EXAMPLE.read_text())
    xr["spec"]["huggingFace"]["authSecret"] = {"name": "absent", "key": "token"}
    path = tmp_path / "cache.yaml"
    path.write_text(yaml.safe_dump(xr))
    docs = render(path, FLEET)
    staged = next(c for c in docs[0]["status"]["conditions"] if c["type"] == "Staged")
    assert staged["reason"] == "AuthSecretMissing"
    assert "ml-team/absent" in staged["message"]
    assert all(manifests.unwrap(o)["kind"] != "Job" for o in composed(docs))
