"""Pods on simulated nodes: a ModelDeployment composed by Crossplane and our function runs on nodes kwok simulates,
placed by the real kube-scheduler with its DRA allocator evaluating our ResourceClaimTemplates against the
ResourceSlices the cluster's InferenceClasses describe (simulated_nodes.py); and a ModelCache stages there through
its hydration Job (which kwok completes) before the deployment waiting on it is composed; and an autoscaled
deployment grows onto another node and shrinks back with a fake engine's queue.

Stand-ins left: provider-helm's charts and trust-manager (as in test_crossplane.py), and Envoy Gateway, which would
give the cluster gateway its address: the test writes one, as it would. kwok marks a scheduled pod Running and Ready
without running its container, so readiness probes are not exercised.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator

import pytest
import requests

from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from simulated_nodes import POOL_LABEL, RESOURCE_API, apply_simulated, cluster_nodes, device_classes
from keda import keda_operator
from test_fleet_metrics import FakeEngine, fleet_pipeline, standby_scrape, standby_server
from workload import (API, OBJECT_API, RELEASE_API, composed_by, conditions, kubeconfig_pointing_back,
                      play_provider_helm, play_trust_manager, tolerating)

EXAMPLES = REPO_ROOT / "examples"
CONVERGE_SECONDS = 180
GATEWAY_API = "gateway.networking.k8s.io/v1"
# Where our cluster gateway lives on every workload cluster (function/src/workload/well_known.rs).
GATEWAY_NAMESPACE = "modelplane-system"
CLUSTER_NAME = "onprem-kwok"


@pytest.fixture(scope="module")
def nodes_running(platform, nodes) -> Kube:
    return platform


def play_envoy_gateway(kube: Kube) -> bool:
    """Gives the cluster gateway an address, as Envoy Gateway does once its load balancer is up."""
    gateways = kube.list(GATEWAY_API, "Gateway", GATEWAY_NAMESPACE)
    for gateway in gateways:
        if not (gateway.get("status") or {}).get("addresses"):
            kube.patch_status(gateway, {"addresses": [{"type": "IPAddress", "value": "127.0.0.1"}]})
    return bool(gateways)


def existing_cluster(kube: Kube, name: str = CLUSTER_NAME) -> dict:
    """The Existing example cluster under a name of its own, its kubeconfig pointing back at this API server."""
    cluster = copy.deepcopy(load_yaml_documents(EXAMPLES / "clusters" / "existing-onprem.yaml")[0])
    cluster["metadata"]["name"] = name
    cache_class = cluster["spec"]["cluster"]["existing"]["cache"]["storageClassName"]
    assert cache_class, "the example cluster names no cache storage class"
    secret_ref = cluster["spec"]["cluster"]["existing"]["secretRef"]
    secret_ref["name"] = f"{name}-kubeconfig"
    namespace = secret_ref.get("namespace", "modelplane-system")
    kube.ensure_namespace(namespace)
    kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_ref["name"], "namespace": namespace},
                "stringData": {secret_ref.get("key", "kubeconfig"): kubeconfig_pointing_back(kube)}})
    return cluster


def cache_volume(cluster: dict) -> dict:
    """A volume of the cluster's cache storage class, as that class's provisioner would make for a cache's claim
    (nothing provisions here). Nothing mounts it: kwok starts no container."""
    storage_class = cluster["spec"]["cluster"]["existing"]["cache"]["storageClassName"]
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{CLUSTER_NAME}-cache-0"},
            "spec": {"storageClassName": storage_class, "capacity": {"storage": "64Gi"},
                     "accessModes": ["ReadWriteMany"], "persistentVolumeReclaimPolicy": "Retain",
                     "nfs": {"server": "127.0.0.1", "path": "/modelcache"}}}


def standalone_deployment(cluster: dict) -> dict:
    """The small example model, one replica of two engine copies, tolerating the cluster's taints."""
    deployment = copy.deepcopy(load_yaml_documents(EXAMPLES / "deployments" / "qwen3-small.yaml")[0])
    deployment["spec"]["replicas"] = 1
    spec = deployment["spec"]["template"]["spec"]
    spec.pop("clusterSelector", None)
    spec["tolerations"] = tolerating(cluster)
    return deployment


def apply_until_serving(kube: Kube, cluster: dict) -> None:
    """Applies the InferenceCluster and waits until it is Ready with its gateway's address, playing provider-helm,
    trust-manager and Envoy Gateway, which cannot run here."""
    name = cluster["metadata"]["name"]
    kube.apply(cluster)

    def cluster_now() -> dict:
        return kube.get(API, "InferenceCluster", name) or {}

    wait_for("the InferenceCluster's helm Releases", lambda: composed_by(kube, RELEASE_API, "Release", name),
             CONVERGE_SECONDS, lambda: str(conditions(cluster_now())))
    play_trust_manager(kube)

    def serving() -> bool:
        play_provider_helm(kube, name)
        play_envoy_gateway(kube)
        status = cluster_now().get("status") or {}
        return conditions(cluster_now()).get("Ready") == "True" and bool((status.get("gateway") or {}).get("address"))

    wait_for("the InferenceCluster Ready with its gateway's address", serving, CONVERGE_SECONDS,
             lambda: str(cluster_now().get("status")))


@pytest.fixture(scope="module")
def kwok_cluster(nodes_running) -> Iterator[dict]:
    """The Existing example cluster, Ready on its simulated nodes with its gateway's address; deleted, with its
    nodes, after the module's tests."""
    kube = nodes_running
    classes = load_yaml_documents(EXAMPLES / "classes")
    cluster = existing_cluster(kube)
    simulated = device_classes(classes) + cluster_nodes(cluster, classes) + [cache_volume(cluster)]
    for obj in classes:
        kube.apply(obj)
    apply_simulated(kube, simulated)
    apply_until_serving(kube, cluster)
    yield cluster

    def cluster_now() -> dict:
        return kube.get(API, "InferenceCluster", CLUSTER_NAME) or {}

    kube.delete(API, "InferenceCluster", CLUSTER_NAME)
    wait_for("the InferenceCluster removed", lambda: not cluster_now(), CONVERGE_SECONDS)
    for obj in simulated:
        meta = obj["metadata"]
        kube.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))


def engine_pods(kube: Kube, namespace: str, deployment: str, replica: int = 0) -> list[dict]:
    return [p for p in kube.list("v1", "Pod", namespace) if (p["metadata"].get("labels") or {}).get(
        "modelplane.ai/workload", "").startswith(f"{deployment}-{replica}-")]


def running_and_ready(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and conditions(pod).get("Ready") == "True"


def all_engines_running(kube: Kube, namespace: str, deployment: str, copies: int,
                        replica: int = 0) -> list[dict] | None:
    """The replica's engine pods once there are `copies` of them and each is Running and Ready."""
    pods = engine_pods(kube, namespace, deployment, replica)
    return pods if len(pods) == copies and all(map(running_and_ready, pods)) else None


def test_a_standalone_deployment_runs_on_scheduled_nodes_with_its_devices_and_frees_them(nodes_running, kwok_cluster):
    kube, cluster = nodes_running, kwok_cluster
    deployment = standalone_deployment(cluster)
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    kube.ensure_namespace(namespace)
    kube.apply(deployment)
    kube.apply({"apiVersion": API, "kind": "ModelService", "metadata": {"name": name, "namespace": namespace},
                "spec": {"endpoints": [{"name": "ours", "priority": 0,
                                        "selector": {"matchLabels": {"modelplane.ai/deployment": name}}}]}})

    def deployment_now() -> dict:
        return kube.get(API, "ModelDeployment", name, namespace) or {}

    def engines() -> list[dict]:
        return engine_pods(kube, namespace, name)

    copies = deployment["spec"]["template"]["spec"]["engines"][0]["copies"]
    pods = wait_for(f"{copies} engine pods Running and Ready",
                    lambda: all_engines_running(kube, namespace, name, copies), CONVERGE_SECONDS,
                    lambda: str([(p["metadata"]["name"], p.get("status")) for p in engines()]))

    # The scheduler put each pod on a node of the cluster's GPU pool and allocated it one device there.
    gpu_nodes = {n["metadata"]["name"] for n in kube.list("v1", "Node")
                 if n["metadata"]["labels"].get(POOL_LABEL) == "gpu" and n["metadata"]["name"].startswith(CLUSTER_NAME)}
    claims = {c["metadata"]["name"]: c for c in kube.list(RESOURCE_API, "ResourceClaim", namespace)}
    for pod in pods:
        assert pod["spec"]["nodeName"] in gpu_nodes, (pod["metadata"]["name"], pod["spec"]["nodeName"])
        (claim_status,) = pod["status"]["resourceClaimStatuses"]
        allocated = claims[claim_status["resourceClaimName"]]["status"]["allocation"]["devices"]["results"]
        assert [(r["driver"], r["pool"]) for r in allocated] == [("gpu.nvidia.com", pod["spec"]["nodeName"])], allocated

    ready = wait_for("the ModelDeployment Ready", lambda: conditions(deployment_now()).get("Ready") == "True"
                     and deployment_now(), CONVERGE_SECONDS, lambda: str(deployment_now().get("status")))
    assert ready["status"]["readyReplicas"] == 1, ready["status"]

    endpoints = wait_for("the replica's ModelEndpoint", lambda: [
        e for e in kube.list(API, "ModelEndpoint", namespace)
        if (e["metadata"].get("labels") or {}).get("modelplane.ai/deployment") == name], CONVERGE_SECONDS)
    assert [e["metadata"]["labels"]["modelplane.ai/cluster"] for e in endpoints] == [CLUSTER_NAME], endpoints

    def service_endpoints() -> dict:
        service = kube.get(API, "ModelService", name, namespace) or {}
        return (service.get("status") or {}).get("endpoints") or {}

    listed = wait_for("the ModelService to list the endpoint", lambda: service_endpoints().get("total") and
                      service_endpoints(), CONVERGE_SECONDS, lambda: str(service_endpoints()))
    assert listed["total"] == 1, listed

    # Deleting the deployment takes its pods, and with them their claims: the devices are free again.
    kube.delete(API, "ModelService", name, namespace)
    kube.delete(API, "ModelDeployment", name, namespace)
    wait_for("the engine pods gone", lambda: not engines(), CONVERGE_SECONDS,
             lambda: str([p["metadata"]["name"] for p in engines()]))
    wait_for("the ResourceClaims released", lambda: not kube.list(RESOURCE_API, "ResourceClaim", namespace),
             CONVERGE_SECONDS, lambda: str([c["metadata"]["name"] for c in kube.list(RESOURCE_API, "ResourceClaim",
                                                                                     namespace)]))



def test_a_model_cache_stages_through_its_job_before_the_deployment_waiting_on_it_is_composed(nodes_running,
                                                                                              kwok_cluster):
    kube, cluster = nodes_running, kwok_cluster
    deployment = standalone_deployment(cluster)
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    deployment["spec"]["template"]["spec"]["modelCacheRef"] = {"name": name}
    cache = {"apiVersion": API, "kind": "ModelCache", "metadata": {"name": name, "namespace": namespace},
             "spec": {"source": "HuggingFace", "huggingFace": {"repo": "Qwen/Qwen3-0.6B", "revision": "main",
                                                                "sizeGiB": 2}}}
    kube.ensure_namespace(namespace)
    kube.apply(cache)
    kube.apply(deployment)

    def cache_now() -> dict:
        return kube.get(API, "ModelCache", name, namespace) or {}

    jobs_seen: dict[str, str] = {}

    def staged() -> bool:
        # The deployment's engines wait for the cache: none may run before it is staged on their cluster.
        for job in kube.list("batch/v1", "Job", namespace):
            done = [c["type"] for c in (job.get("status") or {}).get("conditions") or [] if c["status"] == "True"]
            jobs_seen[job["metadata"]["name"]] = ",".join(done) or "running"
        # Ready alone is not enough: until the deployment's replica is placed the cache targets no cluster and is
        # vacuously Ready, so wait for this cluster's own phase.
        phases = [(c["cluster"], c["phase"]) for c in (cache_now().get("status") or {}).get("clusters") or []]
        ready = conditions(cache_now()).get("Ready") == "True" and phases == [(CLUSTER_NAME, "Ready")]
        assert ready or not engine_pods(kube, namespace, name), "engines run before their cache is staged"
        return ready

    wait_for("the ModelCache staged on the cluster", staged, CONVERGE_SECONDS,
             lambda: f"{(cache_now().get('status') or {})}, jobs: {jobs_seen}")
    # The hydration Job ran on a simulated node and completed (kwok completes a Job's pods; the Job controller is
    # kube-controller-manager's own), and its volume is bound to the cluster's cache class.
    assert "Complete" in ",".join(jobs_seen.values()), jobs_seen
    (claim,) = [c for c in kube.list("v1", "PersistentVolumeClaim", namespace)
                if (c["metadata"].get("labels") or {}).get("modelplane.ai/model-cache") == name]
    assert claim["status"]["phase"] == "Bound", claim["status"]

    copies = deployment["spec"]["template"]["spec"]["engines"][0]["copies"]
    pods = wait_for(f"{copies} engine pods Running and Ready on the staged cache",
                    lambda: all_engines_running(kube, namespace, name, copies), CONVERGE_SECONDS,
                    lambda: str((kube.get(API, "ModelDeployment", name, namespace) or {}).get("status")))
    for pod in pods:
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["spec"].get("volumes") or []
                  if "persistentVolumeClaim" in v}
        assert claims == {claim["metadata"]["name"]}, (pod["metadata"]["name"], claims)

    kube.delete(API, "ModelDeployment", name, namespace)
    kube.delete(API, "ModelCache", name, namespace)
    wait_for("the engine pods gone", lambda: not engine_pods(kube, namespace, name), CONVERGE_SECONDS)
    wait_for("the ModelCache removed", lambda: not cache_now(), CONVERGE_SECONDS)


def test_a_deployment_no_pool_can_run_is_never_ready_and_says_which_selector_no_device_meets(nodes_running,
                                                                                           kwok_cluster):
    kube, cluster = nodes_running, kwok_cluster
    deployment = standalone_deployment(cluster)
    # A name of its own: the other tests' deployment may still be going.
    deployment["metadata"]["name"] = "qwen3-nowhere"
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    (request,) = deployment["spec"]["template"]["spec"]["engines"][0]["members"][0]["nodeSelector"]["devices"]
    request["selectors"] = [{"cel": 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA B300"'}]
    kube.ensure_namespace(namespace)
    kube.apply(deployment)

    def deployment_now() -> dict:
        return kube.get(API, "ModelDeployment", name, namespace) or {}

    def refused() -> dict | None:
        status = deployment_now().get("status") or {}
        return status if conditions(deployment_now()).get("Scheduled") == "False" and status.get("replicas") else None

    status = wait_for("the ModelDeployment refused by our scheduler", refused, CONVERGE_SECONDS,
                      lambda: str(deployment_now().get("status")))
    assert conditions(deployment_now())["Ready"] == "False", status
    (replica,) = status["replicas"]
    assert replica["reason"] == "NoMatchingCluster", replica
    why = [r for r in replica["rejections"] if r["cluster"] == CLUSTER_NAME]
    assert [r.get("pool") for r in why] == ["gpu"], replica
    assert "fails selectors[0]" in why[0]["reason"] and '"gpu"' in why[0]["reason"], why
    # Nothing was composed for the replica, so nothing waits Pending on the cluster.
    assert not engine_pods(kube, namespace, name)
    assert not [o for o in composed_by(kube, OBJECT_API, "Object", name)
                if o["spec"]["forProvider"]["manifest"]["kind"] == "Deployment"]

    kube.delete(API, "ModelDeployment", name, namespace)
    wait_for("the ModelDeployment removed", lambda: not deployment_now(), CONVERGE_SECONDS)


def keda_replicas(scaled: dict, fleet) -> int | None:
    """The replicas KEDA's HPA would set from the ScaledObject's trigger, asked of the fleet store: an
    AverageValue metric, so ceil(fleet total / threshold) within min and max; None while the query answers
    nothing (the ScaledObject refuses null answers, and then holds the replicas where they are)."""
    trigger = scaled["spec"]["triggers"][0]["metadata"]
    answer = fleet.query(trigger["query"])
    if not answer:
        return None
    wanted = math.ceil(float(answer[0]["value"][1]) / float(trigger["threshold"]))
    return max(scaled["spec"]["minReplicaCount"], min(scaled["spec"]["maxReplicaCount"], wanted))


def test_an_engines_queue_scales_the_deployment_onto_more_nodes_and_back(nodes_running, kwok_cluster, tmp_path):
    """Load on a fake vLLM engine, standing in for replica 0's pod, reaches the fleet store as the composed
    PodMonitor and rules say; KEDA's arithmetic on the composed ScaledObject's query sets the scale subresource;
    Crossplane and our function place a second replica, kube-scheduler puts its pod on a simulated GPU node with
    its device, and when the queue drains the replica goes and its device is free again.

    Stand-ins: KEDA's operator and its HPA (the test does their arithmetic, without the HPA's scale-down window),
    prometheus-operator (as in test_fleet_metrics.py), and the engine itself (kwok runs no container)."""
    kube, cluster = nodes_running, kwok_cluster
    deployment = copy.deepcopy(load_yaml_documents(EXAMPLES / "deployments" / "qwen3-small-autoscaled.yaml")[0])
    deployment["spec"]["autoscaling"]["maxReplicas"] = 2
    deployment["spec"]["template"]["spec"]["tolerations"] = tolerating(cluster)
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    kube.ensure_namespace(namespace)
    kube.apply(deployment)
    scale_path = kube.path(API, "ModelDeployment", namespace, name) + "/scale"

    def deployment_now() -> dict:
        return kube.get(API, "ModelDeployment", name, namespace) or {}

    def ready_replicas() -> int:
        return (deployment_now().get("status") or {}).get("readyReplicas", 0)

    (first,) = wait_for("replica 0's engine Running and Ready",
                        lambda: all_engines_running(kube, namespace, name, 1), CONVERGE_SECONDS,
                        lambda: str(deployment_now().get("status")))
    scaled = wait_for("the composed ScaledObject", lambda: kube.get("keda.sh/v1alpha1", "ScaledObject", name,
                                                                    namespace), CONVERGE_SECONDS)
    [monitor] = [o["spec"]["forProvider"]["manifest"] for o in composed_by(kube, OBJECT_API, "Object", name)
                 if o["spec"]["forProvider"]["manifest"]["kind"] == "PodMonitor"]

    with fleet_pipeline(tmp_path, monitor, first["metadata"]["name"]) as (fleet, in_cluster):
        # Six queued requests at four per replica: KEDA wants two.
        FakeEngine.waiting = 6
        wanted = wait_for("the queue in the fleet store", lambda: keda_replicas(scaled, fleet) == 2 and 2, 90,
                          lambda: str(in_cluster.query("modelplane_requests_waiting")))
        kube.request("PATCH", scale_path, body={"spec": {"replicas": wanted}},
                     content_type="application/merge-patch+json")
        (second,) = wait_for("replica 1's engine Running and Ready", lambda: all_engines_running(
            kube, namespace, name, 1, replica=1), CONVERGE_SECONDS, lambda: str(deployment_now().get("status")))
        wait_for("two ready replicas", lambda: ready_replicas() == 2, CONVERGE_SECONDS,
                 lambda: str(deployment_now().get("status")))
        gpu_nodes = {n["metadata"]["name"] for n in kube.list("v1", "Node")
                     if n["metadata"]["labels"].get(POOL_LABEL) == "gpu"}
        assert second["spec"]["nodeName"] in gpu_nodes, second["spec"]["nodeName"]
        claims_with_two = {c["metadata"]["name"] for c in kube.list(RESOURCE_API, "ResourceClaim", namespace)}
        assert len(claims_with_two) == 2, claims_with_two

        # The queue drains: KEDA goes back to its minimum, one.
        FakeEngine.waiting = 0
        wanted = wait_for("the drained queue in the fleet store", lambda: keda_replicas(scaled, fleet) == 1 and 1,
                          90, lambda: str(fleet.query("modelplane_requests_waiting")))
        kube.request("PATCH", scale_path, body={"spec": {"replicas": wanted}},
                     content_type="application/merge-patch+json")
        wait_for("replica 1's engine gone", lambda: not engine_pods(kube, namespace, name, 1), CONVERGE_SECONDS,
                 lambda: str(deployment_now().get("status")))
        wait_for("its device released", lambda: len(kube.list(RESOURCE_API, "ResourceClaim", namespace)) == 1,
                 CONVERGE_SECONDS)
        assert all_engines_running(kube, namespace, name, 1), "replica 0 kept serving through the scale-down"
        wait_for("one ready replica", lambda: ready_replicas() == 1 and len(deployment_now()["status"]["replicas"]) == 1,
                 CONVERGE_SECONDS, lambda: str(deployment_now().get("status")))

    kube.delete(API, "ModelDeployment", name, namespace)
    wait_for("the engine pods gone", lambda: not engine_pods(kube, namespace, name), CONVERGE_SECONDS)



def test_keda_takes_an_idle_deployment_to_zero_and_the_first_request_brings_it_back(nodes_running, kwok_cluster,
                                                                                     tmp_path):
    """`minReplicas: 0`, with KEDA's real operator reading the composed ScaledObject: an idle replica, as the fleet
    store reports it, leaves the wake-up trigger inactive, and KEDA takes the deployment to zero; its pod goes and
    its device is freed, while its standby ModelEndpoint stays routable. A caller's request, sent where that
    endpoint points, is held by the standby server with 503 and Retry-After; the demand it records reaches the
    fleet store, the trigger turns active, and KEDA scales the deployment back to one, whose replica is placed
    again on a simulated GPU node.

    Stand-ins: the fleet gateway (the test sends the request to the standby server under the endpoint's prefix,
    as Envoy would), prometheus-operator and the engine, as in the test above. Before any of it, a fleet store
    that does not answer keeps the replica where it is."""
    kube, cluster = nodes_running, kwok_cluster
    deployment = copy.deepcopy(load_yaml_documents(EXAMPLES / "deployments" / "qwen3-small-to-zero.yaml")[0])
    deployment["spec"]["replicas"] = 1
    # KEDA's cooldown before the last replica goes, and the HPA's window, short for the test.
    deployment["spec"]["autoscaling"]["scaleDownDelay"] = "5s"
    deployment["spec"]["template"]["spec"]["tolerations"] = tolerating(cluster)
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    kube.ensure_namespace(namespace)
    kube.apply(deployment)

    def deployment_now() -> dict:
        return kube.get(API, "ModelDeployment", name, namespace) or {}

    (first,) = wait_for("replica 0's engine Running and Ready",
                        lambda: all_engines_running(kube, namespace, name, 1), CONVERGE_SECONDS,
                        lambda: str(deployment_now().get("status")))
    [monitor] = [o["spec"]["forProvider"]["manifest"] for o in composed_by(kube, OBJECT_API, "Object", name)
                 if o["spec"]["forProvider"]["manifest"]["kind"] == "PodMonitor"]

    def standby_endpoint() -> dict | None:
        found = kube.get(API, "ModelEndpoint", f"{name}-standby", namespace)
        ready = [c for c in ((found or {}).get("status") or {}).get("conditions", []) if c["type"] == "Ready"]
        return found if ready and ready[0]["status"] == "True" else None

    standby = wait_for("the standby ModelEndpoint Ready", standby_endpoint, CONVERGE_SECONDS)
    with standby_server() as (url, standby_monitor), keda_operator(tmp_path) as keda_log:
        scrape = standby_scrape(url, standby_monitor)
        # An outage first: the ScaledObject names the default store, which does not answer here. Through two of
        # KEDA's polls that fail, the idle-looking deployment keeps its replica.
        failed_polls = lambda: keda_log.read_text().count('"error getting scale decision"')  # noqa: E731
        wait_for("two failed polls of the fleet store", lambda: failed_polls() >= 2, 120,
                 lambda: keda_log.read_text()[-3000:])
        assert deployment_now()["spec"]["replicas"] == 1, "a metrics outage never scales a deployment down"
        with fleet_pipeline(tmp_path, monitor, first["metadata"]["name"], more_scrapes=(scrape,)) as (fleet, _):
            # Nothing running or queued, nothing held: once KEDA reads this fleet store, it takes the deployment
            # to zero.
            FakeEngine.waiting, FakeEngine.running = 0, 0
            deployment["spec"]["autoscaling"]["metricsServer"] = fleet.url
            kube.apply(deployment)
            wait_for("KEDA scaling the idle deployment to zero", lambda: deployment_now()["spec"]["replicas"] == 0,
                     CONVERGE_SECONDS, lambda: keda_log.read_text()[-3000:])
            wait_for("the engine gone", lambda: not engine_pods(kube, namespace, name), CONVERGE_SECONDS,
                     lambda: str(deployment_now().get("status")))
            wait_for("its device released", lambda: not kube.list(RESOURCE_API, "ResourceClaim", namespace),
                     CONVERGE_SECONDS)
            assert standby_endpoint(), "the standby endpoint stays while the deployment is at zero"

            # A caller's request, where the gateway sends it while the deployment has no replica.
            held = requests.post(f"{url}{standby['spec']['api']['prefix']}/chat/completions", timeout=5,
                                 json={"model": "ml-team/qwen3-small", "messages": []})
            assert (held.status_code, held.headers.get("Retry-After")) == (503, "30"), held.text
            wait_for("KEDA waking the deployment on the held request", lambda: deployment_now()["spec"]["replicas"] == 1,
                     CONVERGE_SECONDS, lambda: keda_log.read_text()[-3000:])
            wait_for("replica 0's engine Running and Ready again",
                     lambda: all_engines_running(kube, namespace, name, 1), CONVERGE_SECONDS,
                     lambda: str(deployment_now().get("status")))

    kube.delete(API, "ModelDeployment", name, namespace)
    wait_for("the engine pods gone", lambda: not engine_pods(kube, namespace, name), CONVERGE_SECONDS)
