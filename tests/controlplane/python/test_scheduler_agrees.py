"""Our scheduler against the real one: for each case of a table of fleets and deployments, the function places a
replica on a pool exactly when kube-scheduler can schedule that replica's pods there.

Our side is `modelplane-function render --until-ready` (the function's own scheduler and composition, offline).
kube-scheduler's side runs on simulated nodes (simulated_nodes.py: the pool's Nodes, taints and the ResourceSlices
its class describes) with the pods our function composes for each replica, created as the Deployment controller
would create them, their claims made by kube-controller-manager's ResourceClaim controller from our templates.

A replica our function leaves unplaced has no composed pods of its own, so its pods come from a twin fleet on which
it does place: the same pool under the same name, without the cluster's taints, with more nodes, and with the case's
`twin` changes to the class (devices the selectors accept). Those pods are what the function composes for the
deployment on that pool, with only the tolerations the twin did not need left out; kube-scheduler then judges them
on the real pool's nodes.

Each case is one pool on one cluster of its own, its pool and namespace named after the case, so cases never share
nodes. Every case states what our function decides, so the table proves both outcomes and a change to either
scheduler shows up as a named disagreement.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

import installs
from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from simulated_nodes import POOL_LABEL, apply_simulated, cluster_nodes, device_classes, remove

EXAMPLES = REPO_ROOT / "examples"
SCHEDULE_SECONDS = 60
H200 = "eks-h200-8x"
L4 = "eks-l4-1x"
PRODUCT = 'device.attributes["gpu.nvidia.com"].productName'
MEMORY_AT_LEAST_80GI = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0'
COMPUTE_ABOVE_8_9 = 'device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.9.0"))'


@dataclass
class Case:
    id: str
    what: str
    # What our function decides: replicas placed on the case's pool.
    placed: int
    class_name: str = H200
    nodes: int = 1
    taints: list[dict] = field(default_factory=list)
    requests: list[dict] = field(default_factory=lambda: [{"name": "gpu", "count": 1}])
    tolerations: list[dict] = field(default_factory=list)
    replicas: int = 1
    copies: int = 1
    # Changes to the class's device on the twin fleet, so the function places there too.
    twin: dict = field(default_factory=dict)


def gpu(count: int = 1, *selectors: str, name: str = "gpu") -> dict:
    return {"name": name, "count": count, "selectors": [{"cel": s} for s in selectors]}


TEAM_TAINT = {"key": "team", "value": "ml", "effect": "NoSchedule"}
CASES = [
    Case("sel-match", "a selector the class's devices meet", 1, requests=[gpu(1, f'{PRODUCT} == "NVIDIA H200"')]),
    Case("sel-miss", "a selector no device meets", 0, requests=[gpu(1, f'{PRODUCT} == "NVIDIA L4"')],
         twin={"attributes": {"productName": {"string": "NVIDIA L4"}}}),
    Case("cap-match", "a capacity selector the devices meet", 1, requests=[gpu(1, MEMORY_AT_LEAST_80GI)]),
    Case("cap-miss", "a capacity selector too large for the devices", 0, class_name=L4,
         requests=[gpu(1, MEMORY_AT_LEAST_80GI)], twin={"capacity": {"memory": {"value": "143771Mi"}}}),
    Case("ver-match", "a version selector the devices meet", 1, requests=[gpu(1, COMPUTE_ABOVE_8_9)]),
    Case("ver-miss", "a version selector the devices miss by a patch level", 0, class_name=L4,
         requests=[gpu(1, COMPUTE_ABOVE_8_9)], twin={"attributes": {"cudaComputeCapability": {"version": "9.0.0"}}}),
    Case("no-attr", "a selector on an attribute the devices do not publish", 0,
         requests=[gpu(1, 'device.attributes["gpu.nvidia.com"].nvlink == true')],
         twin={"attributes": {"nvlink": {"bool": True}}}),
    Case("all-devices", "every device of a node", 1, requests=[gpu(8)]),
    Case("too-few", "one more device than a node has", 0, requests=[gpu(9)], twin={"count": 16}),
    Case("two-requests", "two requests of one member that a node's devices serve only apart", 0,
         requests=[gpu(5, name="gpua"), gpu(5, name="gpub")], twin={"count": 16}),
    Case("two-fit", "two requests of one member that a node's devices serve together", 1,
         requests=[gpu(4, name="gpua"), gpu(4, name="gpub")]),
    Case("taint", "a cluster taint the deployment does not tolerate", 0, taints=[TEAM_TAINT]),
    Case("tolerated", "a cluster taint the deployment tolerates", 1, taints=[TEAM_TAINT],
         tolerations=[{"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]),
    Case("exists", "a cluster taint tolerated by key alone", 1, taints=[TEAM_TAINT],
         tolerations=[{"key": "team", "operator": "Exists"}]),
    Case("wrong-effect", "a NoExecute taint tolerated only for NoSchedule", 0,
         taints=[{"key": "team", "value": "ml", "effect": "NoExecute"}],
         tolerations=[{"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]),
    Case("prefer", "a PreferNoSchedule taint, which never keeps a pod off", 1,
         taints=[{"key": "team", "value": "ml", "effect": "PreferNoSchedule"}]),
    Case("compete", "two replicas for one node, each taking all its devices", 1, replicas=2, requests=[gpu(8)]),
    Case("share", "two replicas for one node with devices to spare: a node per pod", 1, replicas=2),
    Case("copies", "two copies of an engine on two nodes", 1, nodes=2, copies=2),
    Case("copies-short", "two copies of an engine on one node", 0, copies=2),
]


def fleet(case: Case, classes: dict[str, dict], twin: bool) -> tuple[dict, list[dict]]:
    """The case's cluster and the classes it names (renamed, for the twin, so the twin's class is its own)."""
    inference_class = copy.deepcopy(classes[case.class_name])
    if twin:
        inference_class["metadata"]["name"] = f"{case.class_name}-twin"
        (device,) = inference_class["spec"]["devices"]
        for key, value in case.twin.items():
            device[key] = {**device[key], **value} if isinstance(value, dict) else value
    cluster = {
        "apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
        "metadata": {"name": f"diff-{case.id}"},
        "spec": {"stack": "Standard",
                 "cluster": {"source": "Existing", "existing": {
                     "secretRef": {"name": f"diff-{case.id}-kubeconfig", "key": "kubeconfig"},
                     "cache": {"storageClassName": "cephfs"}}},
                 "nodePools": [{"name": pool_name(case), "className": inference_class["metadata"]["name"],
                                "nodeCount": case.nodes * (case.replicas * case.copies if twin else 1)}],
                 "taints": [] if twin else case.taints},
    }
    return cluster, [inference_class]


def pool_name(case: Case) -> str:
    return f"p-{case.id}"


def deployment(case: Case) -> dict:
    md = copy.deepcopy(load_yaml_documents(EXAMPLES / "deployments" / "qwen3-small.yaml")[0])
    md["metadata"]["namespace"] = namespace(case)
    md["spec"]["replicas"] = case.replicas
    spec = md["spec"]["template"]["spec"]
    spec.pop("clusterSelector", None)
    spec["tolerations"] = case.tolerations
    (engine,) = spec["engines"]
    engine["copies"] = case.copies
    (member,) = engine["members"]
    member["nodeSelector"]["devices"] = case.requests
    return md


def namespace(case: Case) -> str:
    return f"diff-{case.id}"


def render(case: Case, classes: dict[str, dict], twin: bool, work: Path) -> list[dict]:
    """What our function makes of the case: the ModelDeployment with its status, then what it composes."""
    cluster, fleet_classes = fleet(case, classes, twin)
    folder = work / case.id / ("twin" if twin else "real")
    folder.mkdir(parents=True)
    (folder / "md.yaml").write_text(yaml.safe_dump(deployment(case)))
    (folder / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    (folder / "classes.yaml").write_text(yaml.safe_dump_all(fleet_classes))
    return installs.render(folder / "md.yaml", folder / "cluster.yaml", folder / "classes.yaml",
                           until_ready=True, settled_not_ready_ok=True)


def placed_replicas(documents: list[dict]) -> list[int]:
    status = documents[0].get("status") or {}
    return sorted(r["replica"] for r in status.get("replicas") or [] if r.get("cluster"))


def replica_workload(documents: list[dict], replica: int) -> list[dict]:
    """The engine Deployments and claim templates our function composed for `replica`, as it would apply them on
    the workload cluster."""
    status = documents[0]["status"]
    prefix = f"{documents[0]['metadata']['name']}-{replica}-"
    manifests = [d["spec"]["forProvider"]["manifest"] for d in documents[1:] if d.get("kind") == "Object"]
    engines = [m for m in manifests if m["kind"] == "Deployment" and m["metadata"]["name"].startswith(prefix)
               and POOL_LABEL in (m["spec"]["template"]["spec"].get("nodeSelector") or {})]
    assert engines, f"no engine Deployment of replica {replica} among {[m['metadata']['name'] for m in manifests]}; " \
                    f"status {status}"
    templates = {c["resourceClaimTemplateName"] for e in engines
                 for c in e["spec"]["template"]["spec"].get("resourceClaims") or []}
    claims = [m for m in manifests if m["kind"] == "ResourceClaimTemplate" and m["metadata"]["name"] in templates]
    return engines + claims


def pods_of(engine: dict) -> list[dict]:
    """The pods the Deployment controller would create for `engine`."""
    template = engine["spec"]["template"]
    name = engine["metadata"]["name"]
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {**copy.deepcopy(template.get("metadata") or {}), "name": f"{name}-{i}",
                          "namespace": engine["metadata"]["namespace"]},
             "spec": copy.deepcopy(template["spec"])}
            for i in range(engine["spec"].get("replicas", 1))]


def scheduling(pod: dict) -> str | None:
    """`scheduled`, `unschedulable` once the scheduler has judged the pod with its claims in place, else None."""
    condition = next((c for c in (pod.get("status") or {}).get("conditions") or []
                      if c["type"] == "PodScheduled"), None)
    if condition is None:
        return None
    if condition["status"] == "True":
        return "scheduled"
    claims_made = len((pod.get("status") or {}).get("resourceClaimStatuses") or []) == len(
        pod["spec"].get("resourceClaims") or [])
    # A claim not made yet is a wait, not a verdict. A selector's CEL runtime error (an attribute the devices do not
    # publish) is one: the allocator gives up on the pod.
    judged = condition.get("reason") in ("Unschedulable", "SchedulerError") and \
        "not found" not in condition.get("message", "")
    return "unschedulable" if claims_made and judged else None


def simulate(kube: Kube, case: Case, classes: dict[str, dict]) -> tuple[list[dict], str]:
    """The case's pool on simulated nodes, and its namespace: what `remove` takes away again."""
    cluster, fleet_classes = fleet(case, classes, twin=False)
    simulated = device_classes(fleet_classes) + cluster_nodes(cluster, fleet_classes, system_nodes=0)
    apply_simulated(kube, simulated)
    kube.ensure_namespace(namespace(case))
    return simulated, namespace(case)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_our_scheduler_places_a_replica_exactly_where_kube_scheduler_schedules_its_pods(nodes, case, tmp_path):
    kube = nodes
    classes = {c["metadata"]["name"]: c for c in load_yaml_documents(EXAMPLES / "classes")}
    ours = render(case, classes, twin=False, work=tmp_path)
    placed = placed_replicas(ours)
    assert len(placed) == case.placed, f"{case.what}: our function placed {placed}; status {ours[0].get('status')}"
    twin = render(case, classes, twin=True, work=tmp_path)
    assert placed_replicas(twin) == list(range(case.replicas)), \
        f"the twin fleet must place every replica; status {twin[0].get('status')}"

    simulated, ns = simulate(kube, case, classes)
    pods_by_replica: dict[int, list[str]] = {}
    for replica in range(case.replicas):
        workload = replica_workload(ours if replica in placed else twin, replica)
        for claim_template in (m for m in workload if m["kind"] == "ResourceClaimTemplate"):
            kube.apply({**claim_template, "metadata": {**claim_template["metadata"], "namespace": ns}})
        for engine in (m for m in workload if m["kind"] == "Deployment"):
            engine["metadata"]["namespace"] = ns
            for pod in pods_of(engine):
                kube.apply(pod)
                pods_by_replica.setdefault(replica, []).append(pod["metadata"]["name"])

    def verdicts() -> dict[str, str] | None:
        pods = {p["metadata"]["name"]: scheduling(p) for p in kube.list("v1", "Pod", ns)}
        return pods if len(pods) == sum(map(len, pods_by_replica.values())) and all(pods.values()) else None

    judged = wait_for(f"{case.id}: kube-scheduler's verdict on every pod", verdicts, SCHEDULE_SECONDS,
                      lambda: str([(p["metadata"]["name"], p.get("status")) for p in kube.list("v1", "Pod", ns)]))
    scheduled = [r for r, pods in pods_by_replica.items() if all(judged[p] == "scheduled" for p in pods)]
    try:
        why = [c.get("message") for p in kube.list("v1", "Pod", ns)
               for c in (p.get("status") or {}).get("conditions") or [] if c["status"] == "False"]
        assert len(scheduled) == len(placed), (
            f"{case.what}: our function places {len(placed)} replica(s), kube-scheduler schedules {len(scheduled)}; "
            f"pods: {judged}; why not: {why}")
    finally:
        remove(kube, ns, simulated)


def test_a_rollout_replaces_copies_one_at_a_time_on_a_pool_with_no_node_to_spare(nodes, tmp_path):
    """Each copy holds a node of its own, and the pool has exactly as many nodes as copies: the Deployment our
    function composes must still roll out a change (kube-controller-manager's Deployment controller) rather than
    wait forever for a node to surge onto."""
    kube = nodes
    case = Case("rollout", "a rollout with no node to spare", 1, nodes=2, copies=2)
    classes = {c["metadata"]["name"]: c for c in load_yaml_documents(EXAMPLES / "classes")}
    ours = render(case, classes, twin=False, work=tmp_path)
    assert placed_replicas(ours) == [0], ours[0].get("status")
    simulated, ns = simulate(kube, case, classes)
    try:
        workload = replica_workload(ours, 0)
        for manifest in workload:
            kube.apply({**manifest, "metadata": {**manifest["metadata"], "namespace": ns}})
        (engine,) = [m for m in workload if m["kind"] == "Deployment"]
        name = engine["metadata"]["name"]

        def rolled_out(generation: int) -> dict | None:
            now = kube.get("apps/v1", "Deployment", name, ns) or {}
            status = now.get("status") or {}
            done = (status.get("observedGeneration", 0) >= generation and status.get("updatedReplicas") == 2
                    and status.get("readyReplicas") == 2 and status.get("replicas") == 2)
            return now if done else None

        first = wait_for("both copies Ready", lambda: rolled_out(1), SCHEDULE_SECONDS,
                         lambda: str((kube.get("apps/v1", "Deployment", name, ns) or {}).get("status")))
        container = first["spec"]["template"]["spec"]["containers"][0]
        changed = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                   "spec": {**engine["spec"], "template": {**engine["spec"]["template"], "spec": {
                       **engine["spec"]["template"]["spec"],
                       "containers": [{**container, "image": "vllm/vllm-openai:v0.23.1"}]}}}}
        generation = kube.apply(changed)["metadata"]["generation"]
        wait_for("the change rolled out to both copies", lambda: rolled_out(generation), SCHEDULE_SECONDS,
                 lambda: str([(p["metadata"]["name"], p["spec"].get("nodeName"), (p.get("status") or {}).get("phase"))
                              for p in kube.list("v1", "Pod", ns)]))
        images = {p["spec"]["containers"][0]["image"] for p in kube.list("v1", "Pod", ns)
                  if not p["metadata"].get("deletionTimestamp")}
        assert images == {"vllm/vllm-openai:v0.23.1"}, images
    finally:
        remove(kube, ns, simulated)
