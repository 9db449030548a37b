"""Gangs as far as this control plane goes: the seed's two-node engine, composed by our function for each stack, with
its pods made as the LeaderWorkerSet and Grove controllers make them from our templates (neither controller's
module is served here), placed by kube-scheduler on simulated H200 nodes, and each pod's leader address and rank
resolved from its own env.

What the controllers would do is taken from their code (docs/testing.md names the sources): LWS names the leader
pod `<lws>-<group>` and the workers `<lws>-<group>-<index>`, sets each pod's hostname to its name under the
subdomain `<lws>`, creates the headless Service `<lws>`, and *prepends* `LWS_LEADER_ADDRESS`, `LWS_GROUP_SIZE` and
`LWS_WORKER_INDEX`. Grove gives each pod of clique `<pcs>-0-<group>-<copy>-<clique>` the hostname
`<clique name>-<index>` under the subdomain `<pcs>-0`, labels it with its scaling-group copy, creates the headless
Service `<pcs>-0`, and *appends* its `GROVE_*` variables.

A pod's env is resolved as the kubelet resolves it: each value sees only the entries before it, fieldRefs read the
pod's labels, and `$(VAR)` in the command sees the whole env. The address must name the leader pod's host under its
subdomain, and the headless Service's EndpointSlice (kube-controller-manager's) must publish that host with the
leader pod's IP: that pair is what cluster DNS answers.

Not proven here: the controllers' own reconcilers and webhooks (the pods are made by this test), KAI's gang
placement (the Grove pods are scheduled by kube-scheduler instead of `kai-scheduler`, whose module is not served
here either), and DNS itself.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

import installs
from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from simulated_nodes import RESOURCE_API, apply_simulated, cluster_nodes, device_classes, remove

EXAMPLES = REPO_ROOT / "examples"
SCHEDULE_SECONDS = 90
LEADER_ADDRESS = "MODELPLANE_LEADER_ADDRESS"
RANK = "MODELPLANE_RANK"
LWS_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROVE_PART_OF = "app.kubernetes.io/part-of"
GROVE_GANG_INDEX = "grove.io/podcliquescalinggroup-replica-index"
# The only scheduler running here; the Dynamo stack's pods name KAI's.
DEFAULT_SCHEDULER = "default-scheduler"


def gang_fleet(stack: str, copies: int, workers: int) -> tuple[dict, dict]:
    """An Existing cluster of `stack` with one H200 pool, big enough for every pod of the copies; and the seed's
    gang deployment (its cache reference dropped: staging is test_scheduling.py's), `copies` copies of a leader and
    `workers` workers."""
    cluster_name = f"gang-{stack.lower()}"
    cluster = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": cluster_name},
               "spec": {"stack": stack,
                        "cluster": {"source": "Existing", "existing": {
                            "secretRef": {"name": f"{cluster_name}-kubeconfig", "key": "kubeconfig"},
                            "cache": {"storageClassName": "cephfs"}}},
                        "nodePools": [{"name": f"h200-{stack.lower()}", "className": "eks-h200-8x",
                                       "nodeCount": (1 + workers) * copies}]}}
    deployment = copy.deepcopy(load_yaml_documents(EXAMPLES / "deployments" / "qwen3-coder.yaml")[0])
    deployment["metadata"]["namespace"] = f"gang-{stack.lower()}"
    spec = deployment["spec"]["template"]["spec"]
    spec.pop("modelCacheRef")
    spec["engines"][0]["copies"] = copies
    spec["engines"][0]["members"][1]["worker"]["nodes"] = workers
    return cluster, deployment


def composed(cluster: dict, deployment: dict, work: Path) -> list[dict]:
    """The manifests our function composes for the deployment on the cluster."""
    (work / "md.yaml").write_text(yaml.safe_dump(deployment))
    (work / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    documents = installs.render(work / "md.yaml", work / "cluster.yaml", EXAMPLES / "classes", until_ready=True)
    return [d["spec"]["forProvider"]["manifest"] for d in documents[1:] if d.get("kind") == "Object"]


def one(manifests: list[dict], kind: str) -> dict:
    (found,) = [m for m in manifests if m["kind"] == kind]
    return found


def pod(name: str, namespace: str, template: dict, hostname: str, subdomain: str, labels: dict,
        env: list[dict], prepend: bool) -> dict:
    """A pod of `template` as a gang controller makes it: its host under `subdomain`, its labels, and the
    controller's `env` prepended or appended to every container's."""
    spec = copy.deepcopy(template["spec"])
    spec.pop("schedulerName", None)
    spec["schedulerName"] = DEFAULT_SCHEDULER
    spec.update(hostname=hostname, subdomain=subdomain)
    for container in spec["containers"]:
        ours = container.get("env") or []
        container["env"] = env + [e for e in ours if e["name"] not in {v["name"] for v in env}] if prepend else \
            ours + env
    metadata = copy.deepcopy(template.get("metadata") or {})
    metadata.update(name=name, namespace=namespace, labels={**(metadata.get("labels") or {}), **labels})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def headless_service(name: str, namespace: str, selector: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": selector,
                     "ports": [{"name": "engine", "port": 8000}]}}


def lws_pods(lws: dict) -> tuple[list[dict], dict, dict[str, tuple[str, str]]]:
    """The pods, the headless Service and, per pod, its leader pod and rank, as LWS makes them (Shared
    subdomain)."""
    name, namespace = lws["metadata"]["name"], lws["metadata"]["namespace"]
    group = lws["spec"]["leaderWorkerTemplate"]
    size = group["size"]
    pods, expected = [], {}
    for g in range(lws["spec"]["replicas"]):
        leader = f"{name}-{g}"
        for index in range(size):
            pod_name = leader if index == 0 else f"{leader}-{index}"
            env = [{"name": "LWS_LEADER_ADDRESS", "value": f"{leader}.{name}.{namespace}"},
                   {"name": "LWS_GROUP_SIZE", "value": str(size)},
                   {"name": "LWS_WORKER_INDEX", "value": str(index)}]
            template = group["leaderTemplate"] if index == 0 else group["workerTemplate"]
            labels = {LWS_LABEL: name, "leaderworkerset.sigs.k8s.io/group-index": str(g),
                      "leaderworkerset.sigs.k8s.io/worker-index": str(index)}
            pods.append(pod(pod_name, namespace, template, pod_name, name, labels, env, prepend=True))
            expected[pod_name] = (leader, str(index))
    return pods, headless_service(name, namespace, {LWS_LABEL: name}), expected


def grove_pods(pcs: dict) -> tuple[list[dict], dict, dict[str, tuple[str, str]]]:
    """The pods, the headless Service and, per pod, its leader pod and rank (its clique's place in the gang), as
    Grove makes them for PodCliqueSet replica 0 (what we compose) with GROVE_* appended, as every released Grove
    does."""
    name, namespace = pcs["metadata"]["name"], pcs["metadata"]["namespace"]
    template = pcs["spec"]["template"]
    (group,) = template["podCliqueScalingGroups"]
    cliques = {c["name"]: c for c in template["cliques"]}
    subdomain = f"{name}-0"
    pods, expected = [], {}
    for copy_index in range(group["replicas"]):
        prefix = f"{name}-0-{group['name']}-{copy_index}"
        leader = f"{prefix}-{group['cliqueNames'][0]}-0"
        for rank, clique_name in enumerate(group["cliqueNames"]):
            clique = cliques[clique_name]
            full = f"{prefix}-{clique_name}"
            for index in range(clique["spec"]["replicas"]):
                host = f"{full}-{index}"
                env = [{"name": "GROVE_PCS_NAME", "value": name}, {"name": "GROVE_PCS_INDEX", "value": "0"},
                       {"name": "GROVE_PCLQ_NAME", "value": full},
                       {"name": "GROVE_HEADLESS_SERVICE", "value": f"{subdomain}.{namespace}.svc.cluster.local"},
                       {"name": "GROVE_PCLQ_POD_INDEX", "value": str(index)}]
                labels = {"app.kubernetes.io/managed-by": "grove-operator", GROVE_PART_OF: name,
                          "grove.io/podcliqueset-replica-index": "0", "grove.io/podclique": full,
                          GROVE_GANG_INDEX: str(copy_index), **(clique.get("labels") or {})}
                clique_template = {"metadata": {"annotations": clique.get("annotations") or {}},
                                   "spec": clique["spec"]["podSpec"]}
                pods.append(pod(host, namespace, clique_template, host, subdomain, labels, env, prepend=False))
                expected[host] = (leader, str(rank + index))
    service = headless_service(subdomain, namespace, {GROVE_PART_OF: name, "grove.io/podcliqueset-replica-index": "0"})
    return pods, service, expected


VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: `$$` escapes, an unknown reference stays as written."""
    return VAR.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def resolved_env(container: dict, pod_object: dict) -> dict[str, str]:
    """The container's env as the kubelet resolves it: in order, each value seeing only the entries before it."""
    env: dict[str, str] = {}
    labels = pod_object["metadata"].get("labels") or {}
    for entry in container.get("env") or []:
        if "value" in entry:
            env[entry["name"]] = expand(entry["value"], env)
        elif "fieldRef" in (entry.get("valueFrom") or {}):
            path = entry["valueFrom"]["fieldRef"]["fieldPath"]
            label = re.fullmatch(r"metadata\.labels\['(.+)'\]", path)
            assert label, f"{pod_object['metadata']['name']}: a fieldRef this test does not resolve: {path}"
            env[entry["name"]] = labels.get(label.group(1), "")
    return env


def host_address(pod_object: dict) -> str:
    spec = pod_object["spec"]
    return f"{spec['hostname']}.{spec['subdomain']}.{pod_object['metadata']['namespace']}"


def published_hosts(kube: Kube, namespace: str, service: str) -> dict[str, list[str]]:
    """Host name to addresses, as the Service's EndpointSlices publish them for cluster DNS."""
    hosts: dict[str, list[str]] = {}
    for endpoint_slice in kube.list("discovery.k8s.io/v1", "EndpointSlice", namespace):
        if (endpoint_slice["metadata"].get("labels") or {}).get("kubernetes.io/service-name") != service:
            continue
        for endpoint in endpoint_slice.get("endpoints") or []:
            if endpoint.get("hostname"):
                hosts[endpoint["hostname"]] = endpoint["addresses"]
    return hosts


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("stack,kind", [("Standard", "LeaderWorkerSet"), ("Dynamo", "PodCliqueSet")])
def test_gang_pods_made_from_our_templates_are_placed_and_find_their_leader(nodes, stack, kind, workers,
                                                                            tmp_path):
    kube = nodes
    copies = 2
    cluster, deployment = gang_fleet(stack, copies, workers)
    manifests = composed(cluster, deployment, tmp_path)
    workload = one(manifests, kind)
    namespace = deployment["metadata"]["namespace"]
    pods, service, expected = (lws_pods if kind == "LeaderWorkerSet" else grove_pods)(workload)
    assert len(pods) == (1 + workers) * copies, [p["metadata"]["name"] for p in pods]

    classes = load_yaml_documents(EXAMPLES / "classes")
    simulated = device_classes(classes) + cluster_nodes(cluster, classes, system_nodes=0)
    apply_simulated(kube, simulated)
    kube.ensure_namespace(namespace)
    try:
        for claim_template in (m for m in manifests if m["kind"] == "ResourceClaimTemplate"):
            kube.apply(claim_template)
        kube.apply(service)
        for pod_object in pods:
            kube.apply(pod_object)

        def running() -> list[dict] | None:
            now = [kube.get("v1", "Pod", p["metadata"]["name"], namespace) or {} for p in pods]
            ready = all((p.get("status") or {}).get("phase") == "Running" and p["status"].get("podIP") for p in now)
            return now if ready else None

        placed = wait_for(f"the {kind}'s pods Running on GPU nodes", running, SCHEDULE_SECONDS,
                          lambda: str([(p["metadata"]["name"], (kube.get("v1", "Pod", p["metadata"]["name"], namespace)
                                                                or {}).get("status")) for p in pods]))
        by_name = {p["metadata"]["name"]: p for p in placed}
        pool_nodes = {o["metadata"]["name"] for o in simulated if o["kind"] == "Node"}
        nodes = [p["spec"]["nodeName"] for p in placed]
        # One pod per node, each on the pool's nodes, every claim allocated there.
        assert sorted(nodes) == sorted(set(nodes)) and set(nodes) <= pool_nodes, nodes

        hosts = wait_for("the headless Service publishing every host", lambda: (
            h := published_hosts(kube, namespace, service["metadata"]["name"])) and len(h) == len(pods) and h,
            SCHEDULE_SECONDS)
        for pod_object in placed:
            name = pod_object["metadata"]["name"]
            leader_name, rank = expected[name]
            leader = by_name[leader_name]
            for container in pod_object["spec"]["containers"]:
                env = resolved_env(container, pod_object)
                assert env[LEADER_ADDRESS] == host_address(leader) or \
                    env[LEADER_ADDRESS] == f"{host_address(leader)}.svc.cluster.local", (name, env)
                assert hosts[leader["spec"]["hostname"]] == [leader["status"]["podIP"]], (name, hosts)
                assert env[RANK] == rank, (name, env)
                command = " ".join(container.get("command") or [])
                assert f"--master-addr={env[LEADER_ADDRESS]}" in expand(command, env), (name, command)
        claims = kube.list(RESOURCE_API, "ResourceClaim", namespace)
        assert len(claims) == len(pods) and all(c["status"].get("allocation") for c in claims), claims
    finally:
        remove(kube, namespace, simulated)
