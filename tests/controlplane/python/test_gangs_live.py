"""The seed's gang, live (`controlplane.sh run --nodes --kubelets 2`): the two-node Leader/Worker engine our function
composes on each stack, its pods made as LeaderWorkerSet and Grove make them (test_gangs.py builds them; neither
controller's module is served here), runs as real containers on the two real kubelets, one pod a node, each pod's
eight H200s allocated by kube-scheduler from the nodes' DRA drivers. The mock engine's image stands in for vLLM's;
the user's command runs verbatim (`/bin/sh -c "exec vllm serve ... --master-addr=$(MODELPLANE_LEADER_ADDRESS)"`).

Proven here: the kubelet expands the leader address our env composes, CoreDNS resolves it to the leader pod through
the headless Service, the worker connects to the leader's port, the leader turns Ready (its composed probes) only
once its worker is connected, and each pod reads its own MODELPLANE_RANK. Not proven: the controllers themselves,
KAI's gang placement (kube-scheduler places the pods) and real GPUs.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import requests

import images
from kube import Kube, wait_for
from real_nodes import POD_SECONDS, condition, on_real_node, pod_status, probe_failures, require_kubelets
from test_gangs import LEADER_ADDRESS, composed, gang_fleet, grove_pods, host_address, lws_pods, one

RESOURCE_API = "resource.k8s.io/v1"
ENGINE_PORT = 8000  # the leader's API and a headless worker's info port (MOCK_ENGINE_INFO_PORT's default)


def live(pod_object: dict) -> dict:
    """The pod as a test runs it on a real node: the mock engine's image in place of the user's (command and args
    kept), on a real node instead of the pool's (whose label the real nodes do not carry)."""
    spec = copy.deepcopy(pod_object["spec"])
    spec.pop("nodeSelector", None)
    for container in spec["containers"]:
        container.update(image=images.MOCK_ENGINE_IMAGE, imagePullPolicy="Never")
    return pod_object | {"spec": on_real_node(spec)}


def mock_info(kube: Kube, namespace: str, name: str) -> dict:
    pod_object = kube.get("v1", "Pod", name, namespace)
    session = requests.Session()
    session.trust_env = False
    return session.get(f"http://{pod_object['status']['podIP']}:{ENGINE_PORT}/mock/info", timeout=10).json()


def running(kube: Kube, namespace: str, name: str) -> dict:
    return wait_for(f"pod {namespace}/{name} Running", lambda: (
        p := kube.get("v1", "Pod", name, namespace)) and (p.get("status") or {}).get("phase") == "Running"
        and p["status"].get("podIP") and p, POD_SECONDS, lambda: pod_status(kube, namespace, name))


@pytest.fixture(scope="module")
def engine_image(kube, tmp_path_factory) -> str:
    if len(require_kubelets()) < 2:
        pytest.fail("the gang needs two real nodes: run under `controlplane.sh run --nodes --kubelets 2`")
    return images.load_test_image(images.MOCK_ENGINE_IMAGE, tmp_path_factory.mktemp("images"))


@pytest.mark.parametrize("stack,kind", [("Standard", "LeaderWorkerSet"), ("Dynamo", "PodCliqueSet")])
def test_the_seeds_gang_runs_and_its_worker_finds_its_leader_through_dns(kube, engine_image, stack, kind,
                                                                         tmp_path: Path):
    cluster, deployment = gang_fleet(stack, copies=1, workers=1)
    manifests = composed(cluster, deployment, tmp_path)
    pods, service, expected = (lws_pods if kind == "LeaderWorkerSet" else grove_pods)(one(manifests, kind))
    namespace = deployment["metadata"]["namespace"]
    pods = [live(p) for p in pods]
    (leader_name,) = {leader for leader, _ in expected.values()}
    leader = next(p for p in pods if p["metadata"]["name"] == leader_name)
    workers = [p for p in pods if p is not leader]
    assert len(workers) == 1, [p["metadata"]["name"] for p in pods]

    kube.ensure_namespace(namespace)
    try:
        for claim_template in (m for m in manifests if m["kind"] == "ResourceClaimTemplate"):
            kube.apply(claim_template)
        kube.apply(service)

        # The leader alone: running, but its composed probes fail (503) while no worker is connected.
        kube.apply(leader)
        running(kube, namespace, leader_name)
        failures = wait_for(f"the kubelet's failed probes of the lone leader {leader_name}",
                            lambda: probe_failures(kube, namespace, leader_name), POD_SECONDS,
                            lambda: pod_status(kube, namespace, leader_name))
        assert any("503" in f for f in failures), failures
        assert condition(kube.get("v1", "Pod", leader_name, namespace), "Ready") == "False"
        alone = mock_info(kube, namespace, leader_name)
        assert alone["role"] == "leader" and not alone["ready"] and not alone["connectedRanks"], alone

        for worker in workers:
            kube.apply(worker)
        ready = wait_for(f"the leader {leader_name} Ready once its worker connected", lambda: (
            p := kube.get("v1", "Pod", leader_name, namespace)) and condition(p, "Ready") == "True" and p,
            2 * POD_SECONDS, lambda: pod_status(kube, namespace, leader_name))
        placed = [ready] + [running(kube, namespace, w["metadata"]["name"]) for w in workers]

        # One pod a real node, each with the eight devices of its own node.
        nodes = [p["spec"]["nodeName"] for p in placed]
        assert sorted(nodes) == sorted(set(require_kubelets())), nodes
        for pod_object in placed:
            (claim_status,) = pod_object["status"]["resourceClaimStatuses"]
            claim = kube.get(RESOURCE_API, "ResourceClaim", claim_status["resourceClaimName"], namespace)
            results = claim["status"]["allocation"]["devices"]["results"]
            assert {r["pool"] for r in results} == {pod_object["spec"]["nodeName"]} and len(results) == 8, results

        leader_ip = ready["status"]["podIP"]
        leader_info = mock_info(kube, namespace, leader_name)
        assert leader_info["ready"] is True and leader_info["connectedRanks"] == [1], leader_info
        for pod_object in placed:
            name = pod_object["metadata"]["name"]
            info = mock_info(kube, namespace, name)
            # Each pod reads its own rank, through the env our template composes from the controller's.
            assert info["modelplaneRank"] == expected[name][1], (name, info)
            assert info["env"][LEADER_ADDRESS] == info["masterAddr"], (name, info)
            gpus = {k for k in info["env"] if k.startswith("GPU_DEVICE_")}
            assert len(gpus) == 8, (name, info["env"])
        for worker in workers:
            name = worker["metadata"]["name"]
            info = mock_info(kube, namespace, name)
            # The command got the leader's address through $(MODELPLANE_LEADER_ADDRESS), CoreDNS resolved it to
            # the leader pod, and the worker holds a connection to the leader's master port.
            assert info["role"] == "worker" and info["masterAddr"] in (
                host_address(ready), f"{host_address(ready)}.svc.cluster.local"), info
            assert f"--master-addr={info['masterAddr']}" in info["argv"], info["argv"]
            assert leader_ip in (info["masterAddrResolved"] or []), info
            assert info["leaderConnection"].startswith(f"{leader_ip}:"), info
            assert info["ready"] is True, info
    finally:
        kube.delete("v1", "Namespace", namespace)
        wait_for(f"namespace {namespace} gone (its pods stopped, their claims unprepared)",
                 lambda: kube.get("v1", "Namespace", namespace) is None, 2 * POD_SECONDS)
