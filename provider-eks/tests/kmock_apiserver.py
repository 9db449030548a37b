"""A Kubernetes API stand-in for provider-eks tests: kmock's emulator plus the object metadata a real API server
stamps (resourceVersion, uid, generation, creationTimestamp) and optimistic concurrency on resourceVersion, so
kube-runtime watches and the provider's conflict-guarded writes behave as they would against a real server.

Usage: python kmock_apiserver.py PORT   (prints "ready" once it listens)
"""

import asyncio
import datetime
import itertools
import os
import sys
import threading
import uuid

import attrs
import kmock
from kmock._internal import enums
from kmock._internal.k8s import KubernetesError, KubernetesNotFoundError, KubernetesObjectConflictError

# The resources the provider touches, beyond the core ones kmock bundles.
CUSTOM_RESOURCES = {
    "eks.m.modelplane.ai/v1alpha1/clusters": ("Cluster", True),
    "eks.m.modelplane.ai/v1alpha1/nodepools": ("NodePool", True),
    "eks.m.modelplane.ai/v1alpha1/providerconfigs": ("ProviderConfig", True),
    "eks.m.modelplane.ai/v1alpha1/clusterproviderconfigs": ("ClusterProviderConfig", False),
    "apiextensions.crossplane.io/v1alpha1/managedresourcedefinitions": ("ManagedResourceDefinition", False),
    "apiextensions.k8s.io/v1/customresourcedefinitions": ("CustomResourceDefinition", False),
}


def stale_resource_version() -> KubernetesError:
    message = "the object has been modified; please apply your changes to the latest version and try again"
    return KubernetesError(status=409, reason="Conflict", message=message)


class ApiServer(kmock.KubernetesEmulator):
    _versions = itertools.count(1)

    async def _render_error(self, exc):
        # Status reasons as the real API server spells them (clients match on them, e.g. kube-rs `get_opt`).
        if isinstance(exc, KubernetesNotFoundError):
            exc = attrs.evolve(exc, reason="NotFound")
        elif isinstance(exc, KubernetesObjectConflictError):
            exc = attrs.evolve(exc, reason="AlreadyExists")
        return await super()._render_error(exc)

    def _current(self, request):
        key = (request.resource, request.namespace, request.name)
        obj = self._objects[key] if key in self._objects else None
        return None if obj is None or obj.deleted else obj

    async def _handle(self, request):
        if request.resource is not None and request.action in (enums.action.CREATE, enums.action.UPDATE):
            meta = request.data.setdefault("metadata", {})
            if request.action == enums.action.CREATE:
                meta["uid"] = str(uuid.uuid4())
                meta["generation"] = 1
                meta["creationTimestamp"] = datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            elif request.name is not None:
                current = self._current(request)
                if current is not None:
                    stored = current.get("metadata", {})
                    sent = meta.get("resourceVersion")
                    if sent is not None and sent != stored.get("resourceVersion"):
                        raise stale_resource_version()
                    if "spec" in request.data:
                        meta["generation"] = int(stored.get("generation", 1)) + 1
            meta["resourceVersion"] = str(next(self._versions))
        return await super()._handle(request)

    async def _serve_list(self, request):
        listing = await super()._serve_list(request)
        listing["metadata"]["resourceVersion"] = str(next(self._versions))
        return listing


async def main(port: int) -> None:
    async with ApiServer() as server, kmock.Server(server, host="127.0.0.1", port=port):
        server.resources.load_bundled()
        for path, (kind, namespaced) in CUSTOM_RESOURCES.items():
            server.resources[path] = kmock.ResourceInfo(
                kind=kind, namespaced=namespaced, subresources={"status"},
                verbs={"get", "list", "watch", "create", "patch", "delete"},
            )
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    # Exit with the test process that started us: it holds our stdin open.
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    asyncio.run(main(int(sys.argv[1])))
