"""Pods on simulated nodes: a ModelDeployment composed by Crossplane and our function runs on nodes kwok simulates,
placed by the real kube-scheduler with its DRA allocator evaluating our ResourceClaimTemplates against the
ResourceSlices the cluster's InferenceClasses describe (simulated_nodes.py).

Stand-ins left: provider-helm's charts and trust-manager (as in test_crossplane.py), and Envoy Gateway, which would
give the cluster gateway its address: the test writes one, as it would. kwok marks a scheduled pod Running and Ready
without running its container, so readiness probes are not exercised.
"""

from __future__ import annotations

import copy
import os

import pytest

from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from simulated_nodes import POOL_LABEL, RESOURCE_API, cluster_nodes, device_classes
from workload import (API, RELEASE_API, composed_by, conditions, kubeconfig_pointing_back, play_provider_helm,
                      play_trust_manager, tolerating)

EXAMPLES = REPO_ROOT / "examples"
CONVERGE_SECONDS = 180
GATEWAY_API = "gateway.networking.k8s.io/v1"
# Where our cluster gateway lives on every workload cluster (function/src/stack/well_known.rs).
GATEWAY_NAMESPACE = "modelplane-system"
CLUSTER_NAME = "onprem-kwok"


@pytest.fixture(scope="module")
def nodes_running(platform) -> Kube:
    if os.environ.get("CONTROLPLANE_NODES") != "true":
        pytest.fail("these tests need kube-scheduler and kwok: run them under `controlplane.sh run --nodes`")
    return platform


def play_envoy_gateway(kube: Kube) -> bool:
    """Gives the cluster gateway an address, as Envoy Gateway does once its load balancer is up."""
    gateways = kube.list(GATEWAY_API, "Gateway", GATEWAY_NAMESPACE)
    for gateway in gateways:
        if not (gateway.get("status") or {}).get("addresses"):
            kube.patch_status(gateway, {"addresses": [{"type": "IPAddress", "value": "127.0.0.1"}]})
    return bool(gateways)


def existing_cluster(kube: Kube) -> dict:
    """The Existing example cluster under a name of its own, its kubeconfig pointing back at this API server."""
    cluster = copy.deepcopy(load_yaml_documents(EXAMPLES / "clusters" / "existing-onprem.yaml")[0])
    cluster["metadata"]["name"] = CLUSTER_NAME
    secret_ref = cluster["spec"]["cluster"]["existing"]["secretRef"]
    secret_ref["name"] = f"{CLUSTER_NAME}-kubeconfig"
    namespace = secret_ref.get("namespace", "modelplane-system")
    kube.ensure_namespace(namespace)
    kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_ref["name"], "namespace": namespace},
                "stringData": {secret_ref.get("key", "kubeconfig"): kubeconfig_pointing_back(kube)}})
    return cluster


def standalone_deployment(cluster: dict) -> dict:
    """The small example model, one replica of two engine copies, tolerating the cluster's taints."""
    deployment = copy.deepcopy(load_yaml_documents(EXAMPLES / "deployments" / "qwen3-small.yaml")[0])
    deployment["spec"]["replicas"] = 1
    spec = deployment["spec"]["template"]["spec"]
    spec.pop("clusterSelector", None)
    spec["tolerations"] = tolerating(cluster)
    return deployment


def test_a_standalone_deployment_runs_on_scheduled_nodes_with_its_devices_and_frees_them(nodes_running):
    kube = nodes_running
    classes = load_yaml_documents(EXAMPLES / "classes")
    cluster = existing_cluster(kube)
    simulated = device_classes(classes) + cluster_nodes(cluster, classes)
    for obj in classes + simulated:
        kube.apply(obj)
    kube.apply(cluster)

    def cluster_now() -> dict:
        return kube.get(API, "InferenceCluster", CLUSTER_NAME) or {}

    wait_for("the InferenceCluster's helm Releases", lambda: composed_by(kube, RELEASE_API, "Release", CLUSTER_NAME),
             CONVERGE_SECONDS, lambda: str(conditions(cluster_now())))
    play_trust_manager(kube)

    def serving() -> bool:
        play_provider_helm(kube, CLUSTER_NAME)
        play_envoy_gateway(kube)
        status = cluster_now().get("status") or {}
        return conditions(cluster_now()).get("Ready") == "True" and bool((status.get("gateway") or {}).get("address"))

    wait_for("the InferenceCluster Ready with its gateway's address", serving, CONVERGE_SECONDS,
             lambda: str(cluster_now().get("status")))

    deployment = standalone_deployment(cluster)
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    kube.ensure_namespace(namespace)
    kube.apply(deployment)
    kube.apply({"apiVersion": API, "kind": "ModelService", "metadata": {"name": name, "namespace": namespace},
                "spec": {"endpoints": [{"name": "ours", "priority": 0,
                                        "selector": {"matchLabels": {"modelplane.ai/deployment": name}}}]}})

    def deployment_now() -> dict:
        return kube.get(API, "ModelDeployment", name, namespace) or {}

    def engine_pods() -> list[dict]:
        return [p for p in kube.list("v1", "Pod", namespace)
                if (p["metadata"].get("labels") or {}).get("modelplane.ai/workload", "").startswith(f"{name}-0-")]

    def running_and_ready(pod: dict) -> bool:
        status = pod.get("status") or {}
        return status.get("phase") == "Running" and conditions(pod).get("Ready") == "True"

    copies = deployment["spec"]["template"]["spec"]["engines"][0]["copies"]
    pods = wait_for(f"{copies} engine pods Running and Ready",
                    lambda: (lambda ps: len(ps) == copies and all(map(running_and_ready, ps)) and ps)(engine_pods()),
                    CONVERGE_SECONDS, lambda: str([(p["metadata"]["name"], p.get("status")) for p in engine_pods()]))

    # The scheduler put each pod on a node of the cluster's GPU pool and allocated it one device there.
    gpu_nodes = {n["metadata"]["name"] for n in kube.list("v1", "Node")
                 if n["metadata"]["labels"].get(POOL_LABEL) == "gpu" and n["metadata"]["name"].startswith(CLUSTER_NAME)}
    claims = {c["metadata"]["name"]: c for c in kube.list(RESOURCE_API, "ResourceClaim", namespace)}
    for pod in pods:
        assert pod["spec"]["nodeName"] in gpu_nodes, (pod["metadata"]["name"], pod["spec"]["nodeName"])
        (claim_status,) = pod["status"]["resourceClaimStatuses"]
        allocated = claims[claim_status["resourceClaimName"]]["status"]["allocation"]["devices"]["results"]
        assert [(r["driver"], r["pool"]) for r in allocated] == [("gpu.nvidia.com", pod["spec"]["nodeName"])], allocated

    ready = wait_for("the ModelDeployment Ready", lambda: conditions(deployment_now()).get("Ready") == "True"
                     and deployment_now(), CONVERGE_SECONDS, lambda: str(deployment_now().get("status")))
    assert ready["status"]["readyReplicas"] == 1, ready["status"]

    endpoints = wait_for("the replica's ModelEndpoint", lambda: [
        e for e in kube.list(API, "ModelEndpoint", namespace)
        if (e["metadata"].get("labels") or {}).get("modelplane.ai/deployment") == name], CONVERGE_SECONDS)
    assert [e["metadata"]["labels"]["modelplane.ai/cluster"] for e in endpoints] == [CLUSTER_NAME], endpoints

    def service_endpoints() -> dict:
        service = kube.get(API, "ModelService", name, namespace) or {}
        return (service.get("status") or {}).get("endpoints") or {}

    listed = wait_for("the ModelService to list the endpoint", lambda: service_endpoints().get("total") and
                      service_endpoints(), CONVERGE_SECONDS, lambda: str(service_endpoints()))
    assert listed["total"] == 1, listed

    # Deleting the deployment takes its pods, and with them their claims: the devices are free again.
    kube.delete(API, "ModelService", name, namespace)
    kube.delete(API, "ModelDeployment", name, namespace)
    wait_for("the engine pods gone", lambda: not engine_pods(), CONVERGE_SECONDS,
             lambda: str([p["metadata"]["name"] for p in engine_pods()]))
    wait_for("the ResourceClaims released", lambda: not kube.list(RESOURCE_API, "ResourceClaim", namespace),
             CONVERGE_SECONDS, lambda: str([c["metadata"]["name"] for c in kube.list(RESOURCE_API, "ResourceClaim",
                                                                                     namespace)]))

    kube.delete(API, "InferenceCluster", CLUSTER_NAME)
    wait_for("the InferenceCluster removed", lambda: not cluster_now(), CONVERGE_SECONDS)
    for obj in simulated:
        meta = obj["metadata"]
        kube.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
