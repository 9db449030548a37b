"""`render --until-ready` through the real binary: the seed's clusters reach their whole serving stack, the seed
ModelDeployment becomes each stack's gang on an example cluster simulated alongside it and is routed, the output
says it is a simulation, and a composite that never gets Ready exits non-zero saying what it waited for; and a
composite with a field its XRD does not declare is not rendered at all."""

from __future__ import annotations

import pytest
import yaml

from conftest import REPO_ROOT, render

CLUSTERS = REPO_ROOT / "examples" / "clusters"
CLASSES = REPO_ROOT / "examples" / "classes"
CACHES = REPO_ROOT / "examples" / "caches"
SEED = REPO_ROOT / "examples" / "deployments" / "qwen3-coder.yaml"
NOT_READY = 4  # --until-ready's exit status when the composite never got Ready


def until_ready(*args: str) -> list[dict]:
    done = render(*args, "--until-ready")
    assert done.returncode == 0, done.stderr + done.stdout[-2000:]
    assert done.stdout.startswith("# SIMULATION by `render --until-ready`"), done.stdout[:500]
    assert "# Outcome: Ready." in done.stdout
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def composed(docs: list[dict]) -> list[dict]:
    return [d for d in docs[1:] if d.get("kind") != "Result"]


def charts(docs: list[dict]) -> set[str]:
    return {d["spec"]["forProvider"]["chart"]["name"] for d in composed(docs) if d["kind"] == "Release"}


def remote_manifests(docs: list[dict]) -> list[dict]:
    return [d["spec"]["forProvider"]["manifest"] for d in composed(docs) if d["kind"] == "Object"]


def is_ready(composite: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in composite["status"]["conditions"])


def test_the_seed_dynamo_cluster_reaches_grove_kai_model_express_and_its_node_pools():
    docs = until_ready(str(CLUSTERS / "eks-h200-us-east.yaml"), "--required", str(CLASSES))
    assert is_ready(docs[0])
    assert {"grove-charts", "kai-scheduler"} <= charts(docs)
    assert any(m["kind"] == "Deployment" and m["metadata"]["name"] == "modelexpress-server"
               for m in remote_manifests(docs))
    pools = {d["metadata"]["name"] for d in composed(docs) if d["kind"] == "NodePool"}
    assert pools == {"eks-h200-us-east-gpu", "eks-h200-us-east-system"}
    assert all(c["ready"] for c in docs[0]["status"]["components"])
    assert docs[0]["status"]["gateway"]["address"].startswith("203.0.113.")


def test_the_standard_cluster_reaches_the_lws_controller_and_not_the_dynamo_stack():
    docs = until_ready(str(CLUSTERS / "eks-h200-us-east-standard.yaml"), "--required", str(CLASSES))
    found = charts(docs)
    assert "lws" in found
    assert not {"grove-charts", "kai-scheduler"} & found


@pytest.mark.parametrize("cluster, workload", [("eks-h200-us-east.yaml", "PodCliqueSet"),
                                               ("eks-h200-us-east-standard.yaml", "LeaderWorkerSet")])
def test_the_seed_gang_becomes_its_stacks_workload_on_an_example_cluster_and_is_routed(cluster, workload):
    docs = until_ready(str(SEED), "--required", str(CLUSTERS / cluster), "--required", str(CLASSES),
                       "--required", str(CACHES))
    assert is_ready(docs[0])
    kinds = [m["kind"] for m in remote_manifests(docs)]
    assert kinds.count(workload) == 1, kinds
    assert {"InferencePool", "HTTPRoute"} <= set(kinds)
    assert any(d["kind"] == "ModelEndpoint" for d in composed(docs))


def test_stages_prints_each_round_with_what_it_waited_for():
    done = render(str(CLUSTERS / "eks-h200-us-east.yaml"), "--required", str(CLASSES), "--stages")
    assert done.returncode == 0, done.stderr
    assert "# --- round 1: 3 new resource(s)" in done.stdout
    assert "# still waiting: StackReady: waiting for activation-policy" in done.stdout


def test_a_deployment_that_never_gets_ready_exits_non_zero_naming_what_it_waited_for():
    # No ModelCache is given, so the replica waits for one that no round can stage.
    done = render(str(SEED), "--required", str(CLUSTERS / "eks-h200-us-east.yaml"), "--required", str(CLASSES),
                  "--until-ready")
    assert done.returncode == NOT_READY, done.stderr
    assert 'ModelCache "qwen3-coder"' in done.stderr
    assert "settled without becoming Ready" in done.stdout


def test_plain_render_is_unchanged_by_the_simulation():
    done = render(str(CLUSTERS / "eks-h200-us-east.yaml"), "--required", str(CLASSES))
    assert done.returncode == 0, done.stderr
    assert not done.stdout.startswith("#")
    docs = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    assert [d["kind"] for d in composed(docs)] == ["ManagedResourceActivationPolicy", "ClusterProviderConfig",
                                                   "ClusterProviderConfig"]


def test_a_reader_that_stops_reading_ends_the_render_quietly():
    """`render ... | head` is how people look at a long output: the closed pipe is not a failure to report."""
    import subprocess

    from conftest import function_binary

    with subprocess.Popen([str(function_binary()), "render", str(CLUSTERS / "eks-h200-us-east.yaml"),
                           "--required", str(CLASSES), "--until-ready"],
                          cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        status = proc.wait(timeout=60)
    assert first.startswith(b"# SIMULATION")
    assert (status, stderr) == (0, "")


def test_a_field_the_xrd_does_not_declare_is_refused_naming_it(tmp_path):
    # A Secret reference into another namespace is not something a ModelEndpoint can say: the API server would
    # drop the field (kubectl apply refuses it), so render refuses it rather than render what would not run.
    endpoint = yaml.safe_load((REPO_ROOT / "examples" / "services" / "together-endpoint.yaml").read_text())
    endpoint["spec"]["credential"]["apiKey"]["secretRef"]["namespace"] = "other-team"
    endpoint["spec"]["replicsa"] = 2
    path = tmp_path / "endpoint.yaml"
    path.write_text(yaml.safe_dump(endpoint))
    done = render(str(path))
    assert done.returncode == 1, done.stdout
    assert "spec.credential.apiKey.secretRef.namespace" in done.stderr and "spec.replicsa" in done.stderr, done.stderr
    assert done.stdout == "", "nothing is rendered"
