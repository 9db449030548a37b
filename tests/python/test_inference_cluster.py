"""InferenceCluster through the real binary: every example renders, and every manifest it would apply on a
workload cluster is one the API server (and, for KAI / ModelExpress kinds, the upstream CRDs) would accept."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import manifests
from conftest import render, render_documents as render_once

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = REPO / "examples" / "clusters"
CLASSES = REPO / "examples" / "classes"
# The clouds' provider configs, which a provisioned cluster requires before it composes anything.
INSTALL = REPO / "examples" / "install"
EXAMPLES = sorted(CLUSTERS.glob("*.yaml"))
# An EKS cluster is composed in stages; with its Cluster observed Ready, one render reaches the serving stack.
OBSERVED = REPO / "tests" / "fixtures" / "observed"


def render_documents(xr: Path, *required: Path) -> list[dict]:
    observed = OBSERVED / xr.name
    return render_once(xr, *required, observed=observed if observed.is_file() else None)


def composed(docs: list[dict]) -> list[dict]:
    return [d for d in docs[1:] if d.get("kind") != "Result"]


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_wrapped_manifest_is_accepted_by_its_schema(example):
    objects = composed(render_documents(example, CLASSES, INSTALL))
    wrapped = [manifests.unwrap(o) for o in objects if manifests.is_provider_kubernetes_object(o)]
    for manifest in wrapped:
        manifests.assert_valid(manifest)


def test_dynamo_example_installs_grove_kai_queues_and_one_model_express_server():
    docs = render_documents(CLUSTERS / "eks-h200-us-east.yaml", CLASSES)
    objects = composed(docs)
    charts = {o["spec"]["forProvider"]["chart"]["name"] for o in objects if o["kind"] == "Release"}
    assert {"grove-charts", "kai-scheduler"} <= charts and "lws" not in charts
    wrapped = [manifests.unwrap(o) for o in objects if manifests.is_provider_kubernetes_object(o)]
    kinds = sorted(m["kind"] for m in wrapped)
    # ModelExpress's server and the pod reporter every cluster runs.
    deployments = sorted(m["metadata"]["name"] for m in wrapped if m["kind"] == "Deployment")
    assert deployments == ["modelexpress-server", "modelplane-pod-reporter"] and kinds.count("Queue") == 2, kinds
    # ModelExpress's two, and the two of the inference extension every cluster gets for its replicas' pools.
    assert kinds.count("CustomResourceDefinition") == 4, kinds
    status = docs[0]["status"]
    assert status["stack"] == "Dynamo" and status["kaiQueue"] == "modelplane"
    assert status["modelExpressAddress"].endswith(":8001")
    assert status["pools"] == [], "no pool is schedulable before its NodePool is observed ready"


def test_standard_twin_differs_only_in_its_stack_components():
    dynamo = render_documents(CLUSTERS / "eks-h200-us-east.yaml", CLASSES)[0]["status"]["components"]
    standard = render_documents(CLUSTERS / "eks-h200-us-east-standard.yaml", CLASSES)[0]["status"]["components"]
    # The twin's EFA pool adds the EFA DRA driver, a common row that only EFA pools need.
    common = {c["name"] for c in dynamo} & {c["name"] for c in standard}
    assert {c["name"] for c in standard} - common == {"lws", "aws-dranet"}
    assert {c["name"] for c in dynamo} - common == {"grove", "kai-scheduler", "kai-queues", "modelexpress-server"}
    versions = {c["name"]: c["version"] for c in dynamo + standard}
    assert all(versions.values()), versions


def test_existing_cluster_composes_no_provider_eks_objects_and_no_activation_policy():
    objects = composed(render_documents(CLUSTERS / "existing-onprem.yaml", CLASSES))
    assert not [o for o in objects if o["apiVersion"].startswith("eks.m.modelplane.ai")]
    assert not [o for o in objects if o["kind"] == "ManagedResourceActivationPolicy"]
    configs = [o for o in objects if o["kind"] == "ClusterProviderConfig"]
    assert {c["spec"]["credentials"]["secretRef"]["name"] for c in configs} == {"onprem-h200-kubeconfig"}


def test_namespaced_composed_resources_say_their_namespace():
    """A cluster-scoped composite must place namespaced resources itself: Crossplane will not."""
    objects = composed(render_documents(CLUSTERS / "eks-h200-us-east.yaml", CLASSES))
    cluster_scoped = {"ClusterProviderConfig", "ManagedResourceActivationPolicy"}
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        assert (namespace is None) == (obj["kind"] in cluster_scoped), manifests.describe(obj)


def test_model_express_crds_declare_what_the_upstream_crds_do():
    upstream_path = manifests.crd_dir() / "modelexpress-crds.yaml"
    upstream = {d["metadata"]["name"]: d for d in yaml.safe_load_all(upstream_path.read_text()) if d}
    objects = composed(render_documents(CLUSTERS / "eks-h200-us-east.yaml", CLASSES))
    ours = {m["metadata"]["name"]: m for m in (manifests.unwrap(o) for o in objects
                                                if manifests.is_provider_kubernetes_object(o))
            if m["kind"] == "CustomResourceDefinition" and m["spec"]["group"].endswith("modelexpress.nvidia.com")}
    assert ours.keys() == upstream.keys()
    for name, crd in ours.items():
        theirs = upstream[name]["spec"]
        assert (crd["spec"]["group"], crd["spec"]["scope"]) == (theirs["group"], theirs["scope"])
        assert crd["spec"]["names"]["kind"] == theirs["names"]["kind"]
        assert [v["name"] for v in crd["spec"]["versions"]] == [v["name"] for v in theirs["versions"]]
        ours_spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        theirs_spec = theirs["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert ours_spec["required"] == theirs_spec["required"]


def test_a_pool_naming_a_missing_class_is_fatal_and_names_the_field(tmp_path):
    xr = yaml.safe_load((CLUSTERS / "eks-h200-us-east.yaml").read_text())
    xr["spec"]["nodePools"][0]["className"] = "no-such-class"
    path = tmp_path / "xr.yaml"
    path.write_text(yaml.safe_dump(xr))
    result = render(str(path), "--required", str(CLASSES))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "spec.nodePools[0].className" in result.stdout + result.stderr
    assert "no-such-class" in result.stdout + result.stderr
