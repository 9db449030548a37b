"""The requirements-loop helper must behave like Crossplane's, or tests built on it prove nothing."""

import pytest
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

import pipeline


def obj(kind, name, namespace=None, labels=None):
    meta = {"name": name, **({"namespace": namespace} if namespace else {}), **({"labels": labels} if labels else {})}
    return {"apiVersion": "modelplane.ai/v1alpha1", "kind": kind, "metadata": meta}


OBJECTS = [
    obj("InferenceClass", "h200"),
    obj("InferenceClass", "b200", labels={"tier": "gold"}),
    obj("InferenceCluster", "east", labels={"tier": "gold"}),
    obj("Model", "llama", "team-b", {"tier": "gold"}),
    obj("Model", "llama", "team-a", {"tier": "gold"}),
    obj("Model", "qwen", "team-a"),
]


def selector(kind, *, name=None, labels=None, namespace=None):
    s = fnv1.ResourceSelector(api_version="modelplane.ai/v1alpha1", kind=kind)
    if name is not None:
        s.match_name = name
    if labels is not None:
        s.match_labels.labels.update(labels)
    if namespace is not None:
        s.namespace = namespace
    return s


def names(found):
    return [(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in found]


def test_a_name_match_without_namespace_finds_only_cluster_scoped_objects():
    assert names(pipeline.select(OBJECTS, selector("InferenceClass", name="h200"))) == [(None, "h200")]
    assert pipeline.select(OBJECTS, selector("Model", name="llama")) == []


def test_a_name_match_with_a_namespace_is_a_get_in_that_namespace():
    assert names(pipeline.select(OBJECTS, selector("Model", name="llama", namespace="team-b"))) == [
        ("team-b", "llama")]


def test_a_label_match_without_namespace_lists_across_namespaces_in_order():
    assert names(pipeline.select(OBJECTS, selector("Model", labels={"tier": "gold"}))) == [
        ("team-a", "llama"), ("team-b", "llama")]


def test_a_label_match_with_a_namespace_lists_only_there_and_checks_kind():
    assert names(pipeline.select(OBJECTS, selector("Model", labels={}, namespace="team-a"))) == [
        ("team-a", "llama"), ("team-a", "qwen")]
    assert names(pipeline.select(OBJECTS, selector("InferenceClass", labels={"tier": "gold"}))) == [(None, "b200")]


class ScriptedFunction:
    """Answers each call with the next requirements in `script`, recording what it was sent."""

    def __init__(self, script):
        self.script, self.requests = list(script), []

    def RunFunction(self, req, timeout=None):  # noqa: N802 - the gRPC stub's method name
        self.requests.append(req)
        rsp = fnv1.RunFunctionResponse()
        rsp.context.CopyFrom(resource.dict_to_struct({"call": len(self.requests)}))
        for name, sel in self.script[min(len(self.requests), len(self.script)) - 1].items():
            rsp.requirements.resources[name].CopyFrom(sel)
        return rsp


def test_the_loop_answers_requirements_and_stops_when_they_repeat():
    wants = {"class": selector("InferenceClass", name="h200"), "none": selector("InferenceClass", name="gone")}
    fn = ScriptedFunction([wants, wants])
    step = pipeline.run_step(fn, pipeline.request(obj("InferenceCluster", "east")), OBJECTS)
    assert len(step.requests) == 2
    second = step.requests[1]
    assert [resource.struct_to_dict(i.resource)["metadata"]["name"] for i in second.required_resources["class"].items
            ] == ["h200"]
    assert "none" in second.required_resources and not second.required_resources["none"].items
    assert resource.struct_to_dict(second.context) == {"call": 1}


def test_the_loop_gives_up_after_six_calls_when_requirements_keep_changing():
    script = [{f"r{i}": selector("InferenceClass", name=f"c{i}")} for i in range(10)]
    fn = ScriptedFunction(script)
    with pytest.raises(pipeline.UnstableRequirements):
        pipeline.run_step(fn, pipeline.request(obj("InferenceCluster", "east")), OBJECTS)
    assert len(fn.requests) == pipeline.MAX_CALLS
