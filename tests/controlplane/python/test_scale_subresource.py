"""What an autoscaler sees of a ModelDeployment, through real Crossplane: its scale subresource reports the label
selector an HPA requires of every target, and writing the scale (as KEDA's HPA does) sets `spec.replicas`, which
Crossplane then leaves alone. No cluster is needed: the selector is written from the first call on."""

from __future__ import annotations

import copy
import uuid

from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from workload import API

DEPLOYMENT = REPO_ROOT / "examples" / "deployments" / "qwen3-small-autoscaled.yaml"
CONVERGE_SECONDS = 120


def test_the_scale_subresource_carries_a_selector_and_takes_the_autoscalers_replicas(platform: Kube):
    kube = platform
    deployment = copy.deepcopy(load_yaml_documents(DEPLOYMENT)[0])
    namespace = f"scale-{uuid.uuid4().hex[:6]}"
    name = deployment["metadata"]["name"]
    deployment["metadata"]["namespace"] = namespace
    kube.ensure_namespace(namespace)
    kube.apply(deployment)
    scale_path = kube.path(API, "ModelDeployment", namespace, name) + "/scale"
    try:
        scale = wait_for("the scale subresource's selector", lambda: (
            kube.request("GET", scale_path) or {}).get("status", {}).get("selector") and kube.request(
            "GET", scale_path), CONVERGE_SECONDS)
        assert scale["status"]["selector"] == f"modelplane.ai/deployment={name}", scale
        assert scale["spec"]["replicas"] == 1, "spec.replicas defaults to 1"

        # What an HPA does to scale its target.
        kube.request("PATCH", scale_path, body={"spec": {"replicas": 3}},
                     content_type="application/merge-patch+json")
        wait_for("spec.replicas set through the scale subresource",
                 lambda: (kube.get(API, "ModelDeployment", name, namespace) or {}).get("spec", {}).get("replicas") == 3,
                 CONVERGE_SECONDS)
        # Crossplane composes again on the change and leaves the replicas the autoscaler set.
        generation = kube.get(API, "ModelDeployment", name, namespace)["metadata"]["generation"]
        wait_for("Crossplane to have composed the new generation", lambda: any(
            c.get("type") == "Synced" and c.get("observedGeneration", generation) >= generation
            for c in (kube.get(API, "ModelDeployment", name, namespace) or {}).get("status", {}).get("conditions", [])),
            CONVERGE_SECONDS)
        assert kube.get(API, "ModelDeployment", name, namespace)["spec"]["replicas"] == 3
    finally:
        kube.delete(API, "ModelDeployment", name, namespace)
