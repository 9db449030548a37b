"""From an engine's /metrics to the query that scales its deployment and to the deployment's status, through two
real Prometheus servers.

A fake vLLM engine (an HTTP server here) exposes vLLM's metric names, its counters and histogram growing with every
scrape. A "cluster" Prometheus scrapes it with what the composed PodMonitor says (the labels it stamps, the metrics
it keeps), loads the composed PrometheusRule, and remote-writes with what the composed kube-prometheus-stack values
say to a "fleet" Prometheus receiving remote write. The ScaledObject's own query, sent to the fleet Prometheus, must
answer the engine's queue depth, no raw engine series may have left the cluster, and the function sampling the
fleet Prometheus must write the deployment's figures and its `Serving` condition against `spec.slo`. A fleet
Prometheus that asks for basic auth gets the series only with the credentials the cluster's composed copy brings.

The one stand-in is prometheus-operator: this test turns the PodMonitor and the chart values into Prometheus'
configuration the way the operator documents it (camelCase fields to snake_case, the pod's namespace and name as
target labels). No API server is needed.
"""

from __future__ import annotations

import contextlib
import copy
import http.server
import os
import signal
import subprocess
import threading
from pathlib import Path

import bcrypt
import installs
import requests
import yaml
from kube import REPO_ROOT, load_yaml_documents, wait_for
from ports import free_port
from test_engine_metrics import composed_rules

BIN = REPO_ROOT / "tests" / "controlplane" / ".bin"
DEPLOYMENT = REPO_ROOT / "examples" / "deployments" / "qwen3-small-autoscaled.yaml"
STANDARD = REPO_ROOT / "tests" / "fixtures" / "clusters" / "standard"
KEDA = REPO_ROOT / "tests" / "crds" / "keda" / "v2.20.2" / "keda.sh_scaledobjects.yaml"
CLUSTER = REPO_ROOT / "examples" / "clusters" / "eks-h200-us-east.yaml"
CLASSES = REPO_ROOT / "examples" / "classes"
# Rules run every 15 s and remote write flushes within 5 s: the fleet has the series well within this.
ARRIVAL_SECONDS = 90

ENGINE_GAUGES = """\
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="qwen3-small",engine="0"}} {waiting}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="qwen3-small",engine="0"}} {running}
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{model_name="qwen3-small",engine="0"}} 0.5
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{{generation="0"}} 1234
"""


def engine_metrics(scrapes: int, waiting: int, running: int = 2) -> str:
    """What the engine reports at its `scrapes`-th scrape: the gauges above with `waiting` requests queued and
    `running` running, 50
    generated tokens and 10 requests' first tokens more each time, every first token between 1 and 2.5 seconds
    (so the p95 is 2.425 s)."""
    requests = 10 * scrapes
    buckets = "".join(f'vllm:time_to_first_token_seconds_bucket{{model_name="qwen3-small",engine="0",le="{le}"}} '
                      f"{0 if le in ('0.5', '1.0') else requests}\n" for le in ("0.5", "1.0", "2.5", "+Inf"))
    return (ENGINE_GAUGES.format(waiting=waiting, running=running)
            + "# TYPE vllm:generation_tokens_total counter\n"
            + f'vllm:generation_tokens_total{{model_name="qwen3-small",engine="0"}} {50 * scrapes}\n'
            + "# TYPE vllm:time_to_first_token_seconds histogram\n" + buckets
            + f'vllm:time_to_first_token_seconds_count{{model_name="qwen3-small",engine="0"}} {requests}\n'
            + f'vllm:time_to_first_token_seconds_sum{{model_name="qwen3-small",engine="0"}} {2 * requests}\n')


class FakeEngine(http.server.BaseHTTPRequestHandler):
    scrapes = 0
    # The queue it reports, and the requests it runs; a test sets them to put load on the deployment.
    waiting = 6
    running = 2

    def do_GET(self):  # noqa: N802 (the http.server API)
        if self.path == "/metrics":
            FakeEngine.scrapes += 1
        body = engine_metrics(FakeEngine.scrapes, FakeEngine.waiting, FakeEngine.running).encode() if self.path == "/metrics" else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


def snake(fields: dict) -> dict:
    """A relabel config as Prometheus spells it (the operator's translation of the CRD's camelCase)."""
    names = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    return {names.get(k, k): v for k, v in fields.items()}


def composed(xr: Path, *required: Path, until_ready: bool = False) -> list[dict]:
    return [d for d in installs.render(xr, *required, until_ready=until_ready)[1:] if d.get("kind") != "Result"]


def manifest_of(documents: list[dict], kind: str) -> dict:
    [found] = [d["spec"]["forProvider"]["manifest"] for d in documents
               if d.get("kind") == "Object" and d["spec"]["forProvider"]["manifest"]["kind"] == kind]
    return found


class Prometheus:
    def __init__(self, root: Path, name: str, config: dict, *flags: str, auth: tuple[str, str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.auth = auth
        data = root / name
        data.mkdir()
        if auth:
            # Prometheus' own web configuration: every endpoint, remote write included, asks for these.
            hashed = bcrypt.hashpw(auth[1].encode(), bcrypt.gensalt(rounds=4)).decode()
            (data / "web.yml").write_text(yaml.safe_dump({"basic_auth_users": {auth[0]: hashed}}))
            flags = (*flags, f"--web.config.file={data / 'web.yml'}")
        (data / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = (data / "log").open("w")
        self.process = subprocess.Popen(
            [str(BIN / "prometheus"), f"--config.file={data / 'prometheus.yml'}", f"--storage.tsdb.path={data / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", *flags],
            cwd=data, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(f"{name} Prometheus ready", lambda: self.ready(), 60, lambda: (data / "log").read_text()[-2000:])

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"Prometheus exited with {self.process.returncode}")
        try:
            return requests.get(f"{self.url}/-/ready", auth=self.auth, timeout=2).ok
        except requests.RequestException:
            return False

    def query(self, promql: str) -> list[dict]:
        answer = requests.get(f"{self.url}/api/v1/query", params={"query": promql}, auth=self.auth, timeout=5).json()
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        self.log.close()


def autoscaled_composition() -> tuple[dict, dict]:
    """The autoscaled example's PodMonitor and ScaledObject trigger, as rendered on the Standard test cluster."""
    deployment = composed(DEPLOYMENT, STANDARD, KEDA)
    [scaled] = [d for d in deployment if d.get("kind") == "ScaledObject"]
    return manifest_of(deployment, "PodMonitor"), scaled["spec"]["triggers"][0]["metadata"]


def remote_write_config(write: dict, copied: dict[str, dict[str, str]]) -> dict:
    """The operator's translation of one `remoteWrite` entry; `copied` holds the Secrets beside the Prometheus by
    name, as provider-kubernetes copied them there."""
    config = {"url": write["url"], "write_relabel_configs": [snake(r) for r in write["writeRelabelConfigs"]]}
    if "basicAuth" in write:
        config["basic_auth"] = {field: copied[ref["name"]][ref["key"]] for field, ref in write["basicAuth"].items()}
    return config


@contextlib.contextmanager
def fleet_pipeline(tmp_path: Path, monitor: dict, pod: str, writer: tuple[str, str] | None = None,
                   more_scrapes: tuple[dict, ...] = ()):
    """The fake engine as serving pod `pod`, scraped as the composed PodMonitor `monitor` says by a cluster
    Prometheus configured from what Modelplane composes for the example cluster, remote-writing to a fleet
    Prometheus. With `writer` (user, password), the fleet asks for them, and the cluster names a control-plane
    Secret holding them. `more_scrapes` are further scrape configs of the cluster's. Yields (fleet, cluster)."""
    assert (BIN / "prometheus").is_file(), "no prometheus binary: run `bash tests/controlplane/controlplane.sh build`"
    FakeEngine.waiting, FakeEngine.running = 6, 2
    servers: list[Prometheus] = []
    engine = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeEngine)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    try:
        fleet = Prometheus(tmp_path, "fleet", {"global": {"scrape_interval": "15s"}},
                           "--web.enable-remote-write-receiver", auth=writer)
        servers.append(fleet)

        cluster_doc = copy.deepcopy(load_yaml_documents(CLUSTER)[0])
        cluster_doc["spec"]["metrics"] = {"remoteWrite": {"url": f"{fleet.url}/api/v1/write"}}
        if writer:
            cluster_doc["spec"]["metrics"]["remoteWrite"]["basicAuth"] = {"secretRef": {"name": "fleet-writer"}}
        cluster_file = tmp_path / "cluster.yaml"
        cluster_file.write_text(yaml.safe_dump(cluster_doc))
        cluster = composed(cluster_file, CLASSES, until_ready=True)
        # The control-plane Secret's keys, as the composed copy's references bring them to the cluster.
        copied = {copy_of_secret(cluster): {"username": writer[0], "password": writer[1]}} if writer else {}
        [release] = [d for d in cluster if d.get("kind") == "Release"
                     and d["spec"]["forProvider"]["chart"]["name"] == "kube-prometheus-stack"]
        remote_write = release["spec"]["forProvider"]["values"]["prometheus"]["prometheusSpec"]["remoteWrite"]
        (tmp_path / "rules.yaml").write_text(yaml.safe_dump(composed_rules()))

        endpoint = monitor["spec"]["podMetricsEndpoints"][0]
        namespace = monitor["metadata"]["namespace"]
        scrape = {
            "job_name": "engines",
            "scrape_interval": "1s",
            "metrics_path": endpoint["path"],
            # What the operator's pod discovery would give: the pod's address, namespace and name.
            "static_configs": [{"targets": [f"127.0.0.1:{engine.server_address[1]}"],
                                "labels": {"namespace": namespace, "pod": pod}}],
            "relabel_configs": [snake(r) for r in endpoint["relabelings"]],
            "metric_relabel_configs": [snake(r) for r in endpoint["metricRelabelings"]],
        }
        in_cluster = Prometheus(tmp_path, "cluster", {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp_path / "rules.yaml")],
            "scrape_configs": [scrape, *more_scrapes],
            "remote_write": [remote_write_config(w, copied) for w in remote_write],
        })
        servers.append(in_cluster)
        yield fleet, in_cluster
    finally:
        engine.shutdown()
        # The cluster first: stopped after the fleet, it would spend its shutdown retrying remote write.
        for server in reversed(servers):
            server.stop()


def test_an_engines_queue_reaches_the_fleet_store_as_the_scaled_objects_query_reads_it(tmp_path):
    monitor, trigger = autoscaled_composition()
    with fleet_pipeline(tmp_path, monitor, "qwen3-small-autoscaled-0-engine") as (fleet, in_cluster):
        arrived = wait_for("the deployment's queue depth in the fleet store", lambda: fleet.query(trigger["query"]),
                           ARRIVAL_SECONDS, lambda: str(in_cluster.query("modelplane_requests_waiting")))
        assert [float(r["value"][1]) for r in arrived] == [6.0], arrived
        # KEDA's arithmetic on that answer: ceil(6 / 4) = 2 replicas.
        assert trigger["threshold"] == "4"
        # Only the recorded vocabulary left the cluster, labelled with where it came from.
        assert fleet.query('{__name__=~"vllm:.+"}') == []
        [waiting] = fleet.query("modelplane_requests_waiting")
        labels = waiting["metric"]
        assert (labels["cluster"], labels["deployment"], labels["replica"]) == ("eks-h200-us-west", "qwen3-small-autoscaled",
                                                                                 "0"), labels
        # What the scrape does not keep never reaches even the cluster's store.
        assert in_cluster.query("python_gc_objects_collected_total") == []
        assert [float(r["value"][1]) for r in fleet.query("modelplane_kv_cache_utilization")] == [0.5]


def copy_of_secret(documents: list[dict]) -> str:
    """The name of the Secret the cluster's credentials are copied into, read from the composed copy's references:
    only a copy that brings both keys from the named control-plane Secret counts."""
    [copy_object] = [d for d in documents if d.get("kind") == "Object" and d["spec"].get("references")
                     and d["spec"]["forProvider"]["manifest"]["kind"] == "Secret"]
    sources = {(r["patchesFrom"]["namespace"], r["patchesFrom"]["name"], r["toFieldPath"])
               for r in copy_object["spec"]["references"]}
    assert sources == {("modelplane-system", "fleet-writer", "data.username"),
                       ("modelplane-system", "fleet-writer", "data.password")}, sources
    return copy_object["spec"]["forProvider"]["manifest"]["metadata"]["name"]


def test_a_receiver_asking_for_credentials_gets_them_from_the_clusters_copy(tmp_path):
    monitor, trigger = autoscaled_composition()
    writer = ("use1-writer", "never-in-an-object")
    with fleet_pipeline(tmp_path, monitor, "qwen3-small-autoscaled-0-engine", writer) as (fleet, in_cluster):
        assert requests.get(f"{fleet.url}/api/v1/query", params={"query": "up"}, timeout=5).status_code == 401
        arrived = wait_for("the deployment's queue depth in the fleet store", lambda: fleet.query(trigger["query"]),
                           ARRIVAL_SECONDS, lambda: str(in_cluster.query("modelplane_requests_waiting")))
        assert [float(r["value"][1]) for r in arrived] == [6.0], arrived


def test_the_function_writes_the_fleets_figures_and_names_the_replica_that_misses_its_slo(tmp_path):
    monitor, _ = autoscaled_composition()
    with fleet_pipeline(tmp_path, monitor, "qwen3-small-autoscaled-0-engine") as (fleet, in_cluster):
        p95 = 'histogram_quantile(0.95, sum by (le) (modelplane_time_to_first_token_seconds_bucket:rate1m))'
        wait_for("a first-token p95 and a token rate in the fleet store",
                 lambda: fleet.query(p95) and fleet.query("modelplane_generation_tokens:rate1m"),
                 ARRIVAL_SECONDS, lambda: str(in_cluster.query("modelplane_time_to_first_token_seconds_bucket:rate1m")))
        rendered = installs.render(DEPLOYMENT, STANDARD, KEDA, until_ready=True,
                                   flags=("--fleet-metrics-url", fleet.url))
    status = rendered[0]["status"]
    serving = status["serving"]
    # The fleet's own figures, as the fake engine reports them: 6 waiting, 2 running, half the KV cache, every
    # first token between 1 and 2.5 s.
    assert (serving["requestsWaiting"], serving["requestsRunning"], serving["kvCacheUtilization"]) == (6, 2, 0.5)
    assert serving["timeToFirstTokenP95Seconds"] == 2.425, serving
    assert serving["generationTokensPerSecond"] > 0, serving
    assert serving["sampledAt"].endswith("Z"), serving
    [replica] = status["replicas"]
    assert replica["serving"]["requestsWaiting"] == 6, replica
    [condition] = [c for c in status["conditions"] if c["type"] == "Serving"]
    # The example asks for a first token within 2 s at p95.
    assert (condition["status"], condition["reason"]) == ("False", "SloMissed"), condition
    assert condition["message"] == ("replica 0 on eks-h200-us-west: time to first token p95 2.425s is over "
                                    "spec.slo.timeToFirstToken 2s"), condition


def test_without_an_answer_from_the_fleet_store_the_condition_is_unknown_and_no_figure_is_shown(tmp_path):
    port = free_port()  # nothing listens there
    rendered = installs.render(DEPLOYMENT, STANDARD, KEDA, until_ready=True,
                               flags=("--fleet-metrics-url", f"http://127.0.0.1:{port}"))
    status = rendered[0]["status"]
    assert "serving" not in status
    [condition] = [c for c in status["conditions"] if c["type"] == "Serving"]
    assert (condition["status"], condition["reason"]) == ("Unknown", "MetricsUnavailable"), condition
    assert f"no sample from http://127.0.0.1:{port} yet" in condition["message"], condition


FLEET_GATEWAY = REPO_ROOT / "examples" / "services" / "fleet-gateway.yaml"
FLEET = REPO_ROOT / "tests" / "fixtures" / "services" / "fleet.yaml"


def scaled_to_zero_composition(tmp_path: Path) -> tuple[dict, dict, dict]:
    """The autoscaled example with `minReplicas: 0`: its engine PodMonitor, its wake-up trigger, and its standby
    ModelEndpoint."""
    doc = copy.deepcopy(load_yaml_documents(DEPLOYMENT)[0])
    doc["spec"]["autoscaling"]["minReplicas"] = 0
    xr = tmp_path / "to-zero.yaml"
    xr.write_text(yaml.safe_dump(doc))
    deployment = composed(xr, STANDARD, KEDA)
    [scaled] = [d for d in deployment if d.get("kind") == "ScaledObject"]
    [in_use] = [t for t in scaled["spec"]["triggers"] if t.get("name") == "in-use"]
    [standby] = [d for d in deployment if d.get("kind") == "ModelEndpoint" and "modelplane.ai/standby" in
                 d["metadata"].get("labels", {})]
    return manifest_of(deployment, "PodMonitor"), in_use["metadata"], standby


@contextlib.contextmanager
def standby_server():
    """The standby server as the fleet gateway's composed Deployment runs it, listening on a free local port.
    Yields (its base URL, the composed PodMonitor that scrapes it)."""
    gateway = composed(FLEET_GATEWAY, FLEET)
    [container] = manifest_of(gateway, "Deployment")["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[:2] == ["standby", "--address"], args
    port = free_port()
    process = subprocess.Popen([str(installs.function_binary()), *args[:2], f"127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return requests.get(f"{url}/healthz", timeout=2).ok
        except requests.RequestException:
            return False

    try:
        wait_for("the standby server", up, 30)
        yield url, manifest_of(gateway, "PodMonitor")
    finally:
        process.terminate()
        process.wait(timeout=10)


def standby_scrape(url: str, monitor: dict) -> dict:
    """The cluster Prometheus' scrape of the standby server at `url`, as its composed PodMonitor `monitor` says.
    The operator's discovery labels the target with the server's own pod; honorLabels keeps the deployment's
    namespace the server reports."""
    endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    return {
        "job_name": "standby",
        "scrape_interval": "1s",
        "metrics_path": endpoint["path"],
        "honor_labels": endpoint["honorLabels"],
        "static_configs": [{"targets": [url.removeprefix("http://")],
                            "labels": {"namespace": "modelplane-system", "pod": "modelplane-standby-0"}}],
        "metric_relabel_configs": [snake(r) for r in endpoint["metricRelabelings"]],
    }


def test_a_request_for_a_deployment_at_zero_is_held_and_wakes_it(tmp_path):
    monitor, in_use, standby = scaled_to_zero_composition(tmp_path)
    prefix = standby["spec"]["api"]["prefix"]
    with standby_server() as (url, standby_monitor):
        scrape = standby_scrape(url, standby_monitor)
        with fleet_pipeline(tmp_path, monitor, "qwen3-small-autoscaled-0-engine",
                            more_scrapes=(scrape,)) as (fleet, in_cluster):
            # A replica serving nothing: idle (0), which KEDA takes to zero after the cooldown.
            FakeEngine.waiting, FakeEngine.running = 0, 0
            values = lambda: [float(r["value"][1]) for r in fleet.query(in_use["query"])]  # noqa: E731
            wait_for("an idle deployment in the fleet store", lambda: values() == [0.0], ARRIVAL_SECONDS,
                     lambda: str(fleet.query("modelplane_requests_running")))

            # What the fleet gateway sends a caller's request to while the deployment has no replica.
            held = requests.post(f"{url}{prefix}/chat/completions", timeout=5,
                                 json={"model": "ml-team/qwen3-small", "messages": [{"role": "user", "content": "hi"}]})
            assert held.status_code == 503, held.text
            assert held.headers["Retry-After"] == "30"
            error = held.json()["error"]
            assert error["type"] == "model_starting", error
            assert "ml-team/qwen3-small-autoscaled" in error["message"], error
            # A path naming no deployment is no demand.
            assert requests.get(f"{url}/not a deployment/v1/models", timeout=5).status_code == 404

            # The demand reaches the fleet store: in use (1), which KEDA takes as active and scales from zero.
            wait_for("the held request as demand in the fleet store", lambda: values() == [1.0], ARRIVAL_SECONDS,
                     lambda: str(fleet.query('{__name__=~"modelplane_standby_.+"}')))
            [demand] = fleet.query("modelplane_standby_requests_total")
            assert (demand["metric"]["namespace"], demand["metric"]["deployment"]) == (
                "ml-team", "qwen3-small-autoscaled"), demand
            # Busy replicas still ask for one at most: the target trigger sizes the deployment.
            FakeEngine.waiting, FakeEngine.running = 9, 5
            wait_for("a busy deployment", lambda: fleet.query("sum(modelplane_requests_running)")
                     and float(fleet.query("sum(modelplane_requests_running)")[0]["value"][1]) == 5.0,
                     ARRIVAL_SECONDS)
            assert values() == [1.0]
