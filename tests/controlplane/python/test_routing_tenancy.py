"""Tenancy through real Crossplane: a ModelService reaches another namespace's ModelEndpoints only while an
InferenceGateway grants it. Crossplane resolves the function's requirements itself, namespace by namespace, so this
proves the grant's extra requirement is asked for, answered and settles, and that a revoked grant stops the reading.
No workload cluster is needed: what a ModelService selects is in its status whether or not a gateway can route it.
"""

from __future__ import annotations

import uuid

from kube import Kube, wait_for
from workload import API, conditions

# Crossplane polls every 10 s here; a grant lives on another object, whose change reaches the service on a poll.
CONVERGE_SECONDS = 120


def endpoint(name: str, namespace: str, app: str) -> dict:
    return {"apiVersion": API, "kind": "ModelEndpoint", "metadata": {"name": name, "namespace": namespace,
                                                                    "labels": {"app": app}},
            "spec": {"origin": "https://api.example.com", "model": "qwen"}}


def entry(name: str, app: str, priority: int, namespace: str | None = None) -> dict:
    e = {"name": name, "priority": priority, "selector": {"matchLabels": {"app": app}}}
    if namespace:
        e["namespace"] = namespace
    return e


def test_a_service_reads_another_namespace_only_while_a_gateway_grants_it(platform: Kube):
    kube = platform
    suffix = uuid.uuid4().hex[:6]
    mine, shared, theirs = f"tenant-{suffix}", f"shared-{suffix}", f"other-{suffix}"
    app = f"qwen-{suffix}"
    for namespace in (mine, shared, theirs):
        kube.ensure_namespace(namespace)
        kube.apply(endpoint("qwen", namespace, app))
    gateway = {"apiVersion": API, "kind": "InferenceGateway", "metadata": {"name": f"grants-{suffix}"},
               # Labels no service carries: this gateway serves nothing, it only grants.
               "spec": {"clusterName": f"absent-{suffix}", "serviceSelector": {"matchLabels": {"none": suffix}},
                        "endpointGrants": [{"from": mine, "to": shared}]}}
    kube.apply(gateway)
    service = {"apiVersion": API, "kind": "ModelService", "metadata": {"name": "qwen", "namespace": mine},
               "spec": {"endpoints": [entry("own", app, 0), entry("shared", app, 1, shared),
                                      entry("theirs", app, 2, theirs)]}}
    kube.apply(service)

    def status() -> dict:
        return (kube.get(API, "ModelService", "qwen", mine) or {}).get("status") or {}

    def resolved() -> dict:
        return next((c for c in status().get("conditions") or [] if c.get("type") == "EndpointsResolved"), {})

    def counted(total: int, refused_field: str):
        return lambda: ((status().get("endpoints") or {}).get("total") == total
                        and resolved().get("reason") == "NamespaceNotGranted"
                        and refused_field in resolved().get("message", "") and status())

    try:
        # Its own endpoint and the granted namespace's; the third namespace is named in the condition, never read.
        wait_for("the granted namespace's endpoint counted, the other refused", counted(2, "spec.endpoints[2]"),
                 CONVERGE_SECONDS, lambda: str(status()))
        assert conditions(kube.get(API, "ModelService", "qwen", mine)).get("Ready") == "False"

        # Revoked: the grant goes, and with it everything read from that namespace.
        gateway["spec"]["endpointGrants"] = [{"from": shared, "to": mine}]
        kube.apply(gateway)
        wait_for("the revoked namespace no longer read", counted(1, "spec.endpoints[1]"), CONVERGE_SECONDS,
                 lambda: str(status()))
        assert "spec.endpoints[2]" in resolved()["message"], resolved()
    finally:
        kube.delete(API, "ModelService", "qwen", mine)
        kube.delete(API, "InferenceGateway", gateway["metadata"]["name"])
        for namespace in (mine, shared, theirs):
            kube.delete(API, "ModelEndpoint", "qwen", namespace)
