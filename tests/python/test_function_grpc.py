"""Black-box conformance of the function server, called with the stubs Crossplane publishes.

Every test talks to the real `modelplane-function serve` process over loopback gRPC.
"""

import json
import subprocess

import grpc
import pytest
import yaml
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1beta1 import run_function_pb2 as fnv1beta1

import conftest
import pipeline
import wire
from conftest import EXAMPLE_CLASS, EXAMPLE_CLASS_FILE

V1_PATH = "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction"
V1BETA1_PATH = "/apiextensions.fn.proto.v1beta1.FunctionRunnerService/RunFunction"


def fatal_messages(rsp) -> list[str]:
    return [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]


def condition(rsp, type_: str):
    found = [c for c in rsp.conditions if c.type == type_]
    assert len(found) == 1, f"expected one {type_} condition, got {list(rsp.conditions)}"
    return found[0]


def raw_call(channel: grpc.Channel, path: str, request: bytes) -> bytes:
    """A unary call that sends and returns exact bytes (no protobuf (de)serialisation on the client)."""
    return channel.unary_unary(path)(request, timeout=30)


def test_v1_composes_the_example_class_with_a_valid_condition(v1):
    rsp = v1.RunFunction(pipeline.request(EXAMPLE_CLASS, tag="example"), timeout=30)
    assert fatal_messages(rsp) == []
    valid = condition(rsp, "Valid")
    assert (valid.status, valid.reason) == (fnv1.STATUS_CONDITION_TRUE, "ValidClass")
    status = resource.struct_to_dict(rsp.desired.composite.resource)["status"]
    assert status["devices"] == [{"name": "gpu", "count": 8, "claim": "DRA"}]
    assert rsp.desired.composite.ready == fnv1.READY_TRUE


def test_v1beta1_answers_exactly_what_v1_answers(v1, v1beta1):
    req = pipeline.request(EXAMPLE_CLASS, tag="same")
    rsp_v1 = v1.RunFunction(req, timeout=30)
    rsp_beta = v1beta1.RunFunction(fnv1beta1.RunFunctionRequest.FromString(req.SerializeToString()), timeout=30)
    assert isinstance(rsp_beta, fnv1beta1.RunFunctionResponse)
    assert rsp_beta.SerializeToString(deterministic=True) == rsp_v1.SerializeToString(deterministic=True)
    assert condition(rsp_beta, "Valid").status == fnv1beta1.STATUS_CONDITION_TRUE


def test_the_tag_is_echoed_and_a_60s_ttl_is_set(v1):
    rsp = v1.RunFunction(pipeline.request(EXAMPLE_CLASS, tag="4f1c0ffee"), timeout=30)
    assert rsp.meta.tag == "4f1c0ffee"
    assert rsp.meta.HasField("ttl") and rsp.meta.ttl.ToSeconds() == 60


def test_a_fatal_response_still_echoes_the_tag(v1):
    rsp = v1.RunFunction(pipeline.request({"apiVersion": "v1", "kind": "ConfigMap"}, tag="t-fatal"), timeout=30)
    assert fatal_messages(rsp) and rsp.meta.tag == "t-fatal"


# Composed by "earlier pipeline steps": awkward values on purpose (doubles, big integers, unicode, nulls, empty
# containers), connection details with non-UTF-8 bytes, and every readiness value.
EARLIER_STEPS = {
    "bucket": ({"apiVersion": "s3.aws.m.upbound.io/v1beta1", "kind": "Bucket",
                "metadata": {"annotations": {"note": "naïve ✓ — 東京"}},
                "spec": {"forProvider": {"region": "us-east-1", "tags": {}, "objectLockEnabled": False}}},
               {"endpoint": b"https://bucket.example", "key": b"\x00\xff\xfe secret"}, fnv1.READY_TRUE),
    "network": ({"apiVersion": "ec2.aws.m.upbound.io/v1beta1", "kind": "VPC",
                 "spec": {"forProvider": {"cidrBlock": "10.0.0.0/16", "ratio": 0.1, "big": 2.0**53, "huge": 1e300,
                                          "negative": -0.0, "empty": [], "nothing": None,
                                          "nested": [[1, "two", {"three": [3.5]}], []]}}},
                {}, fnv1.READY_FALSE),
    "dns": ({"apiVersion": "route53.aws.m.upbound.io/v1beta1", "kind": "Record", "spec": {}}, {},
            fnv1.READY_UNSPECIFIED),
}
EARLIER_COMPOSITE_STATUS = {"status": {"earlierStep": {"phase": "Provisioned", "attempts": 3}}}
CONTEXT = {"apiextensions.crossplane.io/environment": {"region": "us-east-1", "zones": ["a", "b"]},
           "example.org/flag": True}


def resource_bytes(obj: dict, details: dict[str, bytes], ready: int) -> bytes:
    out = wire.field(1, wire.LEN, wire.struct_bytes(obj))
    for key, value in sorted(details.items()):
        out += wire.field(2, wire.LEN, wire.field(1, wire.LEN, key.encode()) + wire.field(2, wire.LEN, value))
    return out + (wire.field(3, wire.VARINT, ready) if ready else b"")


def request_with_earlier_steps(composite: dict, tag: str = "earlier") -> bytes:
    """A request as a later pipeline step receives it, desired state and context encoded by hand."""
    base = pipeline.request(composite, tag=tag)
    base.ClearField("desired")
    base.ClearField("context")
    state = wire.field(1, wire.LEN, resource_bytes(EARLIER_COMPOSITE_STATUS, {}, 0))
    for key, (obj, details, ready) in EARLIER_STEPS.items():
        entry = wire.field(1, wire.LEN, key.encode()) + wire.field(2, wire.LEN, resource_bytes(obj, details, ready))
        state += wire.field(2, wire.LEN, entry)
    return (base.SerializeToString() + wire.field(3, wire.LEN, state)
            + wire.field(5, wire.LEN, wire.struct_bytes(CONTEXT)))


def test_the_hand_encoded_request_is_what_it_claims_to_be():
    req = fnv1.RunFunctionRequest.FromString(request_with_earlier_steps(EXAMPLE_CLASS))
    assert resource.struct_to_dict(req.desired.resources["network"].resource) == EARLIER_STEPS["network"][0]
    assert dict(req.desired.resources["bucket"].connection_details) == EARLIER_STEPS["bucket"][1]
    assert resource.struct_to_dict(req.context) == CONTEXT
    # Not the canonical encoding, so a server that decodes and re-encodes cannot return these bytes.
    canonical = req.desired.resources["network"].resource.SerializeToString(deterministic=True)
    assert canonical != wire.only(wire.map_entries(wire.only(request_with_earlier_steps(EXAMPLE_CLASS), 3), 2)
                                  ["network"], 1)


def test_desired_resources_from_earlier_steps_come_back_byte_identical(channel):
    sent = request_with_earlier_steps(EXAMPLE_CLASS)
    received = raw_call(channel, V1_PATH, sent)
    rsp = fnv1.RunFunctionResponse.FromString(received)
    assert fatal_messages(rsp) == []

    sent_resources = wire.map_entries(wire.only(sent, 3), 2)
    received_resources = wire.map_entries(wire.only(received, 2), 2)
    assert received_resources.keys() == sent_resources.keys() == EARLIER_STEPS.keys()
    for key, (obj, details, ready) in EARLIER_STEPS.items():
        assert wire.only(received_resources[key], 1) == wire.only(sent_resources[key], 1), key
        assert dict(rsp.desired.resources[key].connection_details) == details
        assert rsp.desired.resources[key].ready == ready
    # The composite's status is ours to add to, but what earlier steps wrote there stays.
    status = resource.struct_to_dict(rsp.desired.composite.resource)["status"]
    assert status["earlierStep"] == EARLIER_COMPOSITE_STATUS["status"]["earlierStep"]
    assert status["devices"][0]["name"] == "gpu"


def test_the_context_is_passed_through_byte_identical(channel):
    sent = request_with_earlier_steps(EXAMPLE_CLASS)
    received = raw_call(channel, V1_PATH, sent)
    assert wire.only(received, 4) == wire.only(sent, 5) == wire.struct_bytes(CONTEXT)


def test_the_same_request_gives_byte_identical_responses_on_v1_and_v1beta1(channel):
    sent = request_with_earlier_steps(EXAMPLE_CLASS)
    first, second = raw_call(channel, V1_PATH, sent), raw_call(channel, V1_PATH, sent)
    assert first == second
    assert raw_call(channel, V1BETA1_PATH, sent) == first


def test_an_unknown_kind_is_a_fatal_result_naming_the_kind(v1):
    xr = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceWidget", "metadata": {"name": "w"}}
    [message] = fatal_messages(v1.RunFunction(pipeline.request(xr), timeout=30))
    assert "InferenceWidget" in message


def test_a_wrong_api_version_is_a_fatal_result_naming_it(v1):
    xr = dict(EXAMPLE_CLASS, apiVersion="modelplane.ai/v9")
    [message] = fatal_messages(v1.RunFunction(pipeline.request(xr), timeout=30))
    assert "modelplane.ai/v9" in message and "InferenceClass" in message


def test_a_request_without_a_composite_is_a_fatal_result(v1):
    req = fnv1.RunFunctionRequest(meta=fnv1.RequestMeta(tag="empty"))
    [message] = fatal_messages(v1.RunFunction(req, timeout=30))
    assert "observed.composite" in message


def test_a_malformed_spec_is_a_fatal_result_naming_the_field(v1):
    xr = yaml.safe_load(EXAMPLE_CLASS_FILE.read_text())
    xr["spec"]["devices"][0]["count"] = "eight"
    rsp = v1.RunFunction(pipeline.request(xr), timeout=30)
    [message] = fatal_messages(rsp)
    assert "spec.devices[0].count" in message
    assert not rsp.desired.resources and not rsp.desired.HasField("composite")


def test_the_server_keeps_serving_after_fatal_results(v1):
    for kind in ("A", "B", "C"):
        v1.RunFunction(pipeline.request({"apiVersion": "x/v1", "kind": kind}), timeout=30)
    assert fatal_messages(v1.RunFunction(pipeline.request(EXAMPLE_CLASS), timeout=30)) == []


def test_a_deeply_nested_object_is_a_fatal_result_not_a_crash(channel, v1):
    # A few KB of nesting once overflowed the decoder's stack and aborted the server.
    nested = wire.value_bytes("leaf")
    for _ in range(2000):
        nested = wire.field(5, wire.LEN, wire.field(1, wire.LEN, wire.field(1, wire.LEN, b"a")
                                                    + wire.field(2, wire.LEN, nested)))
    status = wire.field(1, wire.LEN, wire.field(1, wire.LEN, b"status") + wire.field(2, wire.LEN, nested))
    base = pipeline.request(EXAMPLE_CLASS, tag="deep")
    base.ClearField("desired")
    desired = wire.field(1, wire.LEN, wire.field(1, wire.LEN, status))  # State.composite.resource
    received = raw_call(channel, V1_PATH, base.SerializeToString() + wire.field(3, wire.LEN, desired))
    # The response carries the nesting back, deeper than the Python runtime parses: read it field by field.
    results = [dict((n, v) for n, _, v in wire.fields(r)) for n, _, r in wire.fields(received) if n == 3]
    assert [r[1] for r in results] == [fnv1.SEVERITY_FATAL]
    assert b"deeper than 100 levels" in results[0][2]
    assert fatal_messages(v1.RunFunction(pipeline.request(EXAMPLE_CLASS), timeout=30)) == []


def test_a_response_crossplane_could_not_receive_is_a_fatal_result_it_can(v1):
    # Earlier steps composed 5 MiB; passing it on would exceed grpc-go's 4 MiB receive limit on Crossplane's side
    # (the Python client has the same default, so a transport error would surface here too).
    req = pipeline.request(EXAMPLE_CLASS, tag="big")
    req.desired.resources["blob"].resource.CopyFrom(resource.dict_to_struct(
        {"apiVersion": "v1", "kind": "ConfigMap", "data": {"blob": "x" * (5 * 1024 * 1024)}}))
    rsp = v1.RunFunction(req, timeout=30)
    [message] = fatal_messages(rsp)
    assert "over Crossplane's 4194304-byte limit" in message
    assert rsp.meta.tag == "big"


def test_the_health_service_reports_both_function_services_serving(channel):
    for service in ("", "apiextensions.fn.proto.v1.FunctionRunnerService",
                    "apiextensions.fn.proto.v1beta1.FunctionRunnerService"):
        assert conftest.health(channel, service) == conftest.SERVING, service


def test_a_step_without_requirements_is_called_once(v1):
    step = pipeline.run_step(v1, pipeline.request(EXAMPLE_CLASS), objects=[])
    assert step.fatal == [] and len(step.requests) == 1


CLUSTER = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceCluster",
    "metadata": {"name": "use1-h200", "uid": "6a1d0c4e-1f7b-4a8e-9d55-0c1e2f3a4b5c",
                 "labels": {"crossplane.io/composite": "use1-h200"}},
    "spec": {
        "stack": "Standard",
        "cluster": {"source": "EKS", "eks": {
            "region": "us-east-1",
            "clusterRoleArn": "arn:aws:iam::123456789012:role/modelplane-eks-cluster",
            "nodeRoleArn": "arn:aws:iam::123456789012:role/modelplane-eks-node",
        }},
        "nodePools": [{"name": "h200", "className": "eks-h200-8x", "nodeCount": 2}],
    },
}


def test_an_inference_cluster_settles_its_requirements_with_its_class(v1):
    other_class = dict(EXAMPLE_CLASS, metadata={"name": "eks-b200-8x"})
    step = pipeline.run_step(v1, pipeline.request(CLUSTER), objects=[other_class, EXAMPLE_CLASS])
    assert step.fatal == []
    assert len(step.requests) >= 2, "the cluster composer must require its pools' InferenceClasses"
    final = step.requests[-1]
    supplied = [resource.struct_to_dict(item.resource)
                for found in final.required_resources.values() for item in found.items]
    assert EXAMPLE_CLASS in supplied
    assert step.response.desired.resources, "an InferenceCluster composes its cluster and node pools"


@pytest.mark.parametrize("output", ["yaml", "json"])
def test_render_in_process_and_against_the_server_print_the_same(plaintext_server, output):
    local = conftest.render(str(EXAMPLE_CLASS_FILE), "-o", output)
    remote = conftest.render(str(EXAMPLE_CLASS_FILE), "-o", output, "--function-address", plaintext_server.address)
    assert (local.returncode, remote.returncode) == (0, 0), local.stderr + remote.stderr
    assert local.stdout and remote.stdout == local.stdout
    documents = json.loads(local.stdout) if output == "json" else list(yaml.safe_load_all(local.stdout))
    [composite] = [doc for doc in documents if doc and doc.get("kind") == "InferenceClass"]
    assert {"type": "Valid", "status": "True", "reason": "ValidClass"} in composite["status"]["conditions"]


def test_render_exits_3_on_a_fatal_result(tmp_path, plaintext_server):
    widget = tmp_path / "widget.yaml"
    widget.write_text("apiVersion: modelplane.ai/v1alpha1\nkind: InferenceWidget\nmetadata: {name: w}\n")
    local = conftest.render(str(widget))
    remote = conftest.render(str(widget), "--function-address", plaintext_server.address)
    assert (local.returncode, remote.returncode) == (3, 3)
    assert "InferenceWidget" in local.stdout + local.stderr
    assert remote.stdout == local.stdout


def from_caller(composite: dict, capabilities: list[int]) -> fnv1.RunFunctionRequest:
    """The first request from a Crossplane that advertises exactly `capabilities` (v2.2+ advertises them all)."""
    req = pipeline.request(composite)
    del req.meta.capabilities[:]
    req.meta.capabilities.extend(capabilities)
    return req


def test_a_caller_that_cannot_fetch_required_resources_gets_a_fatal_not_an_empty_desired_state(v1):
    without = [c for c in pipeline.CAPABILITIES if c != fnv1.CAPABILITY_REQUIRED_RESOURCES]
    rsp = v1.RunFunction(from_caller(CLUSTER, without), timeout=30)
    [message] = fatal_messages(rsp)
    assert "required-resources capability" in message and "InferenceClass" in message, message
    assert not rsp.desired.resources and not rsp.HasField("requirements")


def test_a_caller_that_advertises_nothing_still_gets_asked_for_the_class(v1):
    # Crossplane before v2.2 advertises no capabilities; that says nothing about what it can do.
    step = pipeline.run_step(v1, from_caller(CLUSTER, []), objects=[EXAMPLE_CLASS])
    assert step.fatal == [] and len(step.requests) >= 2
    assert step.response.desired.resources


def test_a_caller_without_conditions_gets_no_conditions(v1):
    without = [c for c in pipeline.CAPABILITIES if c != fnv1.CAPABILITY_CONDITIONS]
    rsp = v1.RunFunction(from_caller(EXAMPLE_CLASS, without), timeout=30)
    assert fatal_messages(rsp) == [] and list(rsp.conditions) == []
    assert rsp.desired.composite.ready == fnv1.READY_TRUE
