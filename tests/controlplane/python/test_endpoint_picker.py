"""The endpoint picker running the scheduling we compose for a replica, over the InferencePool we compose for it,
against mock engines: which endpoint it picks is what the configured scorers mean.

The picker runs as a process of the test, from the composed config and arguments (picker.py says how).

The pool's pods are API objects on the test control plane (no scheduler or node takes them: the test writes their
status, Ready, with a loopback address each); the engines behind them are mock-engine processes on those
addresses, reporting vLLM's queue metric as the test sets it. test_serving_live.py runs the same picker over
engine pods on real nodes.

Not proven here: the prefill/decode split. Its plugins (disagg-profile-handler, prefill-filter, decode-filter,
prefix-based-pd-decider, disagg-headers-handler) exist only in llm-d's router, which is not reachable here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import requests
import yaml

import installs
from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from picker import COMPOSED_GROUP, Picker, Process

DEPLOYMENT = REPO_ROOT / "examples" / "deployments" / "qwen3-small.yaml"
STANDARD = REPO_ROOT / "tests" / "fixtures" / "clusters" / "standard"
# What the picker watches, as the `platform` fixture installs them: InferencePools and InferenceObjectives.
GAIE = REPO_ROOT / "tests" / "crds" / "routing" / "gaie"
PICKER_CRDS = [GAIE / "v1.6.0" / "inference.networking.k8s.io_inferencepools.yaml",
               GAIE / "v1.5.0" / "inference.networking.x-k8s.io_inferenceobjectives.yaml"]
# Loopback addresses of the pool's pods (Linux routes all of 127/8 to lo).
ADDRESSES = ["127.77.0.11", "127.77.0.12", "127.77.0.13"]


def composed_replica(tmp_path: Path) -> dict[str, dict]:
    """The InferencePool, the picker's ConfigMap and its Deployment composed for the example's replica 0 on a
    cluster with a gateway address."""
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    for source in STANDARD.glob("*.yaml"):
        docs = load_yaml_documents(source)
        for doc in docs:
            if doc["kind"] == "InferenceCluster":
                doc["status"]["gateway"] = {"address": "203.0.113.7", "admits": "Nobody"}  # its client policy held
        (clusters / source.name).write_text(yaml.safe_dump_all(docs))
    composed = installs.render(DEPLOYMENT, clusters)[1:]
    manifests = [((o.get("spec") or {}).get("forProvider") or {}).get("manifest") for o in composed]
    (pool,) = [m for m in manifests if m and m["kind"] == "InferencePool" and m["metadata"]["name"].endswith("-0")]
    picker = pool["spec"]["endpointPickerRef"]["name"]
    (config,) = [m for m in manifests if m and m["kind"] == "ConfigMap" and m["metadata"]["name"] == picker]
    (deployment,) = [m for m in manifests if m and m["kind"] == "Deployment" and m["metadata"]["name"] == picker]
    return {"pool": pool, "config": config, "deployment": deployment}


def pod(pool: dict, index: int) -> dict:
    """A serving pod of POOL that nothing schedules: the test writes its status."""
    labels = pool["spec"]["selector"]["matchLabels"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{pool['metadata']['name']}-engine-{index}",
                         "namespace": pool["metadata"]["namespace"], "labels": labels},
            "spec": {"schedulerName": "modelplane.test/nobody",
                     "containers": [{"name": "engine", "image": "modelplane.test/engine:local"}]}}


class LoopbackPool:
    """The picker, its engines on loopback and their pods."""

    def __init__(self, kube: Kube, replica: dict, tmp_path: Path):
        self.kube, self.tmp_path = kube, tmp_path
        self.processes: list[Process] = []
        self.pods: list[dict] = []
        self.pool = replica["pool"]
        try:
            self._start(replica)
        except BaseException:
            self.stop()
            raise

    def _start(self, replica: dict) -> None:
        kube, tmp_path = self.kube, self.tmp_path
        pool = self.pool
        self.namespace = pool["metadata"]["namespace"]
        ((port,),) = [[p["number"] for p in pool["spec"]["targetPorts"]]]
        self.port = port
        self.engines = {address: f"http://{address}:{port}" for address in ADDRESSES}
        engine = installs.built_component("mock-engine")
        taken = [address for address in ADDRESSES if self._answers(address)]
        assert not taken, f"something already serves {taken} on port {port}: a test's engines left behind?"
        for address in ADDRESSES:
            self.processes.append(Process([str(engine), "serve", "--host", address, "--port", str(port)],
                                          tmp_path / f"engine-{address}.log"))
        for address, process in zip(ADDRESSES, self.processes):
            wait_for(f"engine {address}", lambda p=process, a=address: p.alive() and self._answers(a), 20,
                     process.log)
        kube.ensure_namespace(self.namespace)
        # A test that cleans up a composed cluster takes the CRDs its stack installed with it: install them again.
        for crd in load_yaml_documents(*PICKER_CRDS):
            kube.apply(crd)
            wait_for(f"CRD {crd['metadata']['name']} established",
                     lambda name=crd["metadata"]["name"]: installs.is_established(kube, name), 60)
        kube.apply(pool)
        for index, address in enumerate(ADDRESSES):
            created = kube.apply(pod(pool, index))
            kube.patch_status(created, {
                "phase": "Running", "podIP": address, "podIPs": [{"ip": address}], "hostIP": "127.0.0.1",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}]})
            self.pods.append(created)
        self.picker = Picker(replica["config"], replica["deployment"], Path(os.environ["KUBECONFIG"]), tmp_path)
        self.processes.append(self.picker.process)
        self.set_waiting({address: 0 for address in ADDRESSES})
        self.picker.wait_picking()

    def _answers(self, address: str) -> bool:
        try:
            return requests.get(self.engines[address] + "/mock/info", timeout=2).ok
        except requests.ConnectionError:
            return False

    def set_waiting(self, waiting: dict[str, int]) -> None:
        for address, count in waiting.items():
            response = requests.post(self.engines[address] + "/mock/state", json={"waiting": count}, timeout=5)
            assert response.ok, response.text

    def picks(self, prompt: str, expected: str) -> None:
        self.picker.picks(prompt, f"{expected}:{self.port}")

    def stop(self) -> None:
        for process in self.processes:
            process.stop()
        for created in self.pods:
            self.kube.delete("v1", "Pod", created["metadata"]["name"], self.namespace)
        if installs.is_established(self.kube, "inferencepools.inference.networking.k8s.io"):
            self.kube.delete(self.pool["apiVersion"], "InferencePool", self.pool["metadata"]["name"], self.namespace)


@pytest.fixture
def picker(platform, tmp_path):
    running = LoopbackPool(platform, composed_replica(tmp_path), tmp_path)
    yield running
    running.stop()


def test_the_composed_scheduling_is_what_the_picker_loads(tmp_path):
    """The composed profile, as the picker reads it: the prefix-cache producer, prefix-cache and queue scorers
    weighted 2 and 1, and the max-score picker."""
    config = yaml.safe_load(composed_replica(tmp_path)["config"]["data"]["epp-config.yaml"])
    assert config["apiVersion"] == COMPOSED_GROUP and config["kind"] == "EndpointPickerConfig"
    types = [p["type"] for p in config["plugins"]]
    assert types == ["approx-prefix-cache-producer", "prefix-cache-scorer", "queue-scorer", "max-score-picker"]
    (profile,) = config["schedulingProfiles"]
    weights = {p["pluginRef"]: p.get("weight") for p in profile["plugins"]}
    assert weights == {"prefix-cache-scorer": 2, "queue-scorer": 1, "max-score-picker": None}


def test_the_picker_picks_the_shortest_queue(picker):
    """With no prompt seen before, the prefix-cache scores tie and the queue scorer decides."""
    a, b, c = ADDRESSES
    picker.set_waiting({a: 6, b: 0, c: 12})
    for n in range(5):
        picker.picks(f"prompt {n} of the first round, never seen before", b)
    picker.set_waiting({a: 0, b: 6, c: 12})
    for n in range(5):
        picker.picks(f"prompt {n} of the second round, unlike the first round's", a)


def test_a_warm_prefix_outweighs_a_longer_queue(picker):
    """A prompt the picker sent to an engine goes back there though its queue is longer; a new prompt goes to the
    shortest queue. With half the prompt warm, the prefix-cache weight of 2 against the queue's 1 is what tips
    it: b scores 2 x ~0.5 + 0.375 (queue 10 of 0..16) against a's 0 + 1, where equal weights would give a."""
    a, b, c = ADDRESSES
    words = [f"word{i}" for i in range(400)]
    prompt = " ".join(words)
    picker.set_waiting({a: 8, b: 0, c: 16})
    picker.picks(prompt, b)
    # b holds the prompt's blocks now; its queue is mid-way, a's the shortest.
    picker.set_waiting({a: 0, b: 8, c: 16})
    picker.picks(prompt, b)
    picker.picks(" ".join(f"other{i}" for i in range(400)), a)
    picker.set_waiting({a: 0, b: 10, c: 16})
    picker.picks(" ".join(words[:200] + [f"tail{i}" for i in range(200)]), b)
