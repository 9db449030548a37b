"""Containers that really run (`controlplane.sh run --nodes --kubelets 2`): the kubelets start pods in containerd
from images built here (a static busybox, a dynamically linked binary with its libraries), run their probes, apply
their limits; pods answer on their own IPs, through a ClusterIP Service (kube-proxy) and by name (CoreDNS); a pod
whose image is absent never starts. Without real nodes every test fails, naming `--kubelets`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

import images
from kube import Kube, wait_for
from real_nodes import (POD_SECONDS, condition, events, load_shell_image, pod, pod_log, pod_status,
                        require_kubelets, shell_container, wait_finished, wait_ready)

NAMESPACE = "real-nodes"
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


def probe_failures(kube: Kube, name: str, probe: str) -> list[str]:
    return [e["message"] for e in events(kube, NAMESPACE, name)
            if e["reason"] == "Unhealthy" and e["message"].startswith(f"{probe} probe failed")]


def test_a_readiness_probe_gates_ready_and_a_failing_one_never_passes(real):
    # Two pods alike but for the file their readiness probe asks for: one writes it after a while, one never.
    real.apply(probed("late", f"mkdir -p /www; (sleep 4; echo ok >/www/ready) & {SERVE}"))
    real.apply(probed("never", f"mkdir -p /www; {SERVE}"))

    late = wait_ready(real, NAMESPACE, "late")
    assert late["status"]["podIP"].startswith("10.244."), late["status"]
    # The kubelet ran the HTTP probe against the container: it failed (404) until the file was there.
    failures = wait_for("the kubelet's failed readiness probes of `never`",
                        lambda: probe_failures(real, "never", "Readiness"), POD_SECONDS,
                        lambda: str(events(real, NAMESPACE, "never")))
    assert any("statuscode: 404" in f for f in failures), failures
    never = real.get("v1", "Pod", "never", NAMESPACE)
    assert never["status"]["phase"] == "Running", pod_status(real, NAMESPACE, "never")
    assert condition(never, "Ready") == "False", pod_status(real, NAMESPACE, "never")
    assert never["status"]["containerStatuses"][0]["started"] is True
    # Its liveness (TCP) probe passes: it is never restarted for being unready.
    assert never["status"]["containerStatuses"][0]["restartCount"] == 0
    assert not probe_failures(real, "never", "Liveness")


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
    assert probe_failures(real, "liveness", "Liveness"), events(real, NAMESPACE, "liveness")


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
    return wait_for("the Deployment's pods Ready", ready_pods, POD_SECONDS,
                    lambda: str([pod_status(real, NAMESPACE, p["metadata"]["name"])
                                 for p in real.list("v1", "Pod", NAMESPACE)]))


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
    # kube-proxy picks a backend at random for each connection: 30 tries miss one of two with odds 2^-29.
    answers = run_client(real, "client-ip", http_get(service, 30)).split()
    assert set(answers) == set(web.values()), answers


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
