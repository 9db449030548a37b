"""Containers that really run (`controlplane.sh run --nodes --kubelets 2`): the kubelets start pods in containerd
from images built here (a static busybox, a dynamically linked binary with its libraries), run their probes, apply
their limits; pods answer on their own IPs, through a ClusterIP Service (kube-proxy) and by name (CoreDNS); a pod
whose image is absent never starts. Without real nodes every test fails, naming `--kubelets`.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest
import requests
import yaml

import images
import installs
from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from real_nodes import (POD_SECONDS, condition, events, load_shell_image, on_real_node, pod, pod_log, pod_status,
                        probe_failures, require_kubelets, shell_container, wait_finished, wait_ready)

NAMESPACE = "real-nodes"
EXAMPLES = REPO_ROOT / "examples"
RESOURCE_API = "resource.k8s.io/v1"
HTTP_PORT = 8080
# busybox httpd serving /www; `ready` and `index.html` are files a container writes (or never does).
SERVE = f"exec httpd -f -p {HTTP_PORT} -h /www"


@pytest.fixture(scope="module")
def real(kube: Kube, tmp_path_factory) -> Kube:
    require_kubelets()
    load_shell_image(tmp_path_factory.mktemp("images"))
    kube.ensure_namespace(NAMESPACE)
    yield kube
    kube.delete("v1", "Namespace", NAMESPACE)
    wait_for(f"namespace {NAMESPACE} gone (its pods stopped by the kubelets)",
             lambda: kube.get("v1", "Namespace", NAMESPACE) is None, POD_SECONDS)


def probed(name: str, script: str) -> dict:
    """A web server whose readiness is an HTTP probe of /ready and whose liveness is a TCP probe of its port."""
    return pod(NAMESPACE, name, [shell_container(
        "web", script, ports=[{"containerPort": HTTP_PORT}],
        readinessProbe={"httpGet": {"path": "/ready", "port": HTTP_PORT}, "periodSeconds": 1, "failureThreshold": 1},
        livenessProbe={"tcpSocket": {"port": HTTP_PORT}, "periodSeconds": 2})])


def test_a_readiness_probe_gates_ready_and_a_failing_one_never_passes(real):
    # Two pods alike but for the file their readiness probe asks for: one writes it after a while, one never.
    real.apply(probed("late", f"mkdir -p /www; (sleep 4; echo ok >/www/ready) & {SERVE}"))
    real.apply(probed("never", f"mkdir -p /www; {SERVE}"))

    late = wait_ready(real, NAMESPACE, "late")
    assert late["status"]["podIP"].startswith("10.244."), late["status"]
    # The kubelet ran the HTTP probe against the container: it failed (404) until the file was there.
    failures = wait_for("the kubelet's failed readiness probes of `never`",
                        lambda: probe_failures(real, NAMESPACE, "never", "Readiness"), POD_SECONDS,
                        lambda: str(events(real, NAMESPACE, "never")))
    assert any("statuscode: 404" in f for f in failures), failures
    never = real.get("v1", "Pod", "never", NAMESPACE)
    assert never["status"]["phase"] == "Running", pod_status(real, NAMESPACE, "never")
    assert condition(never, "Ready") == "False", pod_status(real, NAMESPACE, "never")
    assert never["status"]["containerStatuses"][0]["started"] is True
    # Its liveness (TCP) probe passes: it is never restarted for being unready.
    assert never["status"]["containerStatuses"][0]["restartCount"] == 0
    assert not probe_failures(real, NAMESPACE, "never", "Liveness")


def test_a_failing_exec_liveness_probe_restarts_the_container(real):
    script = "touch /tmp/alive; sleep 2; rm /tmp/alive; exec sleep 3600"
    real.apply(pod(NAMESPACE, "liveness", [shell_container(
        "app", script,
        livenessProbe={"exec": {"command": ["test", "-e", "/tmp/alive"]}, "periodSeconds": 1,
                       "failureThreshold": 1})]))

    def restarted():
        statuses = (real.get("v1", "Pod", "liveness", NAMESPACE) or {}).get("status", {}).get("containerStatuses")
        return statuses and statuses[0]["restartCount"] >= 1
    wait_for("the container restarted for its failed liveness probe", restarted, POD_SECONDS,
             lambda: pod_status(real, NAMESPACE, "liveness"))
    assert probe_failures(real, NAMESPACE, "liveness", "Liveness"), events(real, NAMESPACE, "liveness")


def test_the_memory_limit_is_the_containers_cgroup_limit(real):
    real.apply(pod(NAMESPACE, "limited", [shell_container(
        "app", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
        resources={"limits": {"memory": "64Mi", "cpu": "100m"}})], restartPolicy="Never"))
    finished = wait_finished(real, NAMESPACE, "limited")
    assert finished["status"]["phase"] == "Succeeded", pod_status(real, NAMESPACE, "limited")
    assert pod_log(real, NAMESPACE, "limited").split() == [str(64 * 1024 * 1024)]


def test_a_pod_whose_image_is_absent_never_starts(real):
    real.apply(pod(NAMESPACE, "absent", [{"name": "app", "image": "modelplane.test/absent:local",
                                          "imagePullPolicy": "Never"}]))

    def reason():
        statuses = (real.get("v1", "Pod", "absent", NAMESPACE) or {}).get("status", {}).get("containerStatuses")
        return statuses and (statuses[0]["state"].get("waiting") or {}).get("reason")
    # ContainerCreating while the sandbox starts, then the kubelet's own reason.
    wait_for("the pod waiting with reason ErrImageNeverPull", lambda: reason() == "ErrImageNeverPull",
             POD_SECONDS, lambda: pod_status(real, NAMESPACE, "absent"))
    absent = real.get("v1", "Pod", "absent", NAMESPACE)
    assert absent["status"]["phase"] == "Pending"
    assert condition(absent, "Ready") == "False"
    assert any(e["reason"] == "ErrImageNeverPull" for e in events(real, NAMESPACE, "absent"))


# --- a Deployment behind a Service ---------------------------------------------------------------------------

WEB_REPLICAS = 2


@pytest.fixture(scope="module")
def web(real) -> dict[str, str]:
    """A Deployment of web servers that answer with their pod's name, spread one a node, behind Service `web`.
    Returns each pod's name by its IP."""
    labels = {"app": "web"}
    template = pod(NAMESPACE, "web", [shell_container(
        "web", f"mkdir -p /www && echo $HOSTNAME >/www/index.html && {SERVE}",
        ports=[{"containerPort": HTTP_PORT}],
        readinessProbe={"httpGet": {"path": "/", "port": HTTP_PORT}, "periodSeconds": 1})],
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": labels}}])
    real.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NAMESPACE},
                "spec": {"replicas": WEB_REPLICAS, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": template["spec"]}}})
    real.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NAMESPACE},
                "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": HTTP_PORT}]}})

    def ready_pods():
        pods = [p for p in real.list("v1", "Pod", NAMESPACE) if p["metadata"].get("labels", {}).get("app") == "web"]
        ready = {p["status"]["podIP"]: p["metadata"]["name"] for p in pods if condition(p, "Ready") == "True"}
        return ready if len(ready) == WEB_REPLICAS else None
    pods = wait_for("the Deployment's pods Ready", ready_pods, POD_SECONDS,
                    lambda: str([pod_status(real, NAMESPACE, p["metadata"]["name"])
                                 for p in real.list("v1", "Pod", NAMESPACE)]))

    # A Ready pod is a backend of the Service once the EndpointSlice controller has listed it (and kube-proxy has
    # read that): until then a Service's answers come from fewer pods.
    def listed() -> bool:
        slices = [s for s in real.list("discovery.k8s.io/v1", "EndpointSlice", NAMESPACE)
                  if (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == "web"]
        ready = {a for s in slices for e in s.get("endpoints") or []
                 if (e.get("conditions") or {}).get("ready") for a in e["addresses"]}
        return ready == set(pods)
    wait_for("the Service's EndpointSlice listing both pods", listed, POD_SECONDS)
    return pods


def test_the_deployments_pods_are_spread_and_answer_on_their_ips(real, web):
    nodes = {real.get("v1", "Pod", name, NAMESPACE)["spec"]["nodeName"] for name in web.values()}
    assert len(nodes) == min(WEB_REPLICAS, len(require_kubelets())), nodes
    session = requests.Session()
    session.trust_env = False  # no proxy between this machine and its own pod network
    for ip, name in web.items():
        assert session.get(f"http://{ip}:{HTTP_PORT}/", timeout=10).text.strip() == name


def run_client(kube: Kube, name: str, script: str) -> str:
    """Runs `script` in a pod on a real node to its end; returns its log."""
    kube.apply(pod(NAMESPACE, name, [shell_container("client", script)], restartPolicy="Never"))
    finished = wait_finished(kube, NAMESPACE, name)
    log = pod_log(kube, NAMESPACE, name)
    assert finished["status"]["phase"] == "Succeeded", f"{pod_status(kube, NAMESPACE, name)}\n{log}"
    return log


def http_get(host: str, tries: int) -> str:
    """Shell: `tries` HTTP GETs of / on host:80 with busybox's nc (its wget crashes in a container), each bounded,
    each answer's body on a line of its own."""
    request = r"printf 'GET / HTTP/1.0\r\n\r\n'"
    return (f"for i in $(seq {tries}); do {request} | nc -w 5 {host} 80 | tail -n 1; done")


def test_a_cluster_ip_service_reaches_every_pod_from_a_pod(real, web):
    service = real.get("v1", "Service", "web", NAMESPACE)["spec"]["clusterIP"]
    # kube-proxy picks a backend at random for each connection: 30 tries miss one of two with odds 2^-29. It
    # programs a new backend a moment after the EndpointSlice lists it, so a client that found only one tries again
    # (each in a pod of its own); a backend the Service never reaches fails the test.
    answers: set[str] = set()
    for attempt in range(5):
        answers.update(run_client(real, f"client-ip-{attempt}", http_get(service, 30)).split())
        if answers == set(web.values()):
            break
    assert answers == set(web.values()), answers


def test_a_service_name_resolves_through_coredns_from_a_pod(real, web):
    service = real.get("v1", "Service", "web", NAMESPACE)["spec"]["clusterIP"]
    name = f"web.{NAMESPACE}.svc.cluster.local"
    log = run_client(real, "client-dns", f"nslookup {name} && echo ANSWERS && {http_get(name, 4)} "
                                         f"&& echo SEARCH && {http_get('web', 1)}")
    lookup, _, rest = log.partition("ANSWERS")
    by_name, _, by_short_name = rest.partition("SEARCH")
    assert re.search(rf"Name:\s*{re.escape(name)}\s*Address:\s*{re.escape(service)}\b", lookup), lookup
    assert set(by_name.split()) <= set(web.values()) and by_name.split(), log
    # The pod's search path (namespace first) makes the Service's short name resolve too.
    assert by_short_name.split() and set(by_short_name.split()) <= set(web.values()), log


def test_a_dynamically_linked_binary_runs_from_its_image_with_the_libraries_ldd_lists(real, tmp_path):
    # As the function's own image will be made: the binary, and each library it loads at the path it loads it from.
    files = images.with_libraries("/bin/echo", Path("/bin/echo"))
    assert any("libc.so" in dest for dest in files) and any("ld-linux" in dest for dest in files), files
    name = "modelplane.test/echo:local"
    images.load_image(images.build_image(name, files, entrypoint=["/bin/echo"], out=tmp_path / "echo.tar"))
    real.apply(pod(NAMESPACE, "echo", [{"name": "echo", "image": name, "imagePullPolicy": "Never",
                                        "args": ["linked", "and", "loaded"]}], restartPolicy="Never"))
    finished = wait_finished(real, NAMESPACE, "echo")
    assert finished["status"]["phase"] == "Succeeded", pod_status(real, NAMESPACE, "echo")
    assert pod_log(real, NAMESPACE, "echo").strip() == "linked and loaded"


# --- DRA: the driver's devices, claimed as we compose claims -------------------------------------------------

DRA_NAMESPACE = "real-dra"
DRIVER = "gpu.nvidia.com"
ENGINE_PORT = 8000
# Where the driver mounts a prepared claim's file in the container (its CDI spec) and the mock engine reads it.
CLAIM_MOUNT = "/var/run/modelplane-dra"


def composed_standalone(work: Path) -> tuple[dict, dict]:
    """The ResourceClaimTemplate and the pod template our function composes for examples/deployments/qwen3-small
    (one replica) on an Existing cluster whose pool is of the seed's class, eks-h200-8x."""
    deployment = copy.deepcopy(load_yaml_documents(EXAMPLES / "deployments" / "qwen3-small.yaml")[0])
    deployment["metadata"]["namespace"] = DRA_NAMESPACE
    deployment["spec"]["replicas"] = 1
    cluster = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
               "metadata": {"name": "real", "labels": {"region": "us-east-1"}},
               "spec": {"stack": "Standard",
                        "cluster": {"source": "Existing", "existing": {
                            "secretRef": {"name": "real-kubeconfig", "key": "kubeconfig"}}},
                        "nodePools": [{"name": "h200", "className": "eks-h200-8x", "nodeCount": 2}]}}
    (work / "md.yaml").write_text(yaml.safe_dump(deployment))
    (work / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    documents = installs.render(work / "md.yaml", work / "cluster.yaml", EXAMPLES / "classes", until_ready=True)
    manifests = [d["spec"]["forProvider"]["manifest"] for d in documents[1:] if d.get("kind") == "Object"]
    (claim_template,) = [m for m in manifests if m["kind"] == "ResourceClaimTemplate"]
    (engine,) = [m for m in manifests if m["kind"] == "Deployment" and m["metadata"]["name"].endswith("-qwen3")]
    return claim_template, engine["spec"]["template"]


def engine_pod(name: str, template: dict, claim_template: str, node: str | None = None) -> dict:
    """A pod of the composed template on a real node, running the mock engine in place of the user's image (the
    user's args kept), claiming through `claim_template`."""
    spec = copy.deepcopy(template["spec"])
    spec.pop("nodeSelector", None)  # the pool's label: real nodes carry the harness's
    for container in spec["containers"]:
        container.update(image=images.MOCK_ENGINE_IMAGE, imagePullPolicy="Never")
    for claim in spec["resourceClaims"]:
        claim["resourceClaimTemplateName"] = claim_template
    spec = on_real_node(spec)
    if node:
        spec["nodeSelector"]["kubernetes.io/hostname"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": DRA_NAMESPACE,
                                                           "labels": {"app": name}}, "spec": spec}


def claim_of(kube: Kube, pod_name: str) -> dict:
    live = kube.get("v1", "Pod", pod_name, DRA_NAMESPACE)
    (status,) = live["status"]["resourceClaimStatuses"]
    return kube.get(RESOURCE_API, "ResourceClaim", status["resourceClaimName"], DRA_NAMESPACE)


def node_claim_file(node: str, uid: str) -> Path:
    """Where the node's driver records a prepared claim (its --plugin-data-dir, under the kubelet's root)."""
    return Path(os.environ["CONTROLPLANE_STATE"]) / node / "root" / "plugins" / DRIVER / "claims" / f"{uid}.json"


def mock_info(pod_object: dict) -> dict:
    session = requests.Session()
    session.trust_env = False
    return session.get(f"http://{pod_object['status']['podIP']}:{ENGINE_PORT}/mock/info", timeout=10).json()


@pytest.fixture(scope="module")
def dra(real, tmp_path_factory) -> tuple[dict, dict]:
    """The drivers' DeviceClass and slices (controlplane.sh), the mock engine's image, and the composed claim
    template and pod template; the namespace goes at the end."""
    work = tmp_path_factory.mktemp("dra")
    images.load_test_image(images.MOCK_ENGINE_IMAGE, work)
    claim_template, template = composed_standalone(work)
    assert real.get(RESOURCE_API, "DeviceClass", DRIVER), "controlplane.sh installs the drivers' DeviceClass"
    slices = {s["spec"]["nodeName"]: s for s in real.list(RESOURCE_API, "ResourceSlice")
              if s["spec"]["driver"] == DRIVER}
    assert set(slices) == set(require_kubelets()), slices
    real.ensure_namespace(DRA_NAMESPACE)
    real.apply(claim_template)
    yield claim_template, template
    real.delete("v1", "Namespace", DRA_NAMESPACE)
    wait_for(f"namespace {DRA_NAMESPACE} gone", lambda: real.get("v1", "Namespace", DRA_NAMESPACE) is None,
             POD_SECONDS)


def test_a_composed_claim_is_allocated_prepared_seen_by_the_container_and_released(real, dra):
    claim_template, template = dra
    name = claim_template["metadata"]["name"]
    real.apply(engine_pod("engine", template, name))
    ready = wait_ready(real, DRA_NAMESPACE, "engine")
    node = ready["spec"]["nodeName"]

    # kube-scheduler allocated one device of the node's pool, as the composed request and its CEL selector ask.
    claim = claim_of(real, "engine")
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["request"]) == (DRIVER, node, "gpu"), result
    device, uid = result["device"], claim["metadata"]["uid"]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["engine"]
    # The kubelet had the node's driver prepare it.
    prepared = json.loads(node_claim_file(node, uid).read_text())
    assert [d["name"] for d in prepared["devices"]] == [device], prepared

    # The container got it through CDI: the driver's env, and the claim's file mounted where the engine reads it.
    info = mock_info(ready)
    assert info["env"].get("GPU_DEVICE_0") == device, info["env"]
    # (The driver names the variable by the claim's UID, dashes made underscores.)
    claim_variable = f"DRA_CLAIM_{uid.replace('-', '_')}"
    assert info["env"].get(claim_variable) == f"{DRA_NAMESPACE}/{claim['metadata']['name']}", info["env"]
    mounted = info["deviceFiles"][f"{CLAIM_MOUNT}/{uid}.json"]
    assert [d["name"] for d in mounted["devices"]] == [device], mounted
    # The composed readiness probe (/health) passed on the real engine: that is what made the pod Ready.
    assert info["ready"] is True

    # Deleting the pod unprepares the claim and releases the device.
    real.delete("v1", "Pod", "engine", DRA_NAMESPACE)
    wait_for("the engine pod gone", lambda: real.get("v1", "Pod", "engine", DRA_NAMESPACE) is None, POD_SECONDS)
    wait_for("the driver to unprepare the claim (its file gone)", lambda: not node_claim_file(node, uid).exists(),
             POD_SECONDS)
    wait_for("the pod's ResourceClaim deleted",
             lambda: real.get(RESOURCE_API, "ResourceClaim", claim["metadata"]["name"], DRA_NAMESPACE) is None,
             POD_SECONDS)

    # Every device of that node is free: a claim for all of them, pinned there, is allocated and prepared.
    everything = copy.deepcopy(claim_template)
    everything["metadata"]["name"] = "all-devices"
    devices_of_node = len(next(s for s in real.list(RESOURCE_API, "ResourceSlice")
                               if s["spec"]["nodeName"] == node)["spec"]["devices"])
    everything["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = devices_of_node
    real.apply(everything)
    real.apply(engine_pod("whole-node", template, "all-devices", node=node))
    whole = wait_ready(real, DRA_NAMESPACE, "whole-node")
    given = {v for k, v in mock_info(whole)["env"].items() if k.startswith("GPU_DEVICE_")}
    assert device in given and len(given) == devices_of_node, given
    real.delete("v1", "Pod", "whole-node", DRA_NAMESPACE)


def test_a_claim_no_device_satisfies_leaves_the_pod_pending_with_the_schedulers_reason(real, dra):
    claim_template, template = dra
    impossible = copy.deepcopy(claim_template)
    impossible["metadata"]["name"] = "no-such-gpu"
    request = impossible["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    request["selectors"] = [{"cel": {"expression":
                                     'device.attributes["gpu.nvidia.com"].productName == "NVIDIA B300"'}}]
    real.apply(impossible)
    real.apply(engine_pod("unsatisfied", template, "no-such-gpu"))

    def unschedulable():
        live = real.get("v1", "Pod", "unsatisfied", DRA_NAMESPACE) or {}
        for c in (live.get("status") or {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable":
                return c
        return None
    reason = wait_for("the scheduler to find the pod unschedulable", unschedulable, POD_SECONDS,
                      lambda: pod_status(real, DRA_NAMESPACE, "unsatisfied"))
    assert "claim" in reason["message"], reason
    live = real.get("v1", "Pod", "unsatisfied", DRA_NAMESPACE)
    assert live["status"]["phase"] == "Pending" and not live["spec"].get("nodeName"), live["status"]
    claim = claim_of(real, "unsatisfied")
    assert not (claim.get("status") or {}).get("allocation"), claim["status"]
    real.delete("v1", "Pod", "unsatisfied", DRA_NAMESPACE)
