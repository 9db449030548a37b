"""The function down, then starved, under the real Crossplane (docs/architecture.md, "Bounds"): Crossplane's calls
stay bounded, the function answers within its deadline or says it is busy, and nothing a user applied is lost.

The fleet is Existing InferenceClusters whose kubeconfigs point back at this API server; they need not become Ready,
only composed. Crossplane's own counters (`function_run_function_request_total`, and `..._response_total` by gRPC
code, from its metrics port) say how often it called the function and what it heard; a call sent and not yet
answered is in flight.

- Down: the function is killed and stays down for half a minute while a user applies more clusters and edits one.
  Crossplane's function client waits for the function to be ready (`waitForReady` in its service config), so each
  composite holds at most one waiting call: in flight never exceeds the composites. Every composed resource keeps
  its UID, and once the function is back every cluster applied or edited meanwhile is composed as written.
- Starved: the function runs with one call slot and 3% of one core (a cgroup's CPU quota) while every
  composite is touched, again and again. Calls that find the slot taken are answered UNAVAILABLE, `busy:`,
  instead of waiting out their deadline; Crossplane hears no other error and
  never has more calls in flight than composites; once the CPU is back everything is Synced again.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import faults
from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from test_scheduling import EXAMPLES, existing_cluster
from workload import API, OBJECT_API, RELEASE_API, conditions, resource_refs

PREFIX = "overload"
BEFORE = 4  # clusters composed before the faults
DURING = 2  # clusters a user applies while the function is down
OUTAGE_SECONDS = 30
CONVERGE_SECONDS = 180
# Three hundredths of one core for the function's process: a call composes in a second or two rather than
# milliseconds, so calls queue for its one slot.
STARVED_QUOTA_US, PERIOD_US = 3_000, 100_000
# Every kind our Configuration defines, from the XRDs it ships.
COMPOSITE_KINDS = [xrd["spec"]["names"]["kind"]
                   for xrd in load_yaml_documents(*sorted((REPO_ROOT / "package/configuration/xrds").glob("*.yaml")))]


class CpuQuota:
    """A cgroup of its own whose processes share `quota_us` of CPU time per `period_us`: cgroup v1's cpu controller
    where it is mounted, else cgroup v2's `cpu.max`. Leaving puts its processes back in the root group."""

    def __init__(self, quota_us: int, period_us: int):
        v1, v2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")
        name = f"modelplane-overload-{os.getpid()}"
        if (v1 / "cpu.cfs_quota_us").exists():
            self.root, limits = v1, {"cpu.cfs_period_us": str(period_us), "cpu.cfs_quota_us": str(quota_us)}
        elif (v2 / "cgroup.controllers").exists() and "cpu" in (v2 / "cgroup.controllers").read_text().split():
            self.root, limits = v2, {"cpu.max": f"{quota_us} {period_us}"}
        else:
            pytest.fail("no cgroup CPU controller to starve the function with (cgroup v1 cpu, or v2 with cpu)")
        self.group = self.root / name
        self.group.mkdir()
        for file, value in limits.items():
            (self.group / file).write_text(value)

    def add(self, pid: int) -> None:
        (self.group / "cgroup.procs").write_text(str(pid))

    def leave(self) -> None:
        for pid in (self.group / "cgroup.procs").read_text().split():
            (self.root / "cgroup.procs").write_text(pid)
        self.group.rmdir()


class CrossplaneCounters:
    """Crossplane's function-call counters, read from its metrics endpoint in one scrape."""

    def __init__(self):
        self.metrics = faults.CrossplaneMetrics(faults.Recorded("crossplane"))

    def read(self) -> tuple[int, Counter]:
        """Requests sent, and responses heard by gRPC code."""
        totals = self.metrics.read()
        heard = Counter({key.removeprefix("responses "): int(value) for key, value in totals.items()
                         if key.startswith("responses ")})
        return int(totals.get("requests", 0)), heard


def composites(kube: Kube) -> int:
    """Every composite of ours on the server, whichever test made it."""
    return sum(len(kube.list(API, kind)) for kind in COMPOSITE_KINDS)


def in_flight_within_composites(kube: Kube, counters: CrossplaneCounters) -> tuple[int, Counter]:
    """One sample: asserts Crossplane has no more calls in flight than there are composites."""
    sent, heard = counters.read()
    in_flight, bound = sent - sum(heard.values()), composites(kube)
    assert in_flight <= bound, f"Crossplane has {in_flight} calls in flight for {bound} composites"
    return sent, heard


def composed_uids(kube: Kube, name: str) -> dict[str, str]:
    """Every resource Crossplane lists as composed by the InferenceCluster `name`, by kind and name, with its UID."""
    cluster = kube.get(API, "InferenceCluster", name) or {}
    uids = {}
    for ref in resource_refs(cluster):
        obj = kube.get(ref["apiVersion"], ref["kind"], ref["name"], ref["namespace"])
        uids[f"{ref['kind']}/{ref.get('namespace', '')}/{ref['name']}"] = (obj or {}).get("metadata", {}).get("uid")
    return uids


def composed_and_synced(kube: Kube, name: str) -> dict[str, str] | None:
    uids = composed_uids(kube, name)
    cluster = kube.get(API, "InferenceCluster", name)
    return uids if uids and all(uids.values()) and conditions(cluster).get("Synced") == "True" else None


def describe(kube: Kube, name: str) -> str:
    cluster = kube.get(API, "InferenceCluster", name) or {}
    return f"composed {composed_uids(kube, name)}; conditions {(cluster.get('status') or {}).get('conditions')}"


def wait_composed(kube: Kube, names: list[str]) -> dict[str, dict[str, str]]:
    return {name: wait_for(f"{name} composed and Synced", lambda n=name: composed_and_synced(kube, n),
                           CONVERGE_SECONDS, lambda n=name: describe(kube, n)) for name in names}


@pytest.fixture(scope="module")
def fleet(platform) -> Iterator[tuple[Kube, list[str]]]:
    """The classes and BEFORE clusters, composed; afterwards every cluster the module made is deleted."""
    kube = platform
    for obj in load_yaml_documents(EXAMPLES / "classes"):
        kube.apply(obj)
    names = [f"{PREFIX}-{i}" for i in range(BEFORE)]
    for name in names:
        kube.apply(existing_cluster(kube, name))
    wait_composed(kube, names)
    yield kube, names
    everyone = [f"{PREFIX}-{i}" for i in range(BEFORE + DURING)]
    for name in everyone:
        kube.delete(API, "InferenceCluster", name)
    wait_for("the overload test's clusters removed",
             lambda: not any(kube.get(API, "InferenceCluster", n) for n in everyone), CONVERGE_SECONDS)
    # Their Objects and Releases reach this API server too, under the names every Existing cluster here uses: the
    # next test's cluster must not meet them still being deleted.
    wait_for("the overload test's composed resources removed", lambda: not left_composed(kube), CONVERGE_SECONDS,
             lambda: str(left_composed(kube)))


def left_composed(kube: Kube) -> list[str]:
    return [f"{kind} {o['metadata']['name']}" for api, kind in ((OBJECT_API, "Object"), (RELEASE_API, "Release"))
            for o in kube.list(api, kind)
            if ((o["metadata"].get("labels") or {}).get("crossplane.io/composite") or "").startswith(f"{PREFIX}-")]


def test_with_the_function_down_crossplane_waits_and_nothing_applied_meanwhile_is_lost(fleet):
    kube, before = fleet
    function, counters = faults.Recorded("modelplane-function"), CrossplaneCounters()
    uids = wait_composed(kube, before)

    function.kill()
    sent_at_outage, _ = counters.read()
    during = [f"{PREFIX}-{i}" for i in range(BEFORE, BEFORE + DURING)]
    for name in during:
        kube.apply(existing_cluster(kube, name))
    edited = existing_cluster(kube, before[0])
    edited["spec"]["scheduling"] = {"cordoned": True}
    kube.apply(edited)
    # An observation window, not a measurement: what Crossplane does meanwhile, sampled.
    for _ in range(OUTAGE_SECONDS // 5):
        time.sleep(5)
        sent, _ = in_flight_within_composites(kube, counters)
    assert sent > sent_at_outage, "Crossplane never called the stopped function: the outage showed nothing"
    for name in before:
        assert composed_uids(kube, name) == uids[name], f"{name}'s composed resources changed while the function was down"
    assert not cordoned(kube, before[0]), "the edit was composed with the function down"

    function.start()
    after = wait_composed(kube, before + during)
    for name in before:
        assert after[name] == uids[name], f"{name}'s composed resources were recreated"
    wait_for("the edit made while the function was down composed: the cluster cordoned",
             lambda: cordoned(kube, before[0]), CONVERGE_SECONDS, lambda: describe(kube, before[0]))


def cordoned(kube: Kube, name: str) -> bool:
    cluster = kube.get(API, "InferenceCluster", name) or {}
    schedulable = {c["type"]: c for c in (cluster.get("status") or {}).get("conditions") or []}.get("Schedulable")
    return bool(schedulable) and schedulable.get("reason") == "Cordoned"


def test_a_starved_function_says_it_is_busy_and_crossplane_hears_nothing_worse(fleet):
    kube, before = fleet
    names = before + [f"{PREFIX}-{i}" for i in range(BEFORE, BEFORE + DURING)]
    function, counters = faults.Recorded("modelplane-function"), CrossplaneCounters()
    uids = wait_composed(kube, names)

    starved = CpuQuota(STARVED_QUOTA_US, PERIOD_US)
    try:
        function.kill()
        starved.add(function.start("--max-concurrent-calls", "1"))
        _, heard_before = counters.read()
        # Every composite touched at once, and again every few seconds, so calls keep arriving faster than the one
        # slot serves them, until Crossplane has heard busy.
        def busy_heard() -> bool:
            nonlocal heard
            for name in names:
                kube.request("PATCH", kube.path(API, "InferenceCluster", name=name),
                             body={"metadata": {"annotations": {"modelplane.test/touched": str(time.time())}}},
                             content_type="application/merge-patch+json", what=f"touch {name}")
            time.sleep(3)
            _, heard = in_flight_within_composites(kube, counters)
            return heard["Unavailable"] > heard_before["Unavailable"]

        heard = heard_before
        wait_for("Crossplane hearing the function is busy", busy_heard, CONVERGE_SECONDS, lambda: f"heard {heard}")
    finally:
        # The function the later tests meet: all of a core and its usual slots.
        starved.leave()
        function.kill()
        function.start()
    answered = {code: n - heard_before[code] for code, n in heard.items() if n > heard_before[code]}
    assert set(answered) <= {"OK", "Unavailable"}, f"Crossplane heard errors other than busy: {answered}"

    after = wait_composed(kube, names)
    assert after == uids, "composed resources were recreated while the function was starved"
    _, heard_after = counters.read()
    worse = {code: n - heard_before[code] for code, n in heard_after.items()
             if code not in ("OK", "Unavailable") and n > heard_before[code]}
    assert not worse, f"Crossplane heard errors other than busy: {worse}"
