"""A provider key copied to a workload cluster by provider-kubernetes reference, with the function's own Objects:
the ModelService example renders the copy of the together endpoint's key empty, with the ConfigMap that owns it;
provider-kubernetes creates both; the function (given those Objects as observed) names the owner in the copy, and
once the remote Secret carries it, adds the reference; provider-kubernetes fills the remote Secret from the
control-plane Secret. The key must end up on the "workload cluster" (this same API server) and nowhere in the
Object: not in its spec (provider-kubernetes writes a resolved spec back on create, its issue #223, which the steps
avoid) and not in its status (it runs with --sanitize-secrets). Deleting the Objects, as deleting the composite
does, must take the remote Secret with them (kube-controller-manager's garbage collector runs here)."""

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


def composed_kind(composed: list[dict], kind: str) -> dict:
    [found] = [o for o in composed
               if o.get("kind") == "Object" and o["spec"]["forProvider"]["manifest"]["kind"] == kind]
    return found


def as_crossplane_applies(obj: dict, name: str) -> dict:
    obj = json.loads(json.dumps(obj))
    meta = obj.setdefault("metadata", {})
    meta.pop("generateName", None)
    meta["name"] = name
    meta["namespace"] = "ml-team"
    meta["ownerReferences"] = []
    return obj


class Copy:
    """The key's copy and its owner, applied as Crossplane applies composed resources and rendered again with
    what provider-kubernetes reports of them, the way Crossplane calls the function."""

    def __init__(self, kube: Kube, tmp_path):
        self.kube, self.tmp_path = kube, tmp_path
        suffix = uuid.uuid4().hex[:8]
        self.names = {"Secret": f"secret-copy-{suffix}", "ConfigMap": f"secret-owner-{suffix}"}
        self.rendered = 0

    def observed(self, kind: str) -> dict:
        return self.kube.get(OBJECT_API, "Object", self.names[kind], "ml-team") or {}

    def render(self) -> tuple[dict, dict]:
        """The copy and its owner as composed now; the composite, with its status, is kept in `self.composite`."""
        files = []
        for kind in self.names:
            seen = self.observed(kind)
            if seen:
                self.rendered += 1
                path = self.tmp_path / f"observed-{self.rendered}.yaml"
                path.write_text(yaml.safe_dump(seen))
                files.append(path)
        self.composite, *composed = installs.render(SERVICE, FIXTURE, observed=tuple(files))
        return composed_kind(composed, "Secret"), composed_kind(composed, "ConfigMap")

    def apply(self, copy: dict, owner: dict) -> None:
        self.kube.apply(as_crossplane_applies(owner, self.names["ConfigMap"]))
        self.kube.apply(as_crossplane_applies(copy, self.names["Secret"]))

    def remote(self, kind: str) -> dict:
        return self.observed(kind).get("status", {}).get("atProvider", {}).get("manifest") or {}


def reach_the_cluster(kube: Kube) -> None:
    """The fixture cluster's provider config, pointing back at this API server, and the namespaces."""
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


def provider_key(namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "together-api-key", "namespace": namespace},
            "stringData": {"apiKey": KEY}}


def referenced(kube: Kube, copy: Copy) -> dict:
    """The three steps up to the copy's reference applied (each checked); returns the first step's Object."""
    first, owner = copy.render()
    assert "references" not in first["spec"], "step 1 carries no reference"
    assert "ownerReferences" not in first["spec"]["forProvider"]["manifest"]["metadata"], "no owner known yet"
    assert "managementPolicies" not in owner["spec"], "the owner has every policy: it goes with the composite"
    key = first["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
    copy.apply(first, owner)

    def created() -> dict | None:
        obj = copy.observed("Secret")
        return (copy.remote("Secret") and copy.remote("ConfigMap").get("metadata", {}).get("uid")
                and "finalizer.managedresource.crossplane.io" in obj["metadata"].get("finalizers", []) and obj)

    observed = wait_for("the empty copy and its owner created", created, SECONDS)
    assert observed["status"]["atProvider"]["manifest"]["data"] == {"redacted": None}, "--sanitize-secrets is on"
    owner_uid = copy.remote("ConfigMap")["metadata"]["uid"]

    second, owner = copy.render()
    assert "references" not in second["spec"], "no key before the remote Secret carries its owner"
    [owner_reference] = second["spec"]["forProvider"]["manifest"]["metadata"]["ownerReferences"]
    assert (owner_reference["kind"], owner_reference["uid"]) == ("ConfigMap", owner_uid)
    copy.apply(second, owner)
    wait_for("the remote Secret owned", lambda: any(
        r.get("uid") == owner_uid for r in copy.remote("Secret").get("metadata", {}).get("ownerReferences", [])),
        SECONDS, lambda: json.dumps(copy.remote("Secret")))

    third, owner = copy.render()
    reference = third["spec"]["references"][0]["patchesFrom"]
    assert (reference["namespace"], reference["name"], reference["fieldPath"]) == (
        "ml-team", "together-api-key", "data.apiKey")
    assert third["spec"]["managementPolicies"] == ["Observe", "Update"]
    assert third["metadata"]["annotations"]["crossplane.io/composition-resource-name"] == key
    copy.apply(third, owner)
    return first


def test_a_provider_key_reaches_the_cluster_by_reference_never_enters_the_object_and_goes_with_its_owner(
        platform: Kube, tmp_path):
    kube = platform
    reach_the_cluster(kube)
    kube.apply(provider_key("ml-team"))
    copy = Copy(kube, tmp_path)
    first = referenced(kube, copy)
    remote = first["spec"]["forProvider"]["manifest"]["metadata"]

    def filled() -> dict | None:
        secret = kube.get("v1", "Secret", remote["name"], remote["namespace"]) or {}
        return (secret.get("data") or {}).get("apiKey") == base64.b64encode(KEY.encode()).decode() and secret

    wait_for("the remote Secret filled from the control plane", filled, SECONDS,
             lambda: json.dumps(copy.observed("Secret").get("status")))
    settled = copy.observed("Secret")
    assert "data" not in settled["spec"]["forProvider"]["manifest"], "the resolved key was written into the spec"
    assert settled["status"]["atProvider"]["manifest"]["data"] == {"redacted": None}
    text = json.dumps(settled)
    assert KEY not in text and base64.b64encode(KEY.encode()).decode() not in text

    # Deleting the composite deletes its composed resources: the owner's Object, whose Delete policy deletes the
    # remote ConfigMap, and the copy's, whose policies leave its Secret; the garbage collector deletes that.
    kube.delete(OBJECT_API, "Object", copy.names["ConfigMap"], "ml-team")
    kube.delete(OBJECT_API, "Object", copy.names["Secret"], "ml-team")
    wait_for("the key's copy deleted with its owner",
             lambda: kube.get("v1", "Secret", remote["name"], remote["namespace"]) is None, SECONDS,
             lambda: json.dumps(kube.get("v1", "Secret", remote["name"], remote["namespace"])))
    owner_gone(kube, copy)


def owner_gone(kube: Kube, copy: Copy) -> None:
    """Waits until the remote owner ConfigMap is gone too: a copy made while it is still being deleted would be
    owned by it, and collected with it."""
    _, owner = copy.render()
    meta = owner["spec"]["forProvider"]["manifest"]["metadata"]
    wait_for("the copies' owner ConfigMap deleted", lambda: kube.get("v1", "ConfigMap", meta["name"], meta["namespace"])
             is None, SECONDS)


def test_a_provider_key_made_in_another_namespace_is_named_with_the_providers_refusal(platform: Kube, tmp_path):
    """The endpoint's key made in the wrong namespace: provider-kubernetes refuses the reference, and the
    ModelService says so in the provider's words, naming the field and where the key is read from."""
    kube = platform
    reach_the_cluster(kube)
    kube.ensure_namespace("other-team")
    kube.delete("v1", "Secret", "together-api-key", "ml-team")
    kube.apply(provider_key("other-team"))
    copy = Copy(kube, tmp_path)
    referenced(kube, copy)

    def refused() -> dict | None:
        obj = copy.observed("Secret")
        synced = [c for c in obj.get("status", {}).get("conditions", []) if c["type"] == "Synced"]
        generation = obj["metadata"].get("generation")
        return next((c for c in synced if c["status"] == "False"
                     and c.get("observedGeneration", generation) == generation), None)

    condition = wait_for("provider-kubernetes refusing the reference", refused, SECONDS,
                         lambda: json.dumps(copy.observed("Secret").get("status")))
    copy.render()
    routing = {c["type"]: c for c in copy.composite["status"]["conditions"]}["RoutingReady"]
    assert routing["status"] == "False", routing
    message = routing["message"]
    assert "spec.credential.apiKey.secretRef ml-team/together-api-key" in message, \
        message + json.dumps(copy.observed("Secret"))
    assert f"provider-kubernetes cannot copy it: {condition['message'][:200]}" in message, (message, condition)

    kube.delete(OBJECT_API, "Object", copy.names["ConfigMap"], "ml-team")
    kube.delete(OBJECT_API, "Object", copy.names["Secret"], "ml-team")
    kube.delete("v1", "Secret", "together-api-key", "other-team")
    owner_gone(kube, copy)
