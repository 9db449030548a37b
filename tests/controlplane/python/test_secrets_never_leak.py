"""No secret leaves its Secret: after the suite's other tests (this file runs last, by name, and reads what they left),
every private value any Secret on this API server holds, and the control plane's own client key, appears in no log of
the function, Crossplane or provider-kubernetes, in no Event, and in no object of Modelplane's, Crossplane's,
provider-kubernetes' or provider-helm's kinds, status or spec. The suite planted such values on purpose: the caller
and provider keys the secret-copy test copies to a "workload cluster", and the kubeconfig Secret the Crossplane test
points provider-kubernetes at.

Public material in a Secret (`ca.crt`, `tls.crt`, a kubeconfig's CA and certificates) is not a secret and may be
copied anywhere; values shorter than 12 characters are too common to tell apart from ordinary text."""

from __future__ import annotations

import base64
import json
import os
import uuid
from pathlib import Path

import yaml
from kube import Kube

PUBLIC_KEYS = {"ca.crt", "tls.crt", "ca-bundle.crt", "service-ca.crt"}
KUBECONFIG_SECRET_FIELDS = ("client-key-data", "token", "password")
MIN_LENGTH = 12
LOGS = ("modelplane-function", "crossplane", "provider-kubernetes")
GROUPS = (
    "modelplane.ai",
    "eks.m.modelplane.ai",
    "apiextensions.crossplane.io",
    "pkg.crossplane.io",
    "protection.crossplane.io",
    "kubernetes.crossplane.io",
    "kubernetes.m.crossplane.io",
    "helm.crossplane.io",
    "helm.m.crossplane.io",
)


def kubeconfig_secrets(text: str) -> set[str]:
    """The private fields of a kubeconfig, as written and as their base64 data decodes."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return set()
    found = set()
    for user in (config or {}).get("users") or [] if isinstance(config, dict) else []:
        fields = (user or {}).get("user") or {}
        for field in KUBECONFIG_SECRET_FIELDS:
            value = fields.get(field)
            if isinstance(value, str):
                found.add(value)
                if field.endswith("-data"):
                    found.add(base64.b64decode(value).decode("utf-8", "ignore"))
    return found


def planted(kube: Kube) -> set[str]:
    """Every private value of every Secret, in its stored (base64) and its decoded form, and the harness's key."""
    values: set[str] = set()
    for secret in kube.list("v1", "Secret"):
        for key, encoded in (secret.get("data") or {}).items():
            if key in PUBLIC_KEYS:
                continue
            decoded = base64.b64decode(encoded).decode("utf-8", "ignore")
            if "users:" in decoded and "clusters:" in decoded:
                values |= kubeconfig_secrets(decoded)
            else:
                values |= {encoded, decoded}
    key = Path(os.environ["CONTROLPLANE_STATE"]) / "pki" / "admin.key"
    values.add(key.read_text())
    # A PEM key is matched by its body: a log that wrapped or re-indented it still carries the body's lines.
    lines = {line for value in values for line in value.splitlines()
             if len(line) >= 40 and not line.startswith("-----")}
    return {v.strip() for v in values | lines if len(v.strip()) >= MIN_LENGTH}


def objects_of_our_kinds(kube: Kube) -> list[dict]:
    found = []
    for group in (kube.request("GET", "/apis") or {}).get("groups", []):
        if group["name"] not in GROUPS:
            continue
        version = group["preferredVersion"]["groupVersion"]
        for resource in (kube.request("GET", f"/apis/{version}") or {}).get("resources", []):
            if "/" in resource["name"] or "list" not in resource.get("verbs", []):
                continue
            found += (kube.request("GET", f"/apis/{version}/{resource['name']}") or {}).get("items", [])
    return found


def leaks(kube: Kube) -> list[str]:
    """Where a planted value appears, one line each."""
    secrets = planted(kube)
    assert secrets, "nothing to look for: the control plane holds no Secret and no key"
    state = Path(os.environ["CONTROLPLANE_STATE"])
    places: dict[str, str] = {}
    for name in LOGS:
        log = state / f"{name}.log"
        if log.is_file():
            places[f"the {name} log"] = log.read_text(errors="replace")
    for event in kube.list("v1", "Event"):
        meta = event.get("metadata") or {}
        places[f"Event {meta.get('namespace')}/{meta.get('name')}"] = json.dumps(event)
    for obj in objects_of_our_kinds(kube):
        meta = obj.get("metadata") or {}
        where = f"{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}"
        places[where] = json.dumps({"spec": obj.get("spec"), "status": obj.get("status")})
    assert "the modelplane-function log" in places, sorted(places)[:5]
    return sorted(f"{where}: a value of {len(secret)} characters starting {secret[:4]!r}"
                  for where, text in places.items() for secret in secrets if secret in text)


def test_no_planted_secret_appears_in_a_log_an_event_or_a_status(kube):
    found = leaks(kube)
    assert not found, "secrets left their Secrets:\n" + "\n".join(found)


def test_the_check_finds_a_secret_that_did_leave(kube):
    """The check itself: a value planted in a Secret and repeated in an Event is reported, naming the Event."""
    namespace, value = "leak-check", f"sk-leak-check-{uuid.uuid4().hex}"
    kube.ensure_namespace(namespace)
    kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "planted", "namespace": namespace},
                "stringData": {"apiKey": value}})
    kube.apply({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "careless", "namespace": namespace},
                "involvedObject": {"kind": "Secret", "name": "planted", "namespace": namespace},
                "reason": "Careless", "message": f"copied key {value}", "type": "Warning"})
    try:
        found = leaks(kube)
        assert any(line.startswith(f"Event {namespace}/careless:") for line in found), found
    finally:
        kube.delete("v1", "Event", "careless", namespace)
        kube.delete("v1", "Secret", "planted", namespace)
