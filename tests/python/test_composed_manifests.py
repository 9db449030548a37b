"""What the function composes must be what a Kubernetes API server accepts, checked on the real server's output."""

import yaml
from crossplane.function import resource

import conftest
import manifests
import pipeline

EXAMPLE_CACHE = yaml.safe_load((conftest.REPO_ROOT / "examples" / "caches" / "qwen3-coder.yaml").read_text())
CLUSTER = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceCluster",
    "metadata": {"name": "use1-a", "labels": {"topology.modelplane.ai/region": "us-east-1"}},
    "spec": {},
    "status": {"stack": "Standard", "providerConfigName": "use1-a", "cacheStorageClass": "efs-sc"},
}


def composed(step: pipeline.Step) -> dict[str, dict]:
    return {key: resource.struct_to_dict(r.resource) for key, r in step.response.desired.resources.items()}


def test_every_manifest_composed_for_the_example_model_cache_is_valid(v1):
    step = pipeline.run_step(v1, pipeline.request(EXAMPLE_CACHE), objects=[CLUSTER])
    assert step.fatal == []
    objects = composed(step)
    assert objects, "the example cache matches CLUSTER, so something must be staged there"
    errors = {key: manifests.validate(manifest)
              for key, manifest in zip(objects, manifests.unwrap_all(objects.values()))}
    assert errors == {key: [] for key in objects}
