"""A provider key copied to a workload cluster by provider-kubernetes reference, with the function's own Objects:
the ModelService example renders the copy of the together endpoint's key empty, provider-kubernetes creates it,
the function (given that Object as observed) adds the reference, and provider-kubernetes fills the remote Secret
from the control-plane Secret. The key must end up on the "workload cluster" (this same API server) and nowhere
in the Object: not in its spec (provider-kubernetes writes a resolved spec back on create, its issue #223, which
the two steps avoid) and not in its status (it runs with --sanitize-secrets)."""

from __future__ import annotations

import base64
import json
import uuid

import installs
import yaml
from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from test_crossplane import OBJECT_API, kubeconfig_pointing_back

SERVICE = REPO_ROOT / "examples" / "services" / "qwen3-coder.yaml"
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "services" / "fleet.yaml"
KEY = "sk-together-never-in-an-object"
SECONDS = 120


def copy_of_the_key(composed: list[dict]) -> dict:
    [found] = [o for o in composed
               if o.get("kind") == "Object" and o["spec"]["forProvider"]["manifest"]["kind"] == "Secret"]
    return found


def as_crossplane_applies(obj: dict, name: str) -> dict:
    obj = json.loads(json.dumps(obj))
    meta = obj.setdefault("metadata", {})
    meta.pop("generateName", None)
    meta["name"] = name
    meta["namespace"] = "ml-team"
    meta["ownerReferences"] = []
    return obj


def test_a_provider_key_reaches_the_cluster_by_reference_and_never_enters_the_object(platform: Kube, tmp_path):
    kube = platform
    cluster = load_yaml_documents(FIXTURE)[0]
    provider_config = cluster["status"]["providerConfigName"]
    for namespace in ("modelplane-system", "ml-team"):
        kube.ensure_namespace(namespace)
    kube.apply({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": f"{provider_config}-kubeconfig", "namespace": "modelplane-system"},
                "stringData": {"kubeconfig": kubeconfig_pointing_back(kube)}})
    kube.apply({"apiVersion": OBJECT_API, "kind": "ClusterProviderConfig", "metadata": {"name": provider_config},
                "spec": {"credentials": {"source": "Secret", "secretRef": {
                    "namespace": "modelplane-system", "name": f"{provider_config}-kubeconfig", "key": "kubeconfig"}}}})
    kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "together-api-key", "namespace": "ml-team"},
                "stringData": {"apiKey": KEY}})

    first = copy_of_the_key(installs.render(SERVICE, FIXTURE)[1:])
    assert "references" not in first["spec"], "step 1 carries no reference"
    key = first["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
    name = f"secret-copy-{uuid.uuid4().hex[:8]}"
    kube.apply(as_crossplane_applies(first, name))

    def created() -> dict | None:
        obj = kube.get(OBJECT_API, "Object", name, "ml-team") or {}
        manifest = ((obj.get("status") or {}).get("atProvider") or {}).get("manifest")
        return manifest and "finalizer.managedresource.crossplane.io" in obj["metadata"].get("finalizers", []) and obj

    observed = wait_for("the empty copy created", created, SECONDS)
    assert observed["status"]["atProvider"]["manifest"]["data"] == {"redacted": None}, "--sanitize-secrets is on"

    observed_file = tmp_path / "observed.yaml"
    observed_file.write_text(yaml.safe_dump(observed))
    second = copy_of_the_key(installs.render(SERVICE, FIXTURE, observed=(observed_file,))[1:])
    reference = second["spec"]["references"][0]["patchesFrom"]
    assert (reference["namespace"], reference["name"], reference["fieldPath"]) == (
        "ml-team", "together-api-key", "data.apiKey")
    assert second["spec"]["managementPolicies"] == ["Observe", "Update"]
    assert second["metadata"]["annotations"]["crossplane.io/composition-resource-name"] == key
    kube.apply(as_crossplane_applies(second, name))

    remote = first["spec"]["forProvider"]["manifest"]["metadata"]

    def filled() -> dict | None:
        secret = kube.get("v1", "Secret", remote["name"], remote["namespace"]) or {}
        return (secret.get("data") or {}).get("apiKey") == base64.b64encode(KEY.encode()).decode() and secret

    wait_for("the remote Secret filled from the control plane", filled, SECONDS,
             lambda: json.dumps((kube.get(OBJECT_API, "Object", name, "ml-team") or {}).get("status")))
    settled = kube.get(OBJECT_API, "Object", name, "ml-team")
    assert "data" not in settled["spec"]["forProvider"]["manifest"], "the resolved key was written into the spec"
    assert settled["status"]["atProvider"]["manifest"]["data"] == {"redacted": None}
    text = json.dumps(settled)
    assert KEY not in text and base64.b64encode(KEY.encode()).decode() not in text
    kube.delete(OBJECT_API, "Object", name, "ml-team")
