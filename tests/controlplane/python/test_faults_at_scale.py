"""Faults at scale, nothing lost (issue 51): a fleet of Existing InferenceClusters and many ModelDeployments
applied at once, and while they converge the function is killed with SIGKILL three times, kube-apiserver and etcd
are restarted, and so is Crossplane (faults.py; each comes back as it was, on the same address and data). Then:

- every ModelDeployment is Ready with its one replica placed on the cluster it selects (by a label only that
  cluster carries), and its engine pod runs on a node of that cluster's pool (each cluster's pool has a name of
  its own, so kube-scheduler cannot put a pod on another cluster's nodes);
- no replica is placed twice: each deployment composed exactly the resources its `resourceRefs` list, every one
  of them for the cluster its status names, the same set for every deployment;
- nothing is orphaned: every composed object of the fleet is controlled by a composite that exists, by UID;
- no status regressed, sampled throughout: a placed replica never became unplaced (unless its `ClustersAvailable`
  condition named its cluster unreachable, which a restart of this API server can make it: such replicas are
  counted), a replica its cluster admitted (listed among a pool's holders) never moved nor left that list, and no
  composite's observedGeneration went back;
- each cluster's ledger (`status.pools[].holders`, `allocatedNodes`) sums to the deployments placed there, with
  nothing over-committed.

The clusters share this API server (their kubeconfigs point back at it) and compose the same cluster-wide objects
on it, identical for every cluster. Stand-ins, as in test_scheduling.py: provider-helm's charts, trust-manager and
Envoy Gateway's address.

Run as a script it is the benchmark at any size (docs/benchmarks.md, "Faults at scale"):
`python test_faults_at_scale.py --clusters 100 --deployments 1000`, under `controlplane.sh run --crossplane --nodes`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
import requests

from faults import CrossplaneMetrics, ProviderMetrics, Recorded, Usage
from kube import ApiError, Kube, load_yaml_documents, wait_for
from simulated_nodes import POOL_LABEL, apply_simulated, cluster_nodes, device_classes, play_pod_readiness
from simulated_nodes import remove as remove_simulated
from test_scheduling import EXAMPLES, existing_cluster, play_envoy_gateway, standalone_deployment
from workload import API, conditions, play_provider_helm, play_trust_manager, resource_refs

# Names of their own: nothing another test makes is taken for the fleet's, nor the fleet's for another's.
PREFIX = "faults"
NAMESPACE = "faults-at-scale"
# Each pool's class: the example Existing cluster's.
CLASS = "eks-h200-8x"
COMPOSITE_LABEL = "crossplane.io/composite"
# Each deployment selects one cluster by this label: where it must be placed is known, and deployments applied at
# once do not all race for the same cluster's nodes (the benchmark's `--herd` lets the scheduler spread them; see
# docs/benchmarks.md, "Faults at scale").
SLOT_LABEL = "modelplane.test/fault-slot"
# What the fleet's composites compose, every kind of it.
OBJECT_KINDS = (("kubernetes.m.crossplane.io/v1alpha1", "Object"), (API, "ModelEndpoint"),
                ("helm.m.crossplane.io/v1beta1", "Release"),
                ("kubernetes.m.crossplane.io/v1alpha1", "ClusterProviderConfig"),
                ("helm.m.crossplane.io/v1beta1", "ClusterProviderConfig"))
CONVERGE_SECONDS = 600


@dataclasses.dataclass(frozen=True)
class Size:
    clusters: int
    deployments: int
    # No deployment selects a cluster: the scheduler spreads them (the benchmark's `--herd`).
    herd: bool = False

    @property
    def nodes_per_cluster(self) -> int:
        """Room for every replica selecting the cluster, and one node more."""
        return math.ceil(self.deployments / self.clusters) + 1

    def slot(self, deployment: int) -> str:
        """The cluster deployment number `deployment` selects."""
        return cluster_name(deployment % self.clusters)


TEST_SIZE = Size(clusters=8, deployments=24)


def cluster_name(i: int) -> str:
    return f"{PREFIX}-{i:03d}"


def deployment_name(i: int) -> str:
    return f"{PREFIX}-{i:04d}"


def fleet_clusters(kube: Kube, size: Size) -> list[dict]:
    """The Existing example cluster `size.clusters` times, each with one GPU pool of a name of its own."""
    clusters = []
    for i in range(size.clusters):
        cluster = existing_cluster(kube, cluster_name(i))
        cluster["metadata"].setdefault("labels", {})[SLOT_LABEL] = cluster_name(i)
        cluster["spec"]["nodePools"] = [{"name": f"gpu-{i:03d}", "className": CLASS,
                                         "nodeCount": size.nodes_per_cluster}]
        clusters.append(cluster)
    return clusters


def fleet_deployment(cluster: dict, size: Size, i: int) -> dict:
    """The small example model, one replica of one engine copy, tolerating the clusters' taints, selecting the
    cluster of its slot."""
    deployment = standalone_deployment(cluster)
    deployment["metadata"].update(name=deployment_name(i), namespace=NAMESPACE)
    spec = deployment["spec"]["template"]["spec"]
    spec["engines"][0]["copies"] = 1
    if not size.herd:
        spec["clusterSelector"] = {"matchLabels": {SLOT_LABEL: size.slot(i)}}
    return deployment


def tolerant(probe: Callable[[], object]) -> Callable[[], object]:
    """`probe`, answering None while the API server does not (it is being restarted)."""
    def call():
        try:
            return probe()
        except (requests.RequestException, ApiError):
            return None
    return call


def ours(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["metadata"]["name"].startswith(f"{PREFIX}-")]


def apply_fleet(kube: Kube, clusters: list[dict]) -> None:
    """The clusters applied and Ready with their gateway's address, playing provider-helm, trust-manager and Envoy
    Gateway (one pass over all of them at a time)."""
    for cluster in clusters:
        kube.apply(cluster)
    play_trust_manager(kube)
    names = {c["metadata"]["name"] for c in clusters}

    def serving() -> bool:
        play_provider_helm(kube, None)
        play_envoy_gateway(kube)
        live = [c for c in ours(kube.list(API, "InferenceCluster")) if c["metadata"]["name"] in names]
        return len(live) == len(names) and all(
            conditions(c).get("Ready") == "True" and ((c.get("status") or {}).get("gateway") or {}).get("address")
            for c in live)

    wait_for("every cluster Ready with its gateway's address", serving, CONVERGE_SECONDS,
             lambda: str({c["metadata"]["name"]: conditions(c) for c in ours(kube.list(API, "InferenceCluster"))
                          if conditions(c).get("Ready") != "True"}))


def holders(cluster: dict) -> dict[str, int]:
    """The cluster's admitted ledger entries: deployment (namespace/name, replica) to nodes held, over its pools."""
    found: dict[str, int] = {}
    for pool in (cluster.get("status") or {}).get("pools") or []:
        for holder in pool.get("holders") or []:
            key = f"{holder['deployment']}#{holder['replica']}"
            found[key] = found.get(key, 0) + holder["nodes"]
    return found


def max_observed_generation(obj: dict) -> int:
    return max([c.get("observedGeneration", 0) for c in (obj.get("status") or {}).get("conditions") or []] or [0])


def placed_cluster(deployment: dict) -> str | None:
    replicas = (deployment.get("status") or {}).get("replicas") or []
    return replicas[0].get("cluster") if replicas else None


class StatusSampler(threading.Thread):
    """Reads every composite of the fleet every `period` seconds (one list per kind: one moment's state) and notes
    each status that regressed. Samples the API server cannot answer are skipped."""

    def __init__(self, kube: Kube, period: float, provider: ProviderMetrics | None = None):
        super().__init__(daemon=True)
        self.provider = provider
        # A client of its own: a requests session is not for two threads.
        self.kube = Kube(kube.server, kube.session.verify, *kube.session.cert)
        self.period = period
        self.stop = threading.Event()
        self.samples = 0
        self.regressions: list[str] = []
        self.generations: dict[str, int] = {}
        self.placed: dict[str, str] = {}
        self.admitted: dict[str, str] = {}  # deployment key -> the cluster that admitted it
        # Deployments whose cluster they saw unreachable, from their `ClustersAvailable` condition: moving off it,
        # or unplaced while they stay with nowhere to go, has that cause.
        self.evacuated: set[str] = set()

    def run(self) -> None:
        while not self.stop.wait(self.period):
            try:
                deployments = self.kube.list(API, "ModelDeployment", NAMESPACE)
                clusters = ours(self.kube.list(API, "InferenceCluster"))
            except (requests.RequestException, ApiError):
                continue
            self.check(deployments, clusters)
            self.samples += 1
            if self.provider:
                self.provider.sample()

    def regressed(self, what: str) -> None:
        if len(self.regressions) < 50:
            self.regressions.append(what)

    def check(self, deployments: list[dict], clusters: list[dict]) -> None:
        for obj in deployments + clusters:
            key = f"{obj['kind']} {obj['metadata']['name']}"
            generation = max_observed_generation(obj)
            if generation < self.generations.get(key, 0):
                self.regressed(f"{key}: observedGeneration went from {self.generations[key]} to {generation}")
            self.generations[key] = max(generation, self.generations.get(key, 0))
        on_cluster = {f"{NAMESPACE}/{d['metadata']['name']}#0": placed_cluster(d) for d in deployments}
        for d in deployments:
            available = {c.get("type"): c for c in (d.get("status") or {}).get("conditions") or []}
            if (available.get("ClustersAvailable") or {}).get("reason") in ("ClusterUnreachable", "Evacuating"):
                self.evacuated.add(f"{NAMESPACE}/{d['metadata']['name']}#0")
        for key, cluster in on_cluster.items():
            if key in self.evacuated:
                continue
            if self.placed.get(key) and not cluster:
                self.regressed(f"{key}: placed on {self.placed[key]}, then unplaced")
            if cluster:
                self.placed[key] = cluster
            if self.admitted.get(key) and cluster != self.admitted[key]:
                self.regressed(f"{key}: admitted by {self.admitted[key]}, then its status said {cluster}")
        held = {key: c["metadata"]["name"] for c in clusters for key in holders(c)}
        for key, cluster in self.admitted.items():
            if key not in on_cluster or key in self.evacuated or held.get(key) == cluster:
                continue
            # Let go while its replica still runs (a ledger reading a pool as not offered did so), or taken over.
            self.regressed(f"{key}: a holder of {cluster}, then of {held.get(key) or 'no cluster'}")
        for key, cluster in held.items():
            self.admitted.setdefault(key, cluster)


def converged(kube: Kube, size: Size) -> bool:
    """Every deployment Ready with its replica placed and ready, and every cluster's ledger holding exactly the
    deployments placed on it, with nothing over-committed."""
    deployments = kube.list(API, "ModelDeployment", NAMESPACE)
    if len(deployments) != size.deployments:
        return False
    placed: dict[str, dict[str, int]] = {}
    for deployment in deployments:
        status = deployment.get("status") or {}
        if conditions(deployment).get("Ready") != "True" or status.get("readyReplicas") != 1:
            return False
        placed.setdefault(placed_cluster(deployment), {})[f"{NAMESPACE}/{deployment['metadata']['name']}#0"] = 1
    for cluster in ours(kube.list(API, "InferenceCluster")):
        if holders(cluster) != placed.get(cluster["metadata"]["name"], {}):
            return False
        if (cluster.get("status") or {}).get("overcommitted"):
            return False
    return True


def converged_after_kubelets(kube: Kube, size: Size) -> bool:
    """`converged`, once the pods kwok left not ready after a lapse of its node heartbeats are ready again."""
    play_pod_readiness(kube, NAMESPACE)
    return converged(kube, size)


def ready_count(kube: Kube) -> int:
    return sum(1 for d in kube.list(API, "ModelDeployment", NAMESPACE) if conditions(d).get("Ready") == "True")


def unconverged(kube: Kube) -> str:
    deployments = kube.list(API, "ModelDeployment", NAMESPACE)
    waiting = [(d["metadata"]["name"], placed_cluster(d), conditions(d)) for d in deployments
               if conditions(d).get("Ready") != "True"]
    return f"{len(waiting)} of {len(deployments)} not Ready, e.g. {waiting[:3]}; {unsynced_objects(kube)}"


def object_count(kube: Kube) -> int:
    """Every provider-kubernetes Object on the control plane: the clusters' and the deployments'."""
    return len(kube.list("kubernetes.m.crossplane.io/v1alpha1", "Object"))


def unsynced_objects(kube: Kube) -> str:
    """The fleet's provider-kubernetes Objects not Synced, counted by the provider's message (its first 160
    characters): what a deployment left waiting on its Objects is waiting for."""
    messages: Counter[str] = Counter()
    for obj in kube.list("kubernetes.m.crossplane.io/v1alpha1", "Object", NAMESPACE):
        synced = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Synced"),
                      None)
        if synced is None or synced.get("status") != "True":
            why = (synced or {}).get("message") or (synced or {}).get("reason") or "no Synced condition yet"
            messages[why[:160]] += 1
    return f"Objects not Synced: {dict(messages.most_common(5))}" if messages else "every Object Synced"


@dataclasses.dataclass
class Faults:
    """The processes faulted, and what was done to each."""
    function: Recorded
    apiserver: Recorded
    etcd: Recorded
    crossplane: Recorded
    metrics: CrossplaneMetrics
    done: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def of_harness(cls) -> "Faults":
        crossplane = Recorded("crossplane")
        return cls(Recorded("modelplane-function"), Recorded("kube-apiserver"), Recorded("etcd"), crossplane,
                   CrossplaneMetrics(crossplane))

    def restart(self, process: Recorded) -> None:
        before = self.metrics.bank if process is self.crossplane else None
        old = process.pid
        new = process.restart(before)
        self.done.append(f"{process.name} {old} -> {new}")


def placed_count(kube: Kube) -> int:
    return sum(1 for d in kube.list(API, "ModelDeployment", NAMESPACE) if placed_cluster(d))


def inject_faults(kube: Kube, faults: Faults, size: Size) -> None:
    """The faults, each while the fleet is still converging where it can be: the function at once, again once a
    quarter of the replicas are placed, kube-apiserver; etcd once half are, Crossplane, the function a third time.
    A gate not reached within its bound is passed (the fault comes anyway)."""
    def gate(fraction: float) -> None:
        deadline = time.monotonic() + 120
        placed = tolerant(lambda: placed_count(kube))
        while time.monotonic() < deadline and (placed() or 0) < size.deployments * fraction:
            time.sleep(1)

    faults.restart(faults.function)
    gate(0.25)
    faults.restart(faults.function)
    faults.restart(faults.apiserver)
    gate(0.5)
    faults.restart(faults.etcd)
    faults.restart(faults.crossplane)
    faults.restart(faults.function)


def settled_outcomes(kube: Kube, size: Size, bound: float) -> None:
    """`check_outcomes` once the fleet has converged, again after a fresh convergence while it does not hold (the
    lists it compares are read one after another while composites may still be touched), within `bound`."""
    deadline = time.monotonic() + bound
    while True:
        wait_for("every deployment Ready and every ledger what is placed",
                 tolerant(lambda: converged_after_kubelets(kube, size)),
                 bound, tolerant(lambda: unconverged(kube)))
        try:
            check_outcomes(kube, size)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(5)


def check_outcomes(kube: Kube, size: Size) -> None:
    """What must hold once the fleet converged (the module docstring's list)."""
    deployments = {d["metadata"]["name"]: d for d in kube.list(API, "ModelDeployment", NAMESPACE)}
    clusters = {c["metadata"]["name"]: c for c in ours(kube.list(API, "InferenceCluster"))}
    assert len(deployments) == size.deployments and len(clusters) == size.clusters
    # A replica's ModelEndpoint is a composite too (composing nothing here, but it may own what it composes).
    endpoints = kube.list(API, "ModelEndpoint", NAMESPACE)
    composites = {o["metadata"]["uid"]: o for o in [*deployments.values(), *clusters.values(), *endpoints]}
    composed: dict[str, list[dict]] = {}
    for api_version, kind in OBJECT_KINDS:
        for obj in kube.list(api_version, kind):
            owner = (obj["metadata"].get("labels") or {}).get(COMPOSITE_LABEL, "")
            if not owner.startswith(f"{PREFIX}-"):
                continue
            controllers = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
            assert len(controllers) == 1 and controllers[0]["uid"] in composites, \
                f"{kind} {obj['metadata']['name']} is orphaned: its controller {controllers} is no composite here"
            composed.setdefault(controllers[0]["uid"], []).append(obj)

    pools = {c["spec"]["nodePools"][0]["name"]: name for name, c in clusters.items()}
    nodes = {n["metadata"]["name"]: pools.get(n["metadata"]["labels"].get(POOL_LABEL)) for n in kube.list("v1", "Node")}
    pods: dict[str, list[dict]] = {}
    for pod in kube.list("v1", "Pod", NAMESPACE):
        workload = (pod["metadata"].get("labels") or {}).get("modelplane.ai/workload")
        if workload:  # an engine's pod (`<deployment>-<replica>-<engine>`), not the endpoint picker's
            pods.setdefault(workload.rsplit("-0-", 1)[0], []).append(pod)

    for uid, composite in composites.items():
        kinds = {kind for _, kind in OBJECT_KINDS}
        refs = sorted((r["kind"], r["name"]) for r in resource_refs(composite) if r["kind"] in kinds)
        made = sorted((o["kind"], o["metadata"]["name"]) for o in composed.get(uid, []))
        assert made == refs, f"{composite['metadata']['name']} composed {made}, but references {refs}"

    shapes: Counter[str] = Counter()
    for name, deployment in deployments.items():
        cluster = placed_cluster(deployment)
        assert len(deployment["status"]["replicas"]) == 1, deployment["status"]
        assert size.herd or cluster == size.slot(int(name.rpartition("-")[2])), f"{name} placed on {cluster}"
        mine = composed.get(deployment["metadata"]["uid"], [])
        resources = sorted(o["metadata"]["annotations"]["crossplane.io/composition-resource-name"] for o in mine)
        assert all(f"-{cluster}" in r for r in resources), f"{name} on {cluster} composed {resources}"
        shapes[json.dumps([r.replace(cluster, "<cluster>") for r in resources])] += 1
        on_nodes = [nodes.get(p["spec"].get("nodeName")) for p in pods.get(name, [])]
        assert on_nodes == [cluster], f"{name} placed on {cluster}: its engine pods run on {on_nodes}"
    assert len(shapes) == 1, f"the deployments composed different sets of resources: {shapes}"

    for name, cluster in clusters.items():
        mine = {f"{NAMESPACE}/{d}#0": 1 for d, deployment in deployments.items() if placed_cluster(deployment) == name}
        assert holders(cluster) == mine, f"{name}'s ledger {holders(cluster)} is not what is placed there {mine}"
        (pool,) = cluster["status"]["pools"]
        assert pool["allocatedNodes"] == sum(h["nodes"] for h in pool.get("holders") or []) == len(mine), pool
        assert not cluster["status"].get("overcommitted"), cluster["status"]["overcommitted"]


def remove_fleet(kube: Kube, clusters: list[dict], simulated: list[dict]) -> None:
    """Deletes the deployments, then the clusters, their secrets, the pods left and the simulated nodes."""
    for deployment in kube.list(API, "ModelDeployment", NAMESPACE):
        kube.delete(API, "ModelDeployment", deployment["metadata"]["name"], NAMESPACE)
    wait_for("the fleet's deployments removed", lambda: not kube.list(API, "ModelDeployment", NAMESPACE),
             CONVERGE_SECONDS, lambda: unconverged(kube))
    for cluster in clusters:
        kube.delete(API, "InferenceCluster", cluster["metadata"]["name"])
    wait_for("the fleet's clusters removed", lambda: not ours(kube.list(API, "InferenceCluster")), CONVERGE_SECONDS)
    for cluster in clusters:
        secret = cluster["spec"]["cluster"]["existing"]["secretRef"]
        kube.delete("v1", "Secret", secret["name"], secret.get("namespace", "modelplane-system"))
    remove_simulated(kube, NAMESPACE, simulated)


@dataclasses.dataclass
class Outcome:
    """What the benchmark reports, read the moment the fleet converged, or when its bound ran out."""
    size: Size
    # None when the fleet had not converged within `bound` seconds.
    converge_seconds: float | None
    bound: float
    ready: int
    faults: Faults
    samples: int
    evacuated: int
    calls: dict[str, float]
    function: Usage
    crossplane: Usage
    # provider-kubernetes' Object reconciles, their seconds and its queue's peak depth (ProviderMetrics).
    provider: dict[str, float]
    objects: int


def run_with_faults(kube: Kube, size: Size, keep: Callable[[Outcome], None], converge_bound: float = CONVERGE_SECONDS,
                    remove: bool = True) -> None:
    """Builds the fleet, applies every deployment at once, injects the faults, waits (up to `converge_bound`
    seconds) for convergence, hands the outcome to `keep`, checks what must hold, and removes the fleet (also when
    something failed) unless `remove` is False (the benchmark's control plane goes as a whole)."""
    classes = load_yaml_documents(EXAMPLES / "classes")
    for obj in classes:
        kube.apply(obj)
    clusters = fleet_clusters(kube, size)
    simulated = device_classes(classes) + [o for c in clusters for o in cluster_nodes(c, classes)]
    try:
        apply_simulated(kube, simulated)
        apply_fleet(kube, clusters)
        kube.ensure_namespace(NAMESPACE)
        faults = Faults.of_harness()
        provider = ProviderMetrics(Recorded("provider-kubernetes"))
        sampler = StatusSampler(kube, period=max(2.0, size.deployments / 100), provider=provider)
        sampler.start()
        started = time.monotonic()
        for i in range(size.deployments):
            kube.apply(fleet_deployment(clusters[0], size, i))
        inject_faults(kube, faults, size)
        converge_seconds = None
        try:
            wait_for("every deployment Ready and every ledger what is placed",
                     tolerant(lambda: converged_after_kubelets(kube, size)),
                     converge_bound, tolerant(lambda: unconverged(kube)))
            converge_seconds = time.monotonic() - started
        finally:
            # Measured whether or not it converged: a benchmark that runs out of time still reports how far it came.
            ready = tolerant(lambda: ready_count(kube))() or 0
            outcome = Outcome(size, converge_seconds, converge_bound, ready, faults, sampler.samples, 0,
                              faults.metrics.totals(), faults.function.finish(), faults.crossplane.finish(),
                              tolerant(provider.totals)() or {}, tolerant(lambda: object_count(kube))() or 0)
            sampler.stop.set()
            sampler.join()
            outcome.samples, outcome.evacuated = sampler.samples, len(sampler.evacuated)
            keep(outcome)
        settled_outcomes(kube, size, converge_bound)
        assert not sampler.regressions, "statuses regressed:\n" + "\n".join(sampler.regressions)
        assert sampler.samples > 0
    finally:
        if remove:
            remove_fleet(kube, clusters, simulated)


@pytest.fixture
def fleet_kube(platform, nodes) -> Iterator[Kube]:
    yield platform


def test_killing_the_function_api_server_etcd_and_crossplane_loses_nothing(fleet_kube):
    outcomes: list[Outcome] = []
    run_with_faults(fleet_kube, TEST_SIZE, outcomes.append)
    (outcome,) = outcomes
    faults = outcome.faults
    # Each process was really killed and started again: a new PID each time, the last one running.
    assert len(set(faults.function.pids_seen)) == 4, faults.done
    for process in (faults.apiserver, faults.etcd, faults.crossplane):
        assert len(set(process.pids_seen)) == 2, faults.done


def report(outcome: Outcome) -> str:
    """The benchmark's figures, as docs/benchmarks.md's table rows."""
    faults, size, calls = outcome.faults, outcome.size, outcome.calls
    function, crossplane, provider = outcome.function, outcome.crossplane, outcome.provider
    # Each deployment's replica composes a ModelEndpoint, a composite of its own that the function composes too.
    composites = size.clusters + 2 * size.deployments
    failed = sum(v for k, v in calls.items() if k.startswith("responses ") and k != "responses OK")
    rows = [
        ("clusters, deployments", f"{size.clusters}, {size.deployments}"),
        ("each deployment selects a cluster", "no (a herd the scheduler spreads)" if size.herd else "yes"),
        ("faults", "; ".join(faults.done)),
        ("time to converge (s)", f"{outcome.converge_seconds:.0f}" if outcome.converge_seconds is not None
         else f"not within {outcome.bound:.0f} ({outcome.ready} of {size.deployments} deployments Ready)"),
        ("RunFunction calls (not answered OK)", f"{calls.get('requests', 0):.0f} ({failed:.0f})"),
        ("calls per composite (clusters, deployments, endpoints)", f"{calls.get('requests', 0) / composites:.1f}"),
        ("function CPU s, peak RSS MiB", f"{function.cpu_seconds:.1f}, {function.peak_rss_bytes / 2**20:.0f}"),
        ("Crossplane CPU s, peak RSS MiB", f"{crossplane.cpu_seconds:.1f}, {crossplane.peak_rss_bytes / 2**20:.0f}"),
        ("function CPU ms per call", f"{1000 * function.cpu_seconds / max(calls.get('requests', 1), 1):.2f}"),
        ("provider-kubernetes Objects, reconciles", f"{outcome.objects}, {provider.get('reconciles', 0):.0f}"),
        ("provider-kubernetes s per reconcile, peak queue depth",
         f"{provider.get('seconds', 0) / max(provider.get('reconciles', 1), 1):.2f}, {provider.get('peak depth', 0):.0f}"),
        ("status samples", str(outcome.samples)),
        ("replicas whose cluster was reported unreachable", str(outcome.evacuated)),
    ]
    return "\n".join(f"| {what} | {value} |" for what, value in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description="The faults-at-scale benchmark (docs/benchmarks.md); run it "
                                                 "under `controlplane.sh run --crossplane --nodes`.")
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--bound", type=float, default=3600, help="seconds allowed to converge")
    parser.add_argument("--herd", action="store_true",
                        help="no deployment selects a cluster: they are spread by the scheduler")
    args = parser.parse_args()
    import installs
    kube = Kube.from_env()
    installs.install_crds(kube)
    installs.install_configuration(kube)
    size = Size(args.clusters, args.deployments, args.herd)
    run_with_faults(kube, size, lambda outcome: print(report(outcome), flush=True), converge_bound=args.bound,
                    remove=False)
    print("every outcome checked: converged where selected, nothing placed twice, orphaned or regressed, ledgers "
          "exact", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
