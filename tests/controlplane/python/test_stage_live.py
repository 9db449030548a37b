"""A ModelCache's hydration Job, as our function composes it, stages weights in a real container on a real node
(`controlplane.sh run --kubelets 1`).

The Job runs the function's own image (built here, `modelplane.test/function-modelplane:local`) against a stand-in
of the Hugging Face Hub (tests/python/hub_standin.py) listening on the first node's bridge address, into a real
volume (a hostPath PersistentVolume bound to the composed claim). Its progress reaches the API server through its
composed ServiceAccount, whose Role allows patching that one ConfigMap and nothing else (RBAC is enforced here),
found as in any cluster through the `kubernetes` Service. Then a pod mounting the same claim resolves the repo id the
way the Hub client does, the real huggingface_hub resolves the volume's directory offline, and the Job's report,
observed as provider-kubernetes would report it, becomes the ModelCache's status through `render`.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import images
import installs
from kube import REPO_ROOT, Kube, wait_for
from real_nodes import (KUBELET_LABEL, TOLERATE_ALL, load_shell_image, pod, pod_log, pod_status, require_kubelets,
                        shell_container, wait_finished)

sys.path.insert(0, str(REPO_ROOT / "tests" / "python"))
import hub_standin  # noqa: E402

NAMESPACE = "stage-live"
CACHE = "tiny"
REPO_ID = "acme/tiny-model"
STORAGE_CLASS = "stage-live"
FILES = {
    "config.json": b'{"architectures": ["TinyForCausalLM"]}\n',
    "tokenizer/vocab.txt": b"\n".join(f"token{i}".encode() for i in range(100)),
    "model.safetensors": os.urandom(6 << 20),
}
EXAMPLE = REPO_ROOT / "examples" / "caches" / "qwen3-coder.yaml"
FLEET = REPO_ROOT / "tests" / "fixtures" / "model-cache" / "fleet.yaml"
# Image import, a pod start and a 6 MiB download on a loaded 2-core machine.
JOB_SECONDS = 240


def composed_manifests(tmp_path: Path) -> dict[str, dict]:
    """What our function composes on the cluster for a ModelCache of the stand-in's repo, by kind."""
    xr = yaml.safe_load(EXAMPLE.read_text())
    xr["metadata"] = {"name": CACHE, "namespace": NAMESPACE}
    xr["spec"]["huggingFace"] = {"repo": REPO_ID, "revision": "main", "sizeGiB": 1}
    path = tmp_path / "cache.yaml"
    path.write_text(yaml.safe_dump(xr))
    fleet = [d for d in yaml.safe_load_all(FLEET.read_text()) if d and d["kind"] == "InferenceCluster"]
    fleet_path = tmp_path / "fleet.yaml"
    fleet_path.write_text(yaml.safe_dump_all(fleet))
    docs = installs.render(path, fleet_path)[1:]
    return {d["spec"]["forProvider"]["manifest"]["kind"]: d["spec"]["forProvider"]["manifest"]
            for d in docs if d.get("kind") == "Object"}


def can(kube: Kube, user: str, verb: str, name: str) -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": user, "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}"],
                       "resourceAttributes": {"namespace": NAMESPACE, "verb": verb, "resource": "configmaps",
                                              "name": name}}}
    answer = kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review)
    return bool(answer["status"].get("allowed"))


@pytest.fixture
def standin():
    host = os.environ.get("CONTROLPLANE_CLUSTER_DNS") or pytest.fail("no CONTROLPLANE_CLUSTER_DNS: run under "
                                                                     "`controlplane.sh run --kubelets 1`")
    with hub_standin.HubStandIn(hub_standin.repo(REPO_ID, FILES), host=host) as hub:
        yield hub


def test_the_composed_job_stages_into_a_real_volume_that_resolves(kube: Kube, standin, tmp_path):
    require_kubelets()
    function_image = images.load_test_image(images.FUNCTION_IMAGE, tmp_path / "function-image")
    load_shell_image(tmp_path)
    volume = tmp_path / "volume"
    volume.mkdir()
    volume.chmod(0o777)
    manifests = composed_manifests(tmp_path)
    try:
        kube.ensure_namespace(NAMESPACE)
        claim = manifests["PersistentVolumeClaim"]
        claim["spec"]["storageClassName"] = STORAGE_CLASS
        kube.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "stage-live"},
                    "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
                             "storageClassName": STORAGE_CLASS, "hostPath": {"path": str(volume)},
                             "claimRef": {"namespace": NAMESPACE, "name": claim["metadata"]["name"]},
                             "persistentVolumeReclaimPolicy": "Retain"}})
        for kind in ("PersistentVolumeClaim", "ConfigMap", "ServiceAccount", "Role", "RoleBinding"):
            kube.apply(manifests[kind])

        job = manifests["Job"]
        spec = job["spec"]["template"]["spec"]
        container = spec["containers"][0]
        assert container["args"] == ["stage"]
        container["image"], container["imagePullPolicy"] = function_image, "Never"
        added = {"HF_ENDPOINT": standin.endpoint, "PROGRESS_INTERVAL_SECONDS": "1"}
        container["env"] = [e for e in container["env"] if e["name"] not in added] + [
            {"name": k, "value": v} for k, v in added.items()]
        spec |= {"nodeSelector": dict(KUBELET_LABEL), "tolerations": list(TOLERATE_ALL)}
        kube.apply(job)
        name = job["metadata"]["name"]

        def finished():
            j = kube.get("batch/v1", "Job", name, NAMESPACE) or {}
            done = {c["type"] for c in (j.get("status") or {}).get("conditions") or [] if c["status"] == "True"}
            return done & {"Complete", "Failed"} or None

        def logs() -> str:
            pods = kube.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods",
                                params={"labelSelector": f"job-name={name}"})["items"]
            return "\n".join(pod_status(kube, NAMESPACE, p["metadata"]["name"]) + "\n" +
                             pod_log(kube, NAMESPACE, p["metadata"]["name"]) for p in pods)

        state = wait_for(f"Job {name} finished", finished, JOB_SECONDS, logs)
        assert state == {"Complete"}, logs()

        # The report came through the API server, under the Job's own ServiceAccount.
        report = kube.get("v1", "ConfigMap", manifests["ConfigMap"]["metadata"]["name"], NAMESPACE)["data"]
        total = sum(len(c) for c in FILES.values())
        assert (report["state"], report["filesStaged"], report["bytesStaged"], report["bytesTotal"]) == \
               ("Complete", "3", str(total), str(total)), report
        account = f"system:serviceaccount:{NAMESPACE}:{spec['serviceAccountName']}"
        assert can(kube, account, "patch", manifests["ConfigMap"]["metadata"]["name"])
        assert not can(kube, account, "patch", "another-configmap")
        assert not can(kube, account, "create", manifests["ConfigMap"]["metadata"]["name"])

        # An engine pod mounting the claim resolves the repo id as the Hub client does: refs/main, then the
        # snapshot's symlinks into blobs.
        folder = "/mnt/models/models--acme--tiny-model"
        script = (f'c=$(cat {folder}/refs/main) && sha256sum {folder}/snapshots/$c/model.safetensors '
                  f'&& cat {folder}/snapshots/$c/config.json')
        engine = pod(NAMESPACE, "engine", [shell_container("engine", script, volumeMounts=[
            {"name": "cache", "mountPath": "/mnt/models", "readOnly": True}])], restartPolicy="Never",
            volumes=[{"name": "cache", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}])
        kube.apply(engine)
        assert wait_finished(kube, NAMESPACE, "engine")["status"]["phase"] == "Succeeded"
        log = pod_log(kube, NAMESPACE, "engine")
        assert hashlib.sha256(FILES["model.safetensors"]).hexdigest() in log and "TinyForCausalLM" in log, log

        # The real huggingface_hub resolves the volume's directory offline.
        check = ("import sys\nfrom huggingface_hub import snapshot_download\n"
                 "print(snapshot_download(sys.argv[1], local_files_only=True))")
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")} | {
            "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(volume)}
        done = subprocess.run([sys.executable, "-c", check, REPO_ID], capture_output=True, text=True, timeout=60,
                              env=env)
        assert done.returncode == 0, done.stderr
        snapshot = Path(done.stdout.strip())
        assert {str(p.relative_to(snapshot)): p.read_bytes() for p in snapshot.rglob("*") if p.is_file()} == FILES

        # The report, observed as provider-kubernetes reports it, is the ModelCache's status.
        observed = {"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
                    "metadata": {"name": "progress", "annotations": {
                        "crossplane.io/composition-resource-name": "progress-eks-h200-us-east"}},
                    "status": {"atProvider": {"manifest": {"apiVersion": "v1", "kind": "ConfigMap",
                                                           "data": report}}}}
        (tmp_path / "observed.yaml").write_text(yaml.safe_dump(observed))
        xr = tmp_path / "cache.yaml"
        status = installs.render(xr, tmp_path / "fleet.yaml", observed=(tmp_path / "observed.yaml",))[0]["status"]
        [cluster] = status["clusters"]
        assert (cluster["filesStaged"], cluster["bytesStaged"], cluster["percent"]) == (3, total, 100), status
    finally:
        kube.delete("v1", "Pod", "engine", NAMESPACE)
        kube.delete("batch/v1", "Job", manifests["Job"]["metadata"]["name"], NAMESPACE)
        kube.delete("v1", "PersistentVolumeClaim", manifests["PersistentVolumeClaim"]["metadata"]["name"], NAMESPACE)
        kube.delete("v1", "PersistentVolume", "stage-live")
