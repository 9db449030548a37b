"""A small client for the loopback kube-apiserver that tests/controlplane/controlplane.sh starts.

Plain HTTPS with the harness's admin client certificate (`requests` is already a test dependency): the tests need
exactly the REST calls they make, with the query parameters spelled out (dryRun, fieldValidation), and nothing that
could hide what the server answered.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

import pytest
import requests
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
# Every request is bounded; the server is on loopback, so a slow answer is a bug worth seeing.
REQUEST_TIMEOUT_SECONDS = 30
FIELD_MANAGER = "modelplane-tests"

T = TypeVar("T")


def crds_dir() -> Path:
    """The upstream CRDs: MODELPLANE_CRDS_DIR, else the vendored tests/crds (tests/controlplane/controlplane.sh
    resolves the same way)."""
    candidates = [os.environ.get("MODELPLANE_CRDS_DIR"), REPO_ROOT / "tests" / "crds"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "crossplane").is_dir():
            return Path(candidate)
    pytest.fail("no upstream CRDs: set MODELPLANE_CRDS_DIR or vendor them into tests/crds")


def load_yaml_documents(*paths: Path) -> list[dict]:
    """Every non-empty document of every YAML file in `paths` (directories are read recursively, sorted)."""
    files: list[Path] = []
    for path in paths:
        files += sorted(p for p in path.rglob("*.yaml")) if path.is_dir() else [path]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [doc for f in files for doc in yaml.load_all(f.read_text(), Loader=loader) if doc]


# How often a 429 answer is retried before it counts as an error.
TOO_MANY_REQUESTS_RETRIES = 10


class ApiError(AssertionError):
    def __init__(self, response: requests.Response, what: str):
        self.status = response.status_code
        try:
            self.body = response.json()
        except ValueError:
            self.body = {"message": response.text}
        self.message = self.body.get("message", response.text)
        super().__init__(f"{what}: HTTP {self.status}: {self.message}")


@dataclasses.dataclass(frozen=True)
class Resource:
    plural: str
    namespaced: bool


class Kube:
    def __init__(self, server: str, ca: Path, cert: Path, key: Path):
        self.server = server.rstrip("/")
        self.session = requests.Session()
        # REQUESTS_CA_BUNDLE and proxy settings from the environment would override the test CA and loopback.
        self.session.trust_env = False
        self.session.verify = str(ca)
        self.session.cert = (str(cert), str(key))
        self._resources: dict[tuple[str, str], Resource] = {}

    @classmethod
    def from_env(cls) -> "Kube":
        state, server = os.environ.get("CONTROLPLANE_STATE"), os.environ.get("CONTROLPLANE_API")
        if not state or not server:
            pytest.fail("no control plane: run these tests through "
                        "`tests/controlplane/controlplane.sh run --crossplane -- pytest ...`")
        pki = Path(state) / "pki"
        return cls(server, pki / "ca.crt", pki / "admin.crt", pki / "admin.key")

    # --- raw ---------------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, *, body: Any = None, params: dict | None = None,
                content_type: str = "application/json", what: str = "", ok: Iterable[int] = ()) -> dict | None:
        data = body if body is None or isinstance(body, (str, bytes)) else json.dumps(body)
        # 429 is the server asking for a retry (a CRD's storage still initializing, priority and fairness), as
        # client-go retries it: honour Retry-After a bounded number of times.
        for _ in range(TOO_MANY_REQUESTS_RETRIES):
            response = self.session.request(method, self.server + path, data=data, params=params,
                                            headers={"Content-Type": content_type}, timeout=REQUEST_TIMEOUT_SECONDS)
            if response.status_code != 429:
                break
            time.sleep(min(float(response.headers.get("Retry-After") or 1), 5.0))
        if response.status_code in ok:
            return None
        if response.status_code >= 400:
            raise ApiError(response, what or f"{method} {path}")
        return response.json() if response.content else {}

    # --- discovery ---------------------------------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> Resource:
        """Plural and scope of a kind, from API discovery (re-read on a miss: CRDs appear while tests run)."""
        key = (api_version, kind)
        if key not in self._resources:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            listing = self.request("GET", path, what=f"discovery of {api_version}", ok=(404,)) or {}
            for item in listing.get("resources", []):
                if "/" not in item["name"]:
                    self._resources[(api_version, item["kind"])] = Resource(item["name"], item["namespaced"])
        if key not in self._resources:
            raise AssertionError(f"the API server serves no {kind} in {api_version}")
        return self._resources[key]

    def path(self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
        resource = self.resource(api_version, kind)
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if resource.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        elif resource.namespaced and name:
            raise AssertionError(f"{kind} {name} is namespaced but has no namespace")
        base += f"/{resource.plural}"
        return f"{base}/{name}" if name else base

    def object_path(self, obj: dict, with_name: bool = True) -> str:
        meta = obj.get("metadata") or {}
        return self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta.get("name") if with_name else None)

    # --- objects -----------------------------------------------------------------------------------------------

    def dry_run(self, obj: dict) -> dict:
        """Sends `obj` with dryRun=All and fieldValidation=Strict: the server's full admission (schema, unknown
        fields as errors, defaulting, CEL, admission plugins) without storing anything. A named object goes as a
        server-side apply (it may already exist, like a Namespace), a generateName one as a create. Returns what the
        server would have stored."""
        params = {"dryRun": "All", "fieldValidation": "Strict", "fieldManager": FIELD_MANAGER}
        if (obj.get("metadata") or {}).get("name"):
            result = self.request("PATCH", self.object_path(obj), body=yaml.safe_dump(obj),
                                  content_type="application/apply-patch+yaml", params=params | {"force": "true"},
                                  what=f"dry-run apply of {describe(obj)}")
        else:
            result = self.request("POST", self.object_path(obj, with_name=False), body=obj, params=params,
                                  what=f"dry-run create of {describe(obj)}")
        assert result is not None
        return result

    def apply(self, obj: dict) -> dict:
        """Server-side apply with strict field validation, forcing ownership (the tests are the only writer)."""
        result = self.request("PATCH", self.object_path(obj), body=yaml.safe_dump(obj),
                              content_type="application/apply-patch+yaml",
                              params={"fieldManager": FIELD_MANAGER, "force": "true", "fieldValidation": "Strict"},
                              what=f"apply of {describe(obj)}")
        assert result is not None
        return result

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        return self.request("GET", self.path(api_version, kind, namespace, name), ok=(404,),
                            what=f"get {kind} {name}")

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict]:
        """Objects of a kind in `namespace`, or in every namespace when it is None."""
        listing = self.request("GET", self.path(api_version, kind, namespace), what=f"list {kind}") or {}
        return listing.get("items", [])

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        self.request("DELETE", self.path(api_version, kind, namespace, name), ok=(404,),
                     params={"propagationPolicy": "Background"}, what=f"delete {kind} {name}")

    def patch_status(self, obj: dict, status: dict) -> dict:
        meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]) + "/status"
        result = self.request("PATCH", path, body={"status": status}, content_type="application/merge-patch+json",
                              what=f"status patch of {describe(obj)}")
        assert result is not None
        return result

    def ensure_namespace(self, name: str) -> None:
        # A namespace an earlier test deleted may still be terminating: nothing can be created in it until it is
        # gone, so wait for that and create it again.
        def active() -> bool | None:
            self.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": name}},
                         ok=(409,), what=f"create namespace {name}")
            namespace = self.get("v1", "Namespace", name) or {}
            return True if (namespace.get("status") or {}).get("phase") == "Active" else None
        wait_for(f"namespace {name} active", active, 180,
                 lambda: str((self.get("v1", "Namespace", name) or {}).get("status")))


def describe(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    namespace = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('apiVersion', '?')} {obj.get('kind', '<no kind>')} {namespace}{name}"


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, describe_state: Callable[[], str] = str) -> T:
    """Polls `probe` until it returns something truthy; fails naming `what` (and the last state) after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f}s; last state: {describe_state()}")
        time.sleep(0.5)
