"""A Standalone deployment serves on real nodes (`controlplane.sh run --crossplane --nodes --kubelets 2`, with the
nodes labelled and tainted as the example cluster's GPU pool: tests/run.sh's real-node step).

Through Crossplane and our function, the Existing example cluster (its kubeconfig pointing back at this API server)
whose GPU pool's nodes are the real kubelets, and the small example deployment with one replica of one copy (the
composed anti-affinity gives each engine pod a node; the bad input needs the other), its engine image
replaced by the mock engine (tests/controlplane/modules/mock-engine), everything else as the user wrote it:
provider-kubernetes applies the composed workload, the kubelets start the engine pods and run the composed startup
and readiness probes against the engine's /health (so a pod is Ready only once the engine is), the ModelDeployment
becomes Ready from the workload's observed status, and a pod in the cluster gets a completion, and a streamed one
ending in `[DONE]`, through the engine's composed Service. The standby server runs from the function's own image,
as the fleet gateway composes it, and answers 503 with Retry-After. An engine image that is absent, and an engine
that never becomes healthy, leave their deployments not Ready, with a condition naming the pod's own failure as the
cluster's pod reporter (run from the function's image on a real node) saw it, and the serving one serving.

Stand-ins left, as in test_scheduling.py: provider-helm (the cluster's charts are marked installed), trust-manager
and Envoy Gateway (the cluster gateway is given an address), and the replica's endpoint picker (llm-d's image is out
of reach), which runs on a system node kwok simulates, where it is Ready without starting. Its composed config
runs all the same, in the inference extension's picker as a process of the test over two engine pods on the real
nodes (picker.py). No GPU: the devices are the test DRA driver's, the engine is the mock.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

import images
from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from picker import Picker
from real_nodes import (KUBELET_LABEL, POD_SECONDS, TOLERATE_ALL, condition, events, load_shell_image, pod,
                        pod_log, pod_status, probe_failures, require_kubelets, shell_container, wait_finished)
from simulated_nodes import GPU_TAINT, POOL_LABEL, RESOURCE_API, SYSTEM_POOL, apply_simulated, node
from test_fleet_metrics import composed, manifest_of
from test_scheduling import apply_until_serving, existing_cluster
from workload import API, conditions, tolerating

EXAMPLES = REPO_ROOT / "examples"
CLUSTER_NAME = "onprem-live"
CLIENTS = "serving-clients"
ENGINE_IMAGE = images.MOCK_ENGINE_IMAGE
# The engine's /health answers 503 this long after it starts: longer than one probe period (10 s), so the kubelet
# runs the composed startup probe against a not-yet-ready engine at least once.
STARTUP_SECONDS = 15
# An engine that never becomes healthy within any test's bounds.
NEVER_SECONDS = 86400
# Crossplane reconciles on watch events; provider-kubernetes polls every 10 s; pods start on a loaded machine.
CONVERGE_SECONDS = 240
SERVING_PORT = 8000  # function/src/workload/well_known.rs
POOL_API = "inference.networking.k8s.io/v1"
FLEET_GATEWAY = EXAMPLES / "services" / "fleet-gateway.yaml"
FLEET = REPO_ROOT / "tests" / "fixtures" / "services" / "fleet.yaml"


# --- the cluster -----------------------------------------------------------------------------------------------

def gpu_pool_nodes(kube: Kube, cluster: dict) -> list[str]:
    """The real nodes, each checked to carry what a node of the cluster's GPU pool carries: the pool label, the GPU
    taint and the cluster's taints (tests/run.sh gives them through CONTROLPLANE_KUBELET_LABELS and _TAINTS)."""
    [pool] = [p["name"] for p in cluster["spec"]["nodePools"]]
    wanted = [dict(GPU_TAINT)] + [dict(t) for t in cluster["spec"].get("taints") or []]
    names = require_kubelets()
    for name in names:
        node = kube.get("v1", "Node", name) or {}
        labels, taints = node["metadata"].get("labels") or {}, node["spec"].get("taints") or []
        missing = [t for t in wanted if t not in [{k: t2[k] for k in ("key", "value", "effect") if k in t2}
                                                  for t2 in taints]]
        if labels.get(POOL_LABEL) != pool or missing:
            pytest.fail(f"real node {name} is not a node of {CLUSTER_NAME}'s pool {pool!r} (label {POOL_LABEL}="
                        f"{labels.get(POOL_LABEL)!r}, taints {taints}, missing {missing}): start it with "
                        f"CONTROLPLANE_KUBELET_LABELS={POOL_LABEL}={pool} and CONTROLPLANE_KUBELET_TAINTS naming "
                        "those taints, as tests/run.sh does")
    return names


@pytest.fixture(scope="module")
def live_cluster(platform, nodes, tmp_path_factory) -> Iterator[dict]:
    """The Existing example cluster Ready, its GPU pool the real nodes, the test images in their containerd."""
    kube = platform
    cluster = existing_cluster(kube, CLUSTER_NAME)
    gpu_pool_nodes(kube, cluster)
    scratch = tmp_path_factory.mktemp("images")
    load_shell_image(scratch)
    images.load_test_image(ENGINE_IMAGE, scratch)
    kube.ensure_namespace(CLIENTS)
    classes = load_yaml_documents(EXAMPLES / "classes")
    # The DeviceClass is the harness's, installed with the nodes' DRA drivers.
    for obj in classes:
        kube.apply(obj)
    # The pod reporter the cluster composes runs from the function's image under its release name.
    images.load_test_image(images.FUNCTION_RELEASE_IMAGE, scratch)
    # The endpoint picker each replica's routing runs (llm-d's image, out of reach here) goes to an untainted node,
    # as a cluster's system pool has: kwok simulates one, and runs the picker there without starting it. It joins
    # once the pod reporter runs on a real node: there, and only there, it really watches the pods.
    apply_until_serving(kube, cluster)
    wait_for("the pod reporter running on a real node", lambda: reporter_running(kube), CONVERGE_SECONDS,
             lambda: str([p.get("status") for p in reporter_pods(kube)]))
    system = [node(f"{CLUSTER_NAME}-{SYSTEM_POOL}-0", SYSTEM_POOL, [])]
    apply_simulated(kube, system)
    yield cluster

    kube.delete("v1", "Namespace", CLIENTS)
    kube.delete(API, "InferenceCluster", CLUSTER_NAME)
    wait_for("the InferenceCluster removed", lambda: not kube.get(API, "InferenceCluster", CLUSTER_NAME),
             CONVERGE_SECONDS)
    for obj in system:
        kube.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"])


REPORTER = "modelplane-pod-reporter"  # function/src/workload/pod_report.rs
REPORT_NAMESPACE = "modelplane-system"


def reporter_pods(kube: Kube) -> list[dict]:
    return [p for p in kube.list("v1", "Pod", REPORT_NAMESPACE)
            if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == REPORTER]


def reporter_running(kube: Kube) -> bool:
    real = set(require_kubelets())
    return any(p["spec"].get("nodeName") in real and condition(p, "Ready") == "True" for p in reporter_pods(kube))


# --- deployments -----------------------------------------------------------------------------------------------

def live_deployment(cluster: dict, name: str, *, image: str = ENGINE_IMAGE, startup_seconds: int = STARTUP_SECONDS,
                    copies: int | None = None) -> dict:
    """The small example as its user wrote it for this cluster (one replica, tolerating the cluster's taints), the
    engine's image the mock engine's (run as present: `imagePullPolicy: Never`) with its startup delay in its env."""
    deployment = copy.deepcopy(load_yaml_documents(EXAMPLES / "deployments" / "qwen3-small.yaml")[0])
    deployment["metadata"]["name"] = name
    deployment["spec"]["replicas"] = 1
    spec = deployment["spec"]["template"]["spec"]
    spec.pop("clusterSelector", None)
    spec["tolerations"] = tolerating(cluster)
    [engine] = spec["engines"]
    if copies is not None:
        engine["copies"] = copies
    [member] = engine["members"]
    [container] = member["template"]["spec"]["containers"]
    container["image"], container["imagePullPolicy"] = image, "Never"
    container.setdefault("env", []).append({"name": "MOCK_ENGINE_STARTUP_SECONDS", "value": str(startup_seconds)})
    return deployment


def engine_pods(kube: Kube, namespace: str, deployment: str) -> list[dict]:
    return [p for p in kube.list("v1", "Pod", namespace) if (p["metadata"].get("labels") or {}).get(
        "modelplane.ai/workload", "").startswith(f"{deployment}-0-")]


def deployment_now(kube: Kube, namespace: str, name: str) -> dict:
    return kube.get(API, "ModelDeployment", name, namespace) or {}


def describe_pods(kube: Kube, pods: list[dict]) -> str:
    return str([pod_status(kube, p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods])


def remove_deployment(kube: Kube, deployment: dict) -> None:
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    kube.delete(API, "ModelDeployment", name, namespace)
    wait_for(f"the engine pods of {name} gone", lambda: not engine_pods(kube, namespace, name), CONVERGE_SECONDS,
             lambda: describe_pods(kube, engine_pods(kube, namespace, name)))


# --- the endpoint picker ---------------------------------------------------------------------------------------

def service_account_kubeconfig(kube: Kube, namespace: str, account: str, out: Path) -> Path:
    """A kubeconfig at `out` for this API server with a token of ServiceAccount `namespace/account`: whoever uses it
    may do what that account's RBAC grants, and nothing else."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    token = kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
                         body=request)["status"]["token"]
    ca = Path(os.environ["CONTROLPLANE_STATE"]) / "pki" / "ca.crt"
    out.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "picker",
        "clusters": [{"name": "workload", "cluster": {"server": kube.server, "certificate-authority": str(ca)}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "picker", "context": {"cluster": "workload", "user": account}}]}))
    return out


def test_the_composed_picker_picks_among_engine_pods_on_the_real_nodes(kube, live_cluster, tmp_path):
    """Two copies of one replica, an engine pod on each real node, behind the InferencePool composed for the
    replica. The composed picker (a process of the test, as picker.py runs it, under a token of the ServiceAccount
    composed for it, so the composed Role is all it may read) watches that pool, reads each engine's queue from
    its /metrics at its pod address, and picks what the composed scorers mean: the shorter queue for a new prompt,
    and the engine it sent a prompt to before over a shorter queue. Runs before the `serving` fixture takes a node."""
    deployment = live_deployment(live_cluster, "qwen3-picked", startup_seconds=0, copies=2)
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    kube.ensure_namespace(namespace)
    kube.apply(deployment)
    running = None
    try:
        pods = wait_for("2 engine pods Ready", lambda: (found := engine_pods(kube, namespace, name))
                        and len(found) == 2 and all(condition(p, "Ready") == "True" for p in found) and found,
                        CONVERGE_SECONDS, lambda: describe_pods(kube, engine_pods(kube, namespace, name)))
        assert {p["spec"]["nodeName"] for p in pods} == set(gpu_pool_nodes(kube, live_cluster))
        labels = pods[0]["metadata"]["labels"]
        [pool] = wait_for("the replica's InferencePool", lambda: [
            p for p in kube.list(POOL_API, "InferencePool") if all(
                labels.get(k) == v for k, v in p["spec"]["selector"]["matchLabels"].items())], CONVERGE_SECONDS)
        where, picker_name = pool["metadata"]["namespace"], pool["spec"]["endpointPickerRef"]["name"]
        config_map = kube.get("v1", "ConfigMap", picker_name, where)
        picker_deployment = kube.get("apps/v1", "Deployment", picker_name, where)
        assert config_map and picker_deployment, f"no composed picker {where}/{picker_name}"
        account = picker_deployment["spec"]["template"]["spec"]["serviceAccountName"]
        kubeconfig = service_account_kubeconfig(kube, where, account, tmp_path / "picker.kubeconfig")
        engines = {p["status"]["podIP"]: f"http://{p['status']['podIP']}:{SERVING_PORT}" for p in pods}
        direct = requests.Session()
        direct.trust_env = False  # the pod network is this machine's: no proxy in between

        def set_waiting(waiting: dict[str, int]) -> None:
            for address, count in waiting.items():
                response = direct.post(engines[address] + "/mock/state", json={"waiting": count}, timeout=5)
                assert response.ok, response.text

        a, b = engines
        set_waiting({a: 0, b: 0})
        running = Picker(config_map, picker_deployment, kubeconfig, tmp_path)
        running.wait_picking()
        set_waiting({a: 6, b: 0})
        for n in range(3):
            running.picks(f"prompt {n} of the first round, never seen before", f"{b}:{SERVING_PORT}")
        set_waiting({a: 0, b: 6})
        for n in range(3):
            running.picks(f"prompt {n} of the second round, unlike the first round's", f"{a}:{SERVING_PORT}")
        # A long prompt sent to b comes back to b over a's shorter queue (prefix weight 2 against the queue's 1).
        prompt = " ".join(f"word{i}" for i in range(400))
        set_waiting({a: 6, b: 0})
        running.picks(prompt, f"{b}:{SERVING_PORT}")
        set_waiting({a: 0, b: 6})
        running.picks(prompt, f"{b}:{SERVING_PORT}")
    finally:
        if running:
            running.stop()
        remove_deployment(kube, deployment)


class Serving:
    """The serving deployment: its object, its pods once Ready, and every moment it was seen Ready before they
    were (none, if its readiness follows theirs)."""

    def __init__(self, deployment: dict, pods: list[dict], early: list[str]):
        self.deployment, self.pods, self.early = deployment, pods, early
        self.namespace, self.name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]


@pytest.fixture(scope="module")
def serving(kube, live_cluster) -> Iterator[Serving]:
    # One copy: the composed anti-affinity gives every engine pod a node of its own, and the bad input below needs
    # the other real node.
    deployment = live_deployment(live_cluster, "qwen3-small", copies=1)
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    copies = deployment["spec"]["template"]["spec"]["engines"][0]["copies"]
    kube.ensure_namespace(namespace)
    kube.apply(deployment)
    early: list[str] = []

    def all_ready() -> list[dict] | None:
        pods = engine_pods(kube, namespace, name)
        ready = len(pods) == copies and all(condition(p, "Ready") == "True" for p in pods)
        if not ready and conditions(deployment_now(kube, namespace, name)).get("Ready") == "True":
            early.append(describe_pods(kube, pods))
        return pods if ready else None

    pods = wait_for(f"{copies} engine pods Ready", all_ready, CONVERGE_SECONDS,
                    lambda: describe_pods(kube, engine_pods(kube, namespace, name)))
    yield Serving(deployment, pods, early)
    remove_deployment(kube, deployment)
    wait_for("the ResourceClaims released", lambda: not kube.list(RESOURCE_API, "ResourceClaim", namespace),
             CONVERGE_SECONDS)


def test_the_engine_pods_run_on_the_real_gpu_nodes_with_their_devices(kube, live_cluster, serving):
    nodes = set(gpu_pool_nodes(kube, live_cluster))
    claims = {c["metadata"]["name"]: c for c in kube.list(RESOURCE_API, "ResourceClaim", serving.namespace)}
    for pod in serving.pods:
        assert pod["spec"]["nodeName"] in nodes, (pod["metadata"]["name"], pod["spec"]["nodeName"])
        [container] = pod["status"]["containerStatuses"]
        assert container["image"].endswith(ENGINE_IMAGE) and container["started"] and container["restartCount"] == 0
        # The composed claim, allocated by kube-scheduler from the node's ResourceSlice and prepared there by the
        # test DRA driver before the kubelet started the container.
        (claim_status,) = pod["status"]["resourceClaimStatuses"]
        allocated = claims[claim_status["resourceClaimName"]]["status"]["allocation"]["devices"]["results"]
        assert [r["driver"] for r in allocated] == ["gpu.nvidia.com"], allocated


def test_the_kubelet_holds_readiness_until_the_engine_is_healthy(kube, serving):
    for pod in serving.pods:
        [container] = pod["spec"]["containers"]
        # The probes are the function's (the user wrote none), on the engine's /health.
        for probe in ("startupProbe", "readinessProbe"):
            assert container[probe]["httpGet"]["path"] == "/health", container[probe]
            assert container[probe]["httpGet"]["port"] == SERVING_PORT, container[probe]
        # The kubelet ran the startup probe while the engine still answered 503: the pod was not Ready then.
        failures = probe_failures(kube, pod["metadata"]["namespace"], pod["metadata"]["name"], "Startup")
        assert any("statuscode: 503" in f for f in failures), (failures, events(kube, serving.namespace,
                                                                                pod["metadata"]["name"]))
    assert serving.early == [], "the ModelDeployment was Ready before its engine pods were"


def wait_deployment_ready(kube: Kube, serving: Serving) -> dict:
    return wait_for("the ModelDeployment Ready",
                    lambda: (d := deployment_now(kube, serving.namespace, serving.name))
                    and conditions(d).get("Ready") == "True" and d,
                    CONVERGE_SECONDS, lambda: str(deployment_now(kube, serving.namespace, serving.name).get("status")))


def test_the_model_deployment_is_ready_from_the_pods_status(kube, serving):
    ready = wait_deployment_ready(kube, serving)
    assert ready["status"]["readyReplicas"] == 1, ready["status"]


def engine_service(kube: Kube, namespace: str, deployment: str) -> dict:
    return wait_for(f"the composed Service of {deployment}", lambda: [
        s for s in kube.list("v1", "Service", namespace)
        if (s["metadata"].get("labels") or {}).get("modelplane.ai/workload", "").startswith(f"{deployment}-0-")],
        CONVERGE_SECONDS)[0]


def http_request(method: str, host: str, port: int, path: str, body: dict | None = None) -> str:
    """An HTTP/1.0 request (the server closes the connection after its answer), as bytes for a shell variable."""
    data = json.dumps(body) if body is not None else ""
    headers = [f"{method} {path} HTTP/1.0", f"Host: {host}", "Content-Type: application/json",
               f"Content-Length: {len(data.encode())}"]
    return "\r\n".join(headers) + "\r\n\r\n" + data


def from_a_pod(kube: Kube, name: str, host: str, port: int, request: str) -> str:
    """Sends `request` to host:port with busybox's nc from a pod on a real node (its wget crashes in a container);
    returns the whole answer, headers and body. nc's input stays open until the server closes the connection (at
    most 60 s): nc shuts its side down at the end of its input, which the mock engine takes for a caller gone (it
    stops generating) and the standby server for a connection to drop unanswered."""
    script = (f'mkfifo /tmp/in && {{ nc -w 10 {host} {port} </tmp/in & n=$!; '
              '{ printf "%s" "$REQUEST"; sleep 60; } >/tmp/in & w=$!; wait $n; s=$?; kill $w; exit $s; }')
    kube.apply(pod(CLIENTS, name, [shell_container(
        "client", script, env=[{"name": "REQUEST", "value": request}])], restartPolicy="Never"))
    finished = wait_finished(kube, CLIENTS, name)
    log = pod_log(kube, CLIENTS, name)
    assert finished["status"]["phase"] == "Succeeded", f"{pod_status(kube, CLIENTS, name)}\n{log}"
    return log


def split_answer(answer: str) -> tuple[int, dict[str, str], str]:
    head, _, body = answer.replace("\r\n", "\n").partition("\n\n")
    status_line, *header_lines = head.splitlines()
    match = re.match(r"HTTP/1\.[01] (\d{3})", status_line)
    assert match, answer
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    return int(match.group(1)), headers, body


def test_a_pod_gets_a_completion_and_a_stream_through_the_engines_service(kube, serving):
    service = engine_service(kube, serving.namespace, serving.name)
    host = f"{service['metadata']['name']}.{serving.namespace}.svc.cluster.local"
    [port] = [p["port"] for p in service["spec"]["ports"]]
    chat = {"model": "qwen3-small", "messages": [{"role": "user", "content": "hello from a pod"}], "max_tokens": 16}

    status, _, body = split_answer(from_a_pod(kube, "chat", host, port,
                                              http_request("POST", host, port, "/v1/chat/completions", chat)))
    assert status == 200, body
    answer = json.loads(body)
    assert answer["model"] == "qwen3-small", answer
    assert "heard: hello from a pod" in answer["choices"][0]["message"]["content"], answer

    status, _, body = split_answer(from_a_pod(kube, "stream", host, port, http_request(
        "POST", host, port, "/v1/chat/completions", chat | {"stream": True})))
    assert status == 200, body
    events_ = [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data: ")]
    assert events_ and events_[-1] == "[DONE]", body
    words = "".join(json.loads(e)["choices"][0]["delta"].get("content") or "" for e in events_[:-1]
                    if json.loads(e).get("choices"))
    assert "hello from a pod" in words, body


# --- the standby server ----------------------------------------------------------------------------------------

def test_the_standby_server_runs_from_the_functions_image_and_asks_callers_to_retry(kube, live_cluster,
                                                                                    tmp_path_factory):
    function_image = images.load_test_image(images.FUNCTION_IMAGE, tmp_path_factory.mktemp("function-image"))
    gateway = composed(FLEET_GATEWAY, FLEET)
    deployment, service = copy.deepcopy(manifest_of(gateway, "Deployment")), manifest_of(gateway, "Service")
    assert deployment["metadata"]["name"] == service["metadata"]["name"] == "modelplane-standby"
    spec = deployment["spec"]["template"]["spec"]
    [container] = spec["containers"]
    assert container["image"].startswith("ghcr.io/modelplaneai/function-modelplane:"), container["image"]
    # The one change: the image, built here from the binary under test. The fleet gateway's cluster runs it on its
    # untainted nodes; every real node here is tainted, so it tolerates them.
    container["image"], container["imagePullPolicy"] = function_image, "Never"
    spec["nodeSelector"], spec["tolerations"] = dict(KUBELET_LABEL), list(TOLERATE_ALL)
    kube.ensure_namespace(deployment["metadata"]["namespace"])
    kube.apply(deployment)
    kube.apply(service)
    namespace = deployment["metadata"]["namespace"]
    try:
        def ready() -> list[dict] | None:
            pods = [p for p in kube.list("v1", "Pod", namespace)
                    if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == "modelplane-standby"]
            return pods if pods and all(condition(p, "Ready") == "True" for p in pods) else None

        # Ready is the kubelet's readiness probe of /healthz, as composed, passing.
        wait_for("the standby server's pod Ready", ready, POD_SECONDS,
                 lambda: str([p.get("status") for p in kube.list("v1", "Pod", namespace)]))
        host = f"modelplane-standby.{namespace}.svc.cluster.local"
        port = service["spec"]["ports"][0]["port"]
        status, headers, body = split_answer(from_a_pod(kube, "standby", host, port, http_request(
            "POST", host, port, "/ml-team/qwen3-small/v1/chat/completions",
            {"model": "ml-team/qwen3-small", "messages": [{"role": "user", "content": "hi"}]})))
        assert status == 503, body
        assert headers.get("retry-after") == "30", headers
        error = json.loads(body)["error"]
        assert error["type"] == "model_starting" and "ml-team/qwen3-small" in error["message"], error
    finally:
        kube.delete("apps/v1", "Deployment", "modelplane-standby", namespace)
        kube.delete("v1", "Service", "modelplane-standby", namespace)


# --- bad input -------------------------------------------------------------------------------------------------

def waiting_reason(pod: dict) -> str | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return statuses and (statuses[0]["state"].get("waiting") or {}).get("reason")


def image_never_pulled(kube: Kube, pod: dict) -> bool:
    return waiting_reason(pod) == "ErrImageNeverPull"


def startup_probe_failing(kube: Kube, pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and any(
        "statuscode: 503" in m
        for m in probe_failures(kube, pod["metadata"]["namespace"], pod["metadata"]["name"], "Startup"))


# One copy each: the composed anti-affinity puts at most one engine pod on a node, and the serving deployment holds
# the other real node.
# Each case: the change, the kubelet's failure, the reason EnginesRunning gives, and words of the kubelet's it quotes.
BAD_INPUT = {
    "absent-image": (dict(image="modelplane.test/absent-engine:local"), image_never_pulled, "ImagePullFailed",
                     "cannot pull image modelplane.test/absent-engine:local"),
    "never-healthy": (dict(startup_seconds=NEVER_SECONDS), startup_probe_failing, "EngineNotHealthy",
                      "Startup probe failed: HTTP probe failed with statuscode: 503"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_a_broken_engine_leaves_its_deployment_not_ready_and_breaks_nothing(kube, live_cluster, serving, case):
    changes, failing, reason, said_by_kubelet = BAD_INPUT[case]
    wait_deployment_ready(kube, serving)
    assert_failure_named(kube, serving, live_deployment(live_cluster, f"qwen3-{case}", copies=1, **changes),
                         failing, reason, said_by_kubelet)


def unschedulable(kube: Kube, pod: dict) -> bool:
    return any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])


def test_an_engine_no_free_device_satisfies_is_named_unschedulable(kube, live_cluster, serving):
    """Something outside Modelplane holds every free GPU of the real nodes (another team's pod, say): the replica
    is placed (the pool's ledger has room) but its pod cannot be scheduled, and EnginesRunning quotes the
    scheduler."""
    wait_deployment_ready(kube, serving)
    [template] = [t for t in kube.list(RESOURCE_API, "ResourceClaimTemplate", serving.namespace)
                  if t["metadata"]["name"].startswith(f"{serving.name}-0-")]
    used: dict[str, int] = {}
    for claim in kube.list(RESOURCE_API, "ResourceClaim"):
        for result in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
            used[result["pool"]] = used.get(result["pool"], 0) + 1
    hogs = []
    for slice_ in kube.list(RESOURCE_API, "ResourceSlice"):
        node_name = slice_["spec"].get("nodeName")
        free = len(slice_["spec"]["devices"]) - used.get(node_name, 0)
        if node_name not in require_kubelets() or free == 0:
            continue
        claim = {"apiVersion": RESOURCE_API, "kind": "ResourceClaim",
                 "metadata": {"name": f"hog-{node_name}", "namespace": CLIENTS},
                 "spec": copy.deepcopy(template["spec"]["spec"])}
        for request in claim["spec"]["devices"]["requests"]:
            request["exactly"]["count"] = free
        hog = pod(CLIENTS, f"hog-{node_name}", [shell_container("hog", "sleep 3600")],
                  resourceClaims=[{"name": "gpus", "resourceClaimName": claim["metadata"]["name"]}])
        hog["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node_name}
        hog["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
        kube.apply(claim)
        kube.apply(hog)
        hogs.append((hog, claim))
    try:
        for hog, _ in hogs:
            wait_for(f"{hog['metadata']['name']} holding its node's free devices",
                     lambda h=hog: condition(kube.get("v1", "Pod", h["metadata"]["name"], CLIENTS) or {}, "Ready")
                     == "True", POD_SECONDS, lambda h=hog: pod_status(kube, CLIENTS, h["metadata"]["name"]))
        assert_failure_named(kube, serving, live_deployment(live_cluster, "qwen3-no-device", copies=1),
                             unschedulable, "Unschedulable", "cannot be scheduled: 0/")
    finally:
        for hog, claim in hogs:
            kube.delete("v1", "Pod", hog["metadata"]["name"], CLIENTS)
            kube.delete(RESOURCE_API, "ResourceClaim", claim["metadata"]["name"], CLIENTS)


def assert_failure_named(kube: Kube, serving: Serving, deployment: dict, failing, reason: str,
                         said_by_kubelet: str) -> None:
    """Applies `deployment`, whose pod `failing` says is failing; checks it is never Ready, that EnginesRunning
    names the failure (`reason`, quoting `said_by_kubelet`), and that the serving deployment stays Ready."""
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    kube.apply(deployment)
    ever_ready: list[dict] = []

    def watched() -> dict:
        now = deployment_now(kube, namespace, name)
        if conditions(now).get("Ready") == "True":
            ever_ready.append(now.get("status"))
        return now

    try:
        # The kubelet's own failure: the image is not there (and may not be pulled), or the engine's /health
        # answers 503 to the composed startup probe.
        wait_for(f"the kubelet failing {name}'s pod ({failing.__name__})",
                 lambda: watched() is not None and (pods := engine_pods(kube, namespace, name))
                 and all(failing(kube, p) for p in pods), CONVERGE_SECONDS,
                 lambda: describe_pods(kube, engine_pods(kube, namespace, name)))

        # Everything else the replica composes becomes Ready; the engine's workload, which provider-kubernetes
        # observes unavailable, never does: Crossplane's Ready condition names that composed resource. The pod's
        # own failure is in EnginesRunning, from the report the cluster's pod reporter wrote from the pod's status
        # (or the kubelet's failed-probe events), naming the pod.
        workload = f"replica-0-{CLUSTER_NAME}-{deployment['spec']['template']['spec']['engines'][0]['name']}"
        [pod_name] = [p["metadata"]["name"] for p in engine_pods(kube, namespace, name)]

        def settled() -> dict | None:
            now = watched()
            found = {c["type"]: c for c in (now.get("status") or {}).get("conditions") or []}
            ready, engines = found.get("Ready") or {}, found.get("EnginesRunning") or {}
            return now if ready.get("status") == "False" and ready.get(
                "message") == f"Unready resources: {workload}" and engines.get("reason") == reason else None

        said = wait_for(f"{name} not Ready, its EnginesRunning saying {reason}", settled, CONVERGE_SECONDS,
                        lambda: str(deployment_now(kube, namespace, name).get("status")))
        found = {c["type"]: c for c in said["status"]["conditions"]}
        assert found["Ready"]["reason"] == "Creating", found["Ready"]
        engines = found["EnginesRunning"]
        assert engines["status"] == "False", engines
        assert engines["message"].startswith(f"replica 0 on {CLUSTER_NAME}, engine "), engines
        assert f"pod {pod_name}" in engines["message"] and said_by_kubelet in engines["message"], engines
        assert [r["ready"] for r in said["status"]["replicas"]] == [False], said["status"]
        assert not said["status"].get("readyReplicas"), said["status"]
        for pod in engine_pods(kube, namespace, name):
            assert condition(pod, "Ready") != "True", pod_status(kube, namespace, pod["metadata"]["name"])
            assert failing(kube, pod), pod_status(kube, namespace, pod["metadata"]["name"])
        assert ever_ready == [], f"{name} was Ready: {ever_ready}"
        # Nothing else broke: the serving deployment and its engines are still Ready.
        assert conditions(deployment_now(kube, serving.namespace, serving.name)).get("Ready") == "True"
        assert all(condition(p, "Ready") == "True" for p in engine_pods(kube, serving.namespace, serving.name))
    finally:
        remove_deployment(kube, deployment)
