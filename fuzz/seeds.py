"""Writes the fuzz seed corpora from the examples (run by the repository's venv python, with
MODELPLANE_FUNCTION_BIN pointing at a built modelplane-function):

- run_function_json: every example composite as JSON;
- run_function_proto: the request Crossplane sends on a step's second call, requirements answered from the examples;
- cel_selector: the DRA selectors the examples and tests use;
- struct_pointer: the example objects and an observed Object as Struct bytes, each after a pointer into it.
"""

import json
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
import conftest  # noqa: E402
import pipeline  # noqa: E402
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
root = conftest.REPO_ROOT
files = sorted((root / "examples").glob("*/*.yaml")) + sorted((root / "tests/fixtures/clusters").glob("*/*.yaml"))
pool = [d for f in files if "provider-eks" not in str(f) for d in yaml.safe_load_all(f.read_text()) if isinstance(d, dict)]
out = root / "fuzz/seeds"
for t in ("run_function_json", "run_function_proto", "cel_selector", "struct_pointer"):
    (out / t).mkdir(parents=True, exist_ok=True)
server = conftest.start_server(Path(tempfile.mkdtemp()), "--insecure")
with server.channel() as ch:
    stub = grpcv1.FunctionRunnerServiceStub(ch)
    for i, composite in enumerate(pool):
        (out / "run_function_json" / f"example-{i}.json").write_text(json.dumps(composite, separators=(",", ":")))
        req = pipeline.request(composite)
        rsp = stub.RunFunction(req, timeout=30)
        for name, sel in rsp.requirements.resources.items():
            entry = req.required_resources[name]
            for obj in pool:
                if obj.get("kind") == sel.kind:
                    entry.items.add().resource.CopyFrom(resource.dict_to_struct(obj))
        (out / "run_function_proto" / f"example-{i}.pb").write_bytes(req.SerializeToString())
server.stop()
selectors = [
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("120Gi")) >= 0',
    'device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))',
    'device.attributes["gpu.nvidia.com"].productName.lowerAscii().contains("h200")',
    'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].all(k, k.size() < 64)',
    '["a", "b"].exists(x, x == device.driver) || size(device.attributes) > 0',
]
for i, s in enumerate(selectors):
    (out / "cel_selector" / f"selector-{i}.cel").write_text(s)
observed = {
    "apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object", "metadata": {"name": "gateway"},
    "spec": {"forProvider": {"manifest": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gw"}}}},
    "status": {
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "True"}],
        "atProvider": {"manifest": {"status": {"loadBalancer": {"ingress": [{"hostname": "gw.example.com"}]}}}},
    },
}
pointers = [
    "/status/atProvider/manifest/status/loadBalancer/ingress/0/hostname", "/status/conditions/1/type",
    "/spec/forProvider/manifest/metadata/name", "/metadata/name", "/spec", "", "/a~1b/~0c", "/status/conditions/01",
]
for i, obj in enumerate([observed] + pool[:7]):
    body = resource.dict_to_struct(obj).SerializeToString(deterministic=True)
    pointer = pointers[i % len(pointers)]
    (out / "struct_pointer" / f"object-{i}.bin").write_bytes(pointer.encode() + b"\n" + body)
print(len(pool), "composites")
