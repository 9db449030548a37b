"""GPU nodes made from InferenceClasses, for the real kube-scheduler and kwok (controlplane.sh up --nodes).

Each pool of an InferenceCluster becomes `nodeCount` Nodes that kwok runs (its annotation), labelled and tainted as
the pool's node group is (`modelplane.ai/pool`, the GPU taint and the cluster's own taints), and, for each device
of the pool's class, the ResourceSlice the class says its DRA driver publishes on such a node: `count` devices with
the class's attributes and capacity. The scheduler's DRA allocator then evaluates our composed
ResourceClaimTemplates, their device class and their CEL selectors against exactly what the class declares.

Classes name no CPU or memory, so every simulated node offers the same generous amount; what a replica competes
for here is its devices and its pool.
"""

from __future__ import annotations

import os

import pytest

from kube import Kube, wait_for

# How long kwok may take to mark a new node Ready and kube-controller-manager to lift its not-ready taint.
NODES_READY_SECONDS = 60
# What kwok is told to run (controlplane.sh --manage-nodes-with-annotation-selector).
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
# The labels and taint every pool's node group gets (function/src/api/inference_cluster.rs).
POOL_LABEL = "modelplane.ai/pool"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
# The pool of untainted nodes every provisioned cluster also has, where the stack's own pods run.
SYSTEM_POOL = "system"
NODE_RESOURCES = {"cpu": "192", "memory": "2048Gi", "pods": "110"}
RESOURCE_API = "resource.k8s.io/v1"


def node(name: str, pool: str, taints: list[dict]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": dict(KWOK_ANNOTATION),
                     "labels": {POOL_LABEL: pool, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "type": "kwok"}},
        "spec": {"taints": taints},
        "status": {"capacity": dict(NODE_RESOURCES), "allocatable": dict(NODE_RESOURCES)},
    }


def slice_devices(device: dict) -> list[dict]:
    """The devices a node's ResourceSlice lists for one device entry of an InferenceClass: `count` of them, named
    `<name>-<i>`, each with the class's attributes and capacity."""
    return [{"name": f"{device['name']}-{i}", "attributes": device.get("attributes") or {},
             "capacity": device.get("capacity") or {}} for i in range(device.get("count", 1))]


def driver_devices(inference_class: dict, driver: str) -> dict:
    """The devices file of the test DRA driver (tests/controlplane/modules/dra-driver) on a real node of
    `inference_class`: the devices of `driver` the class declares, as a simulated node's slice lists them."""
    return {"driver": driver, "devices": [d for device in inference_class["spec"].get("devices") or []
                                          if device.get("claim") == "DRA" and device["driver"] == driver
                                          for d in slice_devices(device)]}


def resource_slice(node_name: str, device: dict) -> dict:
    """The slice the device's DRA driver publishes on `node_name`: one pool per node, as the NVIDIA driver does."""
    devices = slice_devices(device)
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{device['name']}"},
        "spec": {"driver": device["driver"], "nodeName": node_name,
                 "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1}, "devices": devices},
    }


def device_classes(classes: list[dict]) -> list[dict]:
    """The DeviceClasses the drivers' charts install: each selects its driver's devices."""
    seen: dict[str, str] = {}
    for inference_class in classes:
        for device in inference_class["spec"].get("devices") or []:
            if device.get("claim") == "DRA" and device.get("deviceClassName"):
                seen[device["deviceClassName"]] = device["driver"]
    return [{"apiVersion": RESOURCE_API, "kind": "DeviceClass", "metadata": {"name": name},
             "spec": {"selectors": [{"cel": {"expression": f"device.driver == {driver!r}"}}]}}
            for name, driver in sorted(seen.items())]


def cluster_nodes(cluster: dict, classes: list[dict], system_nodes: int = 1) -> list[dict]:
    """The Nodes and ResourceSlices of every pool of `cluster`, named `<cluster>-<pool>-<i>`, and its system
    pool's nodes."""
    by_name = {c["metadata"]["name"]: c for c in classes}
    name = cluster["metadata"]["name"]
    spec = cluster["spec"]
    out = [node(f"{name}-{SYSTEM_POOL}-{i}", SYSTEM_POOL, []) for i in range(system_nodes)]
    for pool in spec.get("nodePools") or []:
        devices = [d for d in by_name[pool["className"]]["spec"].get("devices") or [] if d.get("claim") == "DRA"]
        taints = ([dict(GPU_TAINT)] if devices else []) + [dict(t) for t in spec.get("taints") or []]
        for i in range(pool.get("nodeCount", 1)):
            node_name = f"{name}-{pool['name']}-{i}"
            out.append(node(node_name, pool["name"], taints))
            out += [resource_slice(node_name, device) for device in devices]
    return out


def apply_simulated(kube: Kube, simulated: list[dict]) -> None:
    """Creates the simulated objects and waits until every Node is Ready and carries only the taints it was made
    with. The API server taints a new Node not-ready until its Ready condition is True, so a pod scheduled in
    that moment is found unschedulable for a reason no case is about."""
    for obj in simulated:
        kube.apply(obj)
    made = {o["metadata"]["name"]: o["spec"]["taints"] for o in simulated if o["kind"] == "Node"}

    def settled(name: str) -> bool:
        live = kube.get("v1", "Node", name) or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True"
                    for c in (live.get("status") or {}).get("conditions") or [])
        return ready and ((live.get("spec") or {}).get("taints") or []) == made[name]

    wait_for("the simulated nodes Ready and untainted", lambda: all(settled(n) for n in made), NODES_READY_SECONDS,
             lambda: str({n: (kube.get("v1", "Node", n) or {}).get("spec") for n in made if not settled(n)}))


def require_nodes() -> None:
    """Fails a test that needs pods scheduled when the control plane runs without kube-scheduler and kwok."""
    if os.environ.get("CONTROLPLANE_NODES") != "true":
        pytest.fail("these tests need kube-scheduler and kwok: run them under `controlplane.sh run --nodes`")


def remove(kube: Kube, namespace: str, simulated: list[dict]) -> None:
    """Deletes a test's namespace and the Nodes and ResourceSlices it simulated (DeviceClasses are shared). No
    kubelet confirms a pod's end on a node that is going away, so the pods go at once, before their nodes."""
    kube.request("DELETE", kube.path("v1", "Pod", namespace), params={"gracePeriodSeconds": "0"},
                 what=f"delete the pods of {namespace}")
    kube.delete("v1", "Namespace", namespace)
    for obj in simulated:
        if obj["kind"] != "DeviceClass":
            kube.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"])


def play_pod_readiness(kube: Kube, namespace: str) -> int:
    """Reports ready again every running pod in `namespace` whose node is Ready but which the node lifecycle
    controller marked not ready while the node's heartbeats lapsed (across a kube-apiserver restart), as its kubelet
    would once back. kwok marks a pod ready once, in its stage, and never again. Returns how many it reported."""
    ready_nodes = {n["metadata"]["name"] for n in kube.list("v1", "Node")
                   if any(c["type"] == "Ready" and c["status"] == "True"
                          for c in (n.get("status") or {}).get("conditions") or [])}
    reported = 0
    for pod in kube.list("v1", "Pod", namespace):
        status = pod.get("status") or {}
        stale = [c for c in status.get("conditions") or []
                 if c["type"] in ("Ready", "ContainersReady") and c["status"] != "True"]
        if status.get("phase") != "Running" or not stale or pod["spec"].get("nodeName") not in ready_nodes:
            continue
        patch = {"status": {"conditions": [{"type": c["type"], "status": "True"} for c in stale]}}
        path = kube.path("v1", "Pod", namespace, pod["metadata"]["name"]) + "/status"
        kube.request("PATCH", path, body=patch, content_type="application/strategic-merge-patch+json",
                     what=f"readiness of pod {namespace}/{pod['metadata']['name']}", ok=(404,))
        reported += 1
    return reported
