"""Crossplane's side of one pipeline step, for calling the function the way Crossplane does.

`run_step` follows Crossplane's requirements loop (internal/xfn/required_resources.go): call; stop on a FATAL
result; stop when the requirements equal the previous call's; otherwise answer every selector from the given
objects and call again with desired and observed unchanged, at most six calls in all.
"""

from __future__ import annotations

import dataclasses

from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

MAX_CALLS = 6

CAPABILITIES = [fnv1.CAPABILITY_CAPABILITIES, fnv1.CAPABILITY_REQUIRED_RESOURCES, fnv1.CAPABILITY_CREDENTIALS,
                fnv1.CAPABILITY_CONDITIONS, fnv1.CAPABILITY_REQUIRED_SCHEMAS]


class UnstableRequirements(AssertionError):
    pass


@dataclasses.dataclass
class Step:
    """The final response, and every request sent to get it."""
    response: fnv1.RunFunctionResponse
    requests: list[fnv1.RunFunctionRequest]

    @property
    def fatal(self) -> list[str]:
        return [r.message for r in self.response.results if r.severity == fnv1.SEVERITY_FATAL]


def request(composite: dict, *, tag: str = "", observed: dict[str, dict] | None = None,
            context: dict | None = None) -> fnv1.RunFunctionRequest:
    """The first request of a step, as Crossplane v2.2+ sends it: empty desired state and context."""
    req = fnv1.RunFunctionRequest(meta=fnv1.RequestMeta(tag=tag, capabilities=CAPABILITIES))
    req.observed.composite.resource.CopyFrom(resource.dict_to_struct(composite))
    for key, obj in (observed or {}).items():
        req.observed.resources[key].resource.CopyFrom(resource.dict_to_struct(obj))
    req.desired.SetInParent()
    req.context.CopyFrom(resource.dict_to_struct(context or {}))
    return req


def run_step(stub, req: fnv1.RunFunctionRequest, objects: list[dict], timeout: float = 30) -> Step:
    """Calls `stub.RunFunction` until its requirements settle, answering them from `objects`."""
    req = _copy(req)
    previous = fnv1.Requirements()
    sent = []
    for _ in range(MAX_CALLS):
        sent.append(_copy(req))
        rsp = stub.RunFunction(req, timeout=timeout)
        if any(r.severity == fnv1.SEVERITY_FATAL for r in rsp.results):
            return Step(rsp, sent)
        if rsp.requirements == previous:
            return Step(rsp, sent)
        previous = _copy(rsp.requirements)
        req.ClearField("required_resources")
        for name, selector in rsp.requirements.resources.items():
            found = req.required_resources[name]  # present even when nothing matches: "looked, found nothing"
            for obj in select(objects, selector):
                found.items.add().resource.CopyFrom(resource.dict_to_struct(obj))
        for name, selector in rsp.requirements.extra_resources.items():
            found = req.extra_resources[name]
            for obj in select(objects, selector):
                found.items.add().resource.CopyFrom(resource.dict_to_struct(obj))
        req.context.CopyFrom(rsp.context)
    raise UnstableRequirements(f"requirements didn't stabilize after the maximum number of iterations "
                               f"({MAX_CALLS - 1}); last requirements: {previous}")


def select(objects: list[dict], selector: fnv1.ResourceSelector) -> list[dict]:
    """What the API server returns for a selector, ordered by namespace and name as a List is.

    A name match is a Get: in `namespace` when set, else a cluster-scoped object. A label match, or no match,
    is a List: in `namespace` when set, else across all namespaces.
    """
    wanted_namespace = selector.namespace if selector.HasField("namespace") else None

    def matches(obj: dict) -> bool:
        if obj.get("apiVersion") != selector.api_version or obj.get("kind") != selector.kind:
            return False
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or None
        if selector.WhichOneof("match") == "match_name":
            return meta.get("name") == selector.match_name and namespace == wanted_namespace
        if wanted_namespace is not None and namespace != wanted_namespace:
            return False
        labels = meta.get("labels") or {}
        wanted = selector.match_labels.labels if selector.WhichOneof("match") == "match_labels" else {}
        return all(labels.get(k) == v for k, v in wanted.items())

    found = [obj for obj in objects if matches(obj)]
    return sorted(found, key=lambda o: ((o.get("metadata") or {}).get("namespace") or "",
                                        (o.get("metadata") or {}).get("name") or ""))


def _copy(message):
    duplicate = type(message)()
    duplicate.CopyFrom(message)
    return duplicate
