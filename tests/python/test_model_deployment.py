"""The ModelDeployment examples rendered by the real binary, and every manifest they put on a workload cluster
checked as the API server there would check it (core kinds against kubernetes-validate's strict schemas, LWS and
Grove against their upstream CRDs, every Grove release we support)."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml

import manifests
from conftest import REPO_ROOT, function_binary

CLUSTERS = REPO_ROOT / "tests" / "fixtures" / "clusters"
SEED = REPO_ROOT / "examples" / "deployments" / "qwen3-coder.yaml"
SMALL = REPO_ROOT / "examples" / "deployments" / "qwen3-small.yaml"


def render(xr: Path, *cluster_dirs: Path) -> list[dict]:
    args = [str(function_binary()), "render", str(xr)]
    for directory in cluster_dirs:
        args += ["--required", str(directory)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"render failed ({done.returncode}): {done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def workload_manifests(rendered: list[dict]) -> list[dict]:
    """What the composed Objects write to the cluster: not those that only read (each workload's pod report)."""
    objects = [o for o in rendered if manifests.is_provider_kubernetes_object(o)
               and o["spec"].get("managementPolicies") != ["Observe"]]
    assert objects, "nothing was composed"
    return manifests.unwrap_all(objects)


def test_each_engine_workload_reads_its_pod_report_and_writes_nothing_there():
    rendered = render(SMALL, CLUSTERS / "standard")
    read = [o for o in rendered if manifests.is_provider_kubernetes_object(o)
            and o["spec"].get("managementPolicies") == ["Observe"]]
    [workload] = [m for m in workload_manifests(rendered) if m["kind"] == "Deployment"]
    assert [manifests.unwrap(o) for o in read] == [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": f"pods.{workload['metadata']['namespace']}.{workload['metadata']['name']}",
                      "namespace": "modelplane-system"}}]


def kinds(found: list[dict]) -> list[str]:
    return sorted(m["kind"] for m in found)


@pytest.mark.parametrize(
    ("stack", "gang"), [("standard", "LeaderWorkerSet"), ("dynamo", "PodCliqueSet")]
)
def test_the_seed_renders_valid_manifests_on_each_stack(stack, gang):
    found = workload_manifests(render(SEED, CLUSTERS / stack))
    assert kinds(found) == sorted(["Namespace", gang, "ResourceClaimTemplate", "ResourceClaimTemplate", "Service",
                                   "PodMonitor"])
    for manifest in found:
        manifests.assert_valid(manifest)


def test_a_wide_gang_with_many_copies_is_valid_on_every_grove_release(tmp_path):
    seed = yaml.safe_load(SEED.read_text())
    wide = copy.deepcopy(seed)
    wide["spec"]["template"]["spec"]["engines"][0]["copies"] = 3
    wide["spec"]["template"]["spec"]["engines"][0]["members"][1]["worker"]["nodes"] = 3
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    cache = None
    for stack in ("standard", "dynamo"):
        for source in (CLUSTERS / stack).glob("*.yaml"):
            obj = yaml.safe_load(source.read_text())
            if obj["kind"] == "ModelCache":
                # One cache, staged on both clusters.
                if cache is None:
                    cache = obj
                else:
                    cache["status"]["clusters"] += obj["status"]["clusters"]
                continue
            obj["status"]["pools"][0]["nodeCount"] = 12
            (clusters / source.name).write_text(yaml.safe_dump(obj))
    (clusters / "cache.yaml").write_text(yaml.safe_dump(cache))
    xr = tmp_path / "wide.yaml"
    wide["spec"]["replicas"] = 2
    xr.write_text(yaml.safe_dump(wide))
    found = workload_manifests(render(xr, clusters))
    gangs = [m for m in found if m["kind"] in ("LeaderWorkerSet", "PodCliqueSet")]
    assert sorted(g["kind"] for g in gangs) == ["LeaderWorkerSet", "PodCliqueSet"]
    for manifest in found:
        manifests.assert_valid(manifest)


def test_the_small_standalone_model_renders_deployments_on_both_stacks():
    found = workload_manifests(render(SMALL, CLUSTERS / "standard", CLUSTERS / "dynamo"))
    assert kinds(found).count("Deployment") == 2
    for manifest in found:
        manifests.assert_valid(manifest)


def test_a_misspelt_field_would_be_caught():
    # The check must be able to fail: a composed gang with a field its CRD lacks is refused.
    found = workload_manifests(render(SEED, CLUSTERS / "dynamo"))
    pcs = next(m for m in found if m["kind"] == "PodCliqueSet")
    pcs["spec"]["template"]["startupType"] = "CliqueStartupTypeExplicit"
    assert manifests.validate(pcs)


@pytest.mark.parametrize("stack", ["standard", "dynamo"])
@pytest.mark.parametrize("xr", [SEED, SMALL], ids=["seed", "small"])
def test_a_replica_on_a_cluster_with_a_gateway_gets_valid_routing_objects(tmp_path, stack, xr):
    """Pool, route and endpoint picker: core kinds against Kubernetes' strict schemas, the rest against every
    vendored release of their CRDs (tests/crds/routing)."""
    for source in (CLUSTERS / stack).glob("*.yaml"):
        obj = yaml.safe_load(source.read_text())
        if obj["kind"] == "InferenceCluster":
            obj["status"]["gateway"] = {"address": "203.0.113.7", "admits": "Nobody"}  # its client policy held
        (tmp_path / source.name).write_text(yaml.safe_dump(obj))
    rendered = render(xr, tmp_path)
    found = workload_manifests(rendered)
    routing = [m for m in found if m["kind"] in ("InferencePool", "HTTPRoute", "ServiceAccount", "Role",
                                                 "RoleBinding", "ConfigMap")]
    assert kinds(routing) == sorted(["InferencePool", "HTTPRoute", "ServiceAccount", "Role", "RoleBinding",
                                     "ConfigMap"])
    for manifest in found:
        manifests.assert_valid(manifest)


PREFILL_DECODE = REPO_ROOT / "examples" / "deployments" / "qwen3-235b-pd.yaml"


def _clusters_with_room(tmp_path: Path, stack: str, nodes: int) -> Path:
    """The `stack` fixture cluster with `nodes` nodes and a gateway address, so a replica is placed and routed."""
    out = tmp_path / "clusters"
    out.mkdir()
    for source in (CLUSTERS / stack).glob("*.yaml"):
        obj = yaml.safe_load(source.read_text())
        if obj["kind"] == "InferenceCluster":
            obj["status"]["pools"][0]["nodeCount"] = nodes
            obj["status"]["gateway"] = {"address": "203.0.113.7", "admits": "Nobody"}  # its client policy held
        (out / source.name).write_text(yaml.safe_dump(obj))
    return out


def _both_phases_as_gangs(tmp_path: Path) -> Path:
    xr = yaml.safe_load(PREFILL_DECODE.read_text())
    for engine in xr["spec"]["template"]["spec"]["engines"]:
        leader = copy.deepcopy(engine["members"][0])
        leader["role"] = "Leader"
        worker = copy.deepcopy(leader)
        worker["role"] = "Worker"
        worker["worker"] = {"nodes": 1}
        engine["members"] = [leader, worker]
    path = tmp_path / "pd-gangs.yaml"
    path.write_text(yaml.safe_dump(xr))
    return path


def _serving_pod(workload: dict) -> dict:
    spec = workload["spec"]
    if workload["kind"] == "Deployment":
        return spec["template"]
    if workload["kind"] == "LeaderWorkerSet":
        return spec["leaderWorkerTemplate"]["leaderTemplate"]
    leader = spec["template"]["cliques"][0]
    return {"metadata": {"labels": leader["labels"]}, "spec": leader["spec"]["podSpec"]}


@pytest.mark.parametrize(("stack", "gang"), [("standard", "LeaderWorkerSet"), ("dynamo", "PodCliqueSet")])
@pytest.mark.parametrize("gangs", [False, True], ids=["standalone", "gangs"])
def test_prefill_decode_renders_valid_manifests_with_the_sidecar_on_decode_on_each_stack(
        tmp_path, stack, gang, gangs):
    """Both phases (as Deployments, or as the stack's gangs) and their routing, every manifest valid: core kinds
    against Kubernetes' strict schemas, the rest against every vendored release of their CRDs."""
    xr = _both_phases_as_gangs(tmp_path) if gangs else PREFILL_DECODE
    found = workload_manifests(render(xr, _clusters_with_room(tmp_path, stack, 4)))
    workload_kind = gang if gangs else "Deployment"
    workloads = {m["metadata"]["name"].rsplit("-", 1)[-1]: m for m in found
                 if m["kind"] == workload_kind and m["metadata"]["name"].endswith(("-prefill", "-decode"))}
    assert sorted(workloads) == ["decode", "prefill"], [m["metadata"]["name"] for m in found]
    pool = next(m for m in found if m["kind"] == "InferencePool")
    for phase, workload in workloads.items():
        pod = _serving_pod(workload)
        labels = pod["metadata"]["labels"]
        assert labels["llm-d.ai/role"] == phase
        assert all(labels[k] == v for k, v in pool["spec"]["selector"]["matchLabels"].items())
        containers = [c["name"] for c in pod["spec"]["containers"]]
        assert containers == (["engine", "pd-sidecar"] if phase == "decode" else ["engine"])
    config = next(m for m in found if m["kind"] == "ConfigMap")["data"]["epp-config.yaml"]
    assert "prefix-based-pd-decider" in config
    for manifest in found:
        manifests.assert_valid(manifest)
