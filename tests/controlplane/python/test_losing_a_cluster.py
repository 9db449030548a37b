"""Losing a cluster, on the real control plane (docs/scheduling.md, "Losing a cluster"): Crossplane, our function
and provider-kubernetes run as in every control-plane test, and the fleet has two Existing clusters.

- The lost cluster is a second kube-apiserver of its own (on this etcd, under a prefix of its own), which the test
  kills and later starts again: a region outage and its end. No controller or node runs behind it, so the test
  marks the replica's Deployment there Available, as its kubelets and controllers would.
- The cluster that stays is this API server, with nodes kwok simulates and the real kube-scheduler.

The replica serves on the first; the first is cut off; its endpoint leaves every route before the grace period
ends; the replica is placed and becomes Ready on the second; the first comes back and the replica's stale objects
there are deleted; nothing moves back. Then the second is cordoned and the replica drains back, make before break.

Stand-ins, as in test_scheduling.py: provider-helm's charts, trust-manager and Envoy Gateway's address.
"""

from __future__ import annotations

import copy
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import installs
from faults import command_line, record, recorded_pid
from ports import free_port
from kube import Kube, load_yaml_documents, wait_for
from simulated_nodes import apply_simulated, cluster_nodes, device_classes
from test_scheduling import EXAMPLES, apply_until_serving, play_envoy_gateway, standalone_deployment
from workload import API, RELEASE_API, composed_by, conditions, kubeconfig_pointing_back, play_provider_helm, \
    play_trust_manager

LOST = "onprem-lost"
STAYS = "onprem-stays"
# Long enough that the endpoint's removal (one provider poll, then one reconcile of each composite: about 25 s here)
# is seen inside it; the XRD's minimum is 30.
GRACE_SECONDS = 45
CONVERGE_SECONDS = 180
CLUSTER_LABEL = "modelplane.ai/cluster"
# Its own name: its pods, which kwok ends only while their nodes exist, never pass for another test's.
DEPLOYMENT = "qwen3-evacuated"
NAMESPACE = load_yaml_documents(EXAMPLES / "deployments" / "qwen3-small.yaml")[0]["metadata"]["namespace"]


class SecondApiServer:
    """Another kube-apiserver: the running one's command line, on a port, a certificate directory and an etcd prefix
    of its own. Recorded in the harness's PID file, so `controlplane.sh down` stops it whatever happens here."""

    def __init__(self, state: Path):
        args = command_line(recorded_pid("kube-apiserver"))
        self.port = free_port()
        own = {"--secure-port": str(self.port), "--bind-address": "127.0.0.1", "--advertise-address": "127.0.0.1",
               "--cert-dir": str(state / "lost-cluster-certs")}
        self.args = [args[0]]
        rest = iter(args[1:])
        for arg in rest:
            name, _, value = arg.partition("=")
            if name in own:
                if not value:
                    next(rest)
                continue
            self.args.append(arg)
        for name, value in own.items():
            self.args += [name, value]
        self.args += ["--etcd-prefix", "/lost-cluster"]
        self.log = state / "kube-apiserver-lost.log"
        self.process: subprocess.Popen | None = None
        self.kube = Kube(f"https://127.0.0.1:{self.port}", state / "pki" / "ca.crt", state / "pki" / "admin.crt",
                         state / "pki" / "admin.key")

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.args, stdout=log, stderr=log, start_new_session=True)
        record("kube-apiserver-lost", self.process.pid, self.args[0])

        def ready() -> bool:
            assert self.process.poll() is None, f"the second kube-apiserver exited; see {self.log}"
            try:
                return self.kube.session.get(self.kube.server + "/readyz", timeout=5).ok
            except OSError:
                return False
        wait_for("the second kube-apiserver ready", ready, 120)

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def cluster_reaching(kube: Kube, remote: Kube, name: str) -> dict:
    """The Existing example cluster named `name`, its kubeconfig Secret reaching `remote`."""
    cluster = copy.deepcopy(load_yaml_documents(EXAMPLES / "clusters" / "existing-onprem.yaml")[0])
    cluster["metadata"]["name"] = name
    secret_ref = cluster["spec"]["cluster"]["existing"]["secretRef"]
    secret_ref["name"] = f"{name}-kubeconfig"
    kube.ensure_namespace("modelplane-system")
    kube.apply({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": secret_ref["name"], "namespace": "modelplane-system"},
                "stringData": {secret_ref.get("key", "kubeconfig"): kubeconfig_pointing_back(remote)}})
    return cluster


def play_kubelets(remote: Kube, namespace: str) -> None:
    """Marks every Deployment in `namespace` on `remote` Available, as its controllers and kubelets would."""
    for deployment in remote.list("apps/v1", "Deployment", namespace):
        deployment.update(apiVersion="apps/v1", kind="Deployment")  # a list's items carry neither
        replicas = deployment["spec"].get("replicas", 1)
        if conditions(deployment).get("Available") == "True":
            continue
        remote.patch_status(deployment, {
            "observedGeneration": deployment["metadata"]["generation"], "replicas": replicas,
            "readyReplicas": replicas, "availableReplicas": replicas, "updatedReplicas": replicas,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                            "lastUpdateTime": "2026-01-01T00:00:00Z"}]})


@pytest.fixture
def fleet(platform, nodes) -> Iterator[tuple[Kube, SecondApiServer, dict, dict]]:
    """The lost cluster's API server running with the workload CRDs, the classes applied, and both clusters'
    manifests (not applied). Afterwards the composites go while the lost cluster can still delete what is on it,
    then its API server and the simulated nodes."""
    kube = platform
    state = Path(os.environ["CONTROLPLANE_STATE"])
    lost = SecondApiServer(state)
    lost.start()
    classes = load_yaml_documents(EXAMPLES / "classes")
    staying = cluster_reaching(kube, kube, STAYS)
    simulated = device_classes(classes) + cluster_nodes(staying, classes)
    try:
        installs.install_workload_crds(lost.kube)
        for obj in classes:
            kube.apply(obj)
        lost_cluster = cluster_reaching(kube, lost.kube, LOST)
        lost_cluster["spec"]["scheduling"] = {"evacuateAfterSeconds": GRACE_SECONDS}
        yield kube, lost, lost_cluster, staying
    finally:
        for name in (LOST, STAYS):
            kube.delete(API, "InferenceCluster", name)
        # Pods still there (a failed run) go at once, before their nodes: no kubelet would confirm their end.
        for pod in engine_pods(kube, NAMESPACE):
            kube.request("DELETE", kube.path("v1", "Pod", NAMESPACE, pod["metadata"]["name"]),
                         params={"gracePeriodSeconds": "0"}, ok=(404,), what="delete a leftover engine pod")
        if lost.process and lost.process.poll() is None:
            wait_for("both clusters removed", lambda: not any(kube.get(API, "InferenceCluster", n)
                                                              for n in (LOST, STAYS)), CONVERGE_SECONDS)
        lost.kill()
        for obj in simulated:
            if obj["kind"] != "DeviceClass":
                kube.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"])


def engine_pods(kube: Kube, namespace: str) -> list[dict]:
    return [p for p in kube.list("v1", "Pod", namespace)
            if (p["metadata"].get("labels") or {}).get("modelplane.ai/workload", "").startswith(f"{DEPLOYMENT}-")]


def endpoints_by_cluster(kube: Kube, namespace: str) -> dict[str, list[str]]:
    """The namespace's ModelEndpoints by the cluster they reach, from one list: one moment's state."""
    found: dict[str, list[str]] = {}
    for endpoint in kube.list(API, "ModelEndpoint", namespace):
        cluster = (endpoint["metadata"].get("labels") or {}).get(CLUSTER_LABEL, "")
        found.setdefault(cluster, []).append(endpoint["metadata"]["name"])
    return found


def endpoints_on(kube: Kube, namespace: str, cluster: str) -> list[str]:
    return endpoints_by_cluster(kube, namespace).get(cluster, [])


def test_a_lost_clusters_replica_moves_to_the_cluster_that_stays_and_never_comes_back_on_its_own(fleet):
    kube, lost, lost_cluster, staying = fleet
    remote = lost.kube

    # The lost cluster's side, played: its charts, its gateway's CA and address.
    kube.apply(lost_cluster)
    wait_for("the lost cluster's helm Releases", lambda: composed_by(kube, RELEASE_API, "Release", LOST),
             CONVERGE_SECONDS)

    def cluster_now(name: str) -> dict:
        return kube.get(API, "InferenceCluster", name) or {}

    def lost_serving() -> bool:
        # The charts' namespaces are made where the charts install, on the lost cluster.
        for release in play_provider_helm(kube, LOST):
            if release["spec"]["forProvider"].get("namespace"):
                remote.ensure_namespace(release["spec"]["forProvider"]["namespace"])
        play_trust_manager(remote)
        play_envoy_gateway(remote)
        status = cluster_now(LOST).get("status") or {}
        return conditions(cluster_now(LOST)).get("Ready") == "True" and bool((status.get("gateway") or {}).get("address"))

    wait_for("the lost cluster Ready with its gateway's address", lost_serving, CONVERGE_SECONDS,
             lambda: str(cluster_now(LOST).get("status")))
    assert cluster_now(LOST)["status"]["reachability"] == {"reachable": True}

    deployment = standalone_deployment(lost_cluster)
    deployment["metadata"]["name"] = DEPLOYMENT
    namespace, name = deployment["metadata"]["namespace"], DEPLOYMENT
    kube.ensure_namespace(namespace)
    kube.apply(deployment)

    def deployment_now() -> dict:
        return kube.get(API, "ModelDeployment", name, namespace) or {}

    def replica() -> dict:
        return ((deployment_now().get("status") or {}).get("replicas") or [{}])[0]

    def serving_on(cluster: str, play=None) -> bool:
        if play:
            play()
        return replica().get("cluster") == cluster and replica().get("ready") is True \
            and bool(endpoints_on(kube, namespace, cluster))

    wait_for("the replica serving on the lost cluster", lambda: serving_on(LOST, lambda: play_kubelets(remote, namespace)),
             CONVERGE_SECONDS, lambda: str(deployment_now().get("status")))

    # The cluster that stays joins the fleet, on its simulated nodes: nothing moves to it.
    classes = load_yaml_documents(EXAMPLES / "classes")
    apply_simulated(kube, device_classes(classes) + cluster_nodes(staying, classes))
    apply_until_serving(kube, staying)
    assert replica()["cluster"] == LOST

    # Cut off: the lost cluster's API server is gone. Its endpoint leaves the routes while the cluster is still
    # within its grace period, so before any replacement exists.
    lost.kill()
    wait_for("the lost cluster reported unreachable",
             lambda: conditions(cluster_now(LOST)).get("Reachable") == "False", CONVERGE_SECONDS,
             lambda: str(cluster_now(LOST).get("status")))
    wait_for("the lost replica's endpoint gone", lambda: not endpoints_on(kube, namespace, LOST), GRACE_SECONDS,
             lambda: str(deployment_now().get("status")))
    schedulable = next(c for c in cluster_now(LOST)["status"]["conditions"] if c["type"] == "Schedulable")
    assert schedulable["reason"] == "Unreachable", schedulable

    def says_unreachable() -> dict | None:
        found = {c["type"]: c for c in deployment_now()["status"]["conditions"]}.get("ClustersAvailable") or {}
        return found if found.get("reason") == "ClusterUnreachable" else None

    said = wait_for("the ModelDeployment naming the lost cluster", says_unreachable, GRACE_SECONDS,
                    lambda: str(deployment_now()["status"].get("conditions")))
    assert said["message"].startswith(f"replica 0 on {LOST}: {LOST} is unreachable since"), said
    assert replica()["cluster"] == LOST, "moved before the grace period ended"

    # After the grace period the replica is placed on the cluster that stays and serves there. From the cut-off on,
    # no endpoint on the lost cluster reappears.
    def moved() -> bool:
        assert not endpoints_on(kube, namespace, LOST), "an endpoint on the lost cluster came back"
        return serving_on(STAYS)

    wait_for("the replica serving on the cluster that stays", moved, GRACE_SECONDS + CONVERGE_SECONDS,
             lambda: str(deployment_now().get("status")))

    # The lost cluster comes back: the stale replica's objects there are deleted, and nothing moves back.
    lost.start()
    wait_for("the lost cluster reachable again",
             lambda: (cluster_now(LOST)["status"].get("reachability") or {}).get("reachable") is True,
             CONVERGE_SECONDS, lambda: str(cluster_now(LOST).get("status")))
    wait_for("the stale replica's Deployment deleted on the returned cluster",
             lambda: not remote.list("apps/v1", "Deployment", namespace), CONVERGE_SECONDS,
             lambda: str([d["metadata"]["name"] for d in remote.list("apps/v1", "Deployment", namespace)]))
    assert replica()["cluster"] == STAYS and not endpoints_on(kube, namespace, LOST)

    # Cordon the cluster that stays: once the returned cluster has been back a grace period, the replica drains to
    # it, and the cordoned one keeps its endpoint until the new one has its own.
    staying["spec"]["scheduling"] = {"cordoned": True}
    kube.apply(staying)

    def drained() -> bool:
        play_kubelets(remote, namespace)
        endpoints = endpoints_by_cluster(kube, namespace)
        on_lost, on_stays = endpoints.get(LOST), endpoints.get(STAYS)
        assert on_lost or on_stays, "the deployment had no endpoint while it drained"
        return replica().get("cluster") == LOST and bool(on_lost) and not on_stays

    wait_for("the replica drained to the returned cluster", drained, GRACE_SECONDS + CONVERGE_SECONDS,
             lambda: str(deployment_now().get("status")))
    wait_for("the cordoned cluster's engine pods gone", lambda: not engine_pods(kube, namespace), CONVERGE_SECONDS,
             lambda: str([p["metadata"]["name"] for p in engine_pods(kube, namespace)]))
    kube.delete(API, "ModelDeployment", name, namespace)
    wait_for("the ModelDeployment removed", lambda: not deployment_now(), CONVERGE_SECONDS)
