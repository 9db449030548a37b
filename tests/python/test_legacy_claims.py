"""Crossplane 1.x style composites, sent through the real server with Crossplane's own stubs.

The legacy Configuration (`modelplane-package build` → configuration-legacy) turns each namespaced kind into a
claim backed by a cluster-scoped `X<Kind>` composite. Crossplane then sends the function that composite: legacy
fields (`claimRef`, `compositionRef`, `resourceRefs`, ...) directly under `spec`, no namespace, and the claim's
name and namespace as labels.
"""

import copy

from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

import conftest
import pipeline
import yaml

CLASS = yaml.safe_load((conftest.REPO_ROOT / "examples" / "classes" / "eks-h200-8x.yaml").read_text())
CACHE = yaml.safe_load((conftest.REPO_ROOT / "examples" / "caches" / "qwen3-coder.yaml").read_text())
CLAIM_LABELS = {"crossplane.io/claim-name": "qwen3-coder", "crossplane.io/claim-namespace": "ml-team"}


def legacy(claim: dict, kind: str, name: str) -> dict:
    """The composite Crossplane 1.x creates for `claim`."""
    xr = copy.deepcopy(claim)
    namespace = xr["metadata"].pop("namespace", None)
    xr["kind"] = kind
    xr["metadata"]["name"] = name
    if namespace:
        xr["metadata"]["labels"] = {"crossplane.io/claim-name": claim["metadata"]["name"],
                                    "crossplane.io/claim-namespace": namespace}
    xr["spec"] |= {
        "claimRef": {"apiVersion": claim["apiVersion"], "kind": claim["kind"], "name": claim["metadata"]["name"],
                     **({"namespace": namespace} if namespace else {})},
        "compositionRef": {"name": f"{claim['kind'].lower()}s.modelplane.ai"},
        "compositionRevisionRef": {"name": f"{claim['kind'].lower()}s.modelplane.ai-8c2d1f0"},
        "compositionUpdatePolicy": "Automatic",
        "resourceRefs": [],
    }
    return xr


def fatal(rsp) -> list[str]:
    return [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]


def test_a_legacy_inference_class_composes_like_the_v2_one(v1):
    modern = v1.RunFunction(pipeline.request(CLASS, tag="t"), timeout=30)
    old = v1.RunFunction(pipeline.request(legacy(CLASS, "InferenceClass", CLASS["metadata"]["name"]), tag="t"),
                         timeout=30)
    assert fatal(old) == []
    status = resource.struct_to_dict(old.desired.composite.resource)["status"]
    assert status == resource.struct_to_dict(modern.desired.composite.resource)["status"]
    assert [(c.type, c.status) for c in old.conditions] == [("Valid", fnv1.STATUS_CONDITION_TRUE)]


def test_a_claim_backed_model_cache_settles_its_requirements_in_the_claims_namespace(v1):
    xr = legacy(CACHE, "XModelCache", "qwen3-coder-x7k2p")
    cluster = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
               "metadata": {"name": "eks-h200-us-east", "labels": {"topology.modelplane.ai/region": "us-east-1"}},
               "status": {"providerConfigName": "eks-h200-us-east", "cacheStorageClass": "modelplane-rwx-efs",
                          "stack": "Dynamo"}}
    step = pipeline.run_step(v1, pipeline.request(xr, tag="claim"), [cluster])
    assert step.fatal == []
    deployments = [s for s in step.response.requirements.resources.values() if s.kind == "ModelDeployment"]
    assert [s.namespace for s in deployments] == ["ml-team"]
    composed = {k: resource.struct_to_dict(r.resource) for k, r in step.response.desired.resources.items()}
    assert composed, "the selected cluster should get a volume and a hydration Job"
    for key, obj in composed.items():
        assert obj["metadata"]["namespace"] == "ml-team", key
        manifest = obj["spec"]["forProvider"]["manifest"]
        if manifest["kind"] == "Namespace":
            assert manifest["metadata"]["name"] == "ml-team", key
            continue
        assert manifest["metadata"]["namespace"] == "ml-team", key
        # Named after the claim, which is what ModelDeployments reference, not the generated composite name.
        assert "x7k2p" not in str(manifest), key


def test_an_x_kind_that_nothing_serves_is_a_fatal_result_naming_it(v1):
    rsp = v1.RunFunction(pipeline.request(legacy(CLASS, "XInferenceWidget", "w")), timeout=30)
    assert len(fatal(rsp)) == 1 and '"XInferenceWidget"' in fatal(rsp)[0]
