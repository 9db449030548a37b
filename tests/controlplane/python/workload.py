"""What the Crossplane-in-the-loop tests play and read: a kubeconfig that points the "workload cluster" back at
this API server, the composed objects of a composite, and the two controllers that cannot run here but whose
results the composition waits for (provider-helm installing a chart, trust-manager publishing the gateway CA).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from kube import REPO_ROOT, ApiError, Kube

API = "modelplane.ai/v1alpha1"
OBJECT_API = "kubernetes.m.crossplane.io/v1alpha1"
RELEASE_API = "helm.m.crossplane.io/v1beta1"


def conditions(obj: dict | None) -> dict[str, str]:
    return {c.get("type"): c.get("status") for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def resource_refs(composite: dict | None) -> list[dict]:
    """What Crossplane lists as composed by `composite` (`spec.crossplane.resourceRefs`), each with the namespace
    it lives in: a namespaced composite's references leave it out, as it is the composite's own."""
    namespace = ((composite or {}).get("metadata") or {}).get("namespace")
    refs = (((composite or {}).get("spec") or {}).get("crossplane") or {}).get("resourceRefs") or []
    return [ref | {"namespace": ref.get("namespace") or namespace} for ref in refs]


def kubeconfig_pointing_back(kube: Kube) -> str:
    """What an Existing InferenceCluster's secret holds: here, a kubeconfig for this very API server."""
    pki = Path(os.environ["CONTROLPLANE_STATE"]) / "pki"

    def b64(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    return f"""apiVersion: v1
kind: Config
clusters:
- name: workload
  cluster: {{server: "{kube.server}", certificate-authority-data: {b64("ca.crt")}}}
users:
- name: provider-kubernetes
  user: {{client-certificate-data: {b64("admin.crt")}, client-key-data: {b64("admin.key")}}}
contexts:
- name: workload
  context: {{cluster: workload, user: provider-kubernetes}}
current-context: workload
"""


def composed_by(kube: Kube, api_version: str, kind: str, composite: str) -> list[dict]:
    return [o for o in kube.list(api_version, kind)
            if ((o.get("metadata") or {}).get("labels") or {}).get("crossplane.io/composite") == composite]


def play_provider_helm(kube: Kube, composite: str | None) -> list[dict]:
    """Marks the composite's Releases (every composite's, for None: one list for a whole fleet) Ready and Synced, as
    provider-helm reports an installed chart, after creating the namespace each installs into, as installing it
    would."""
    releases = composed_by(kube, RELEASE_API, "Release", composite) if composite else kube.list(RELEASE_API, "Release")
    made: set[str] = set()
    for release in releases:
        if conditions(release).get("Ready") == "True":
            continue  # already "installed" (its namespace made): patching again would only add watch events
        if release["metadata"].get("deletionTimestamp"):
            continue  # its composite is going: nothing installs it now
        namespace = release["spec"]["forProvider"].get("namespace")
        if namespace and namespace not in made:
            kube.ensure_namespace(namespace)
            made.add(namespace)
        try:
            kube.patch_status(release, {"conditions": [
                {"type": "Ready", "status": "True", "reason": "Available",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Synced", "status": "True", "reason": "ReconcileSuccess",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
            ]})
        except ApiError as error:
            if error.status != 404:  # deleted since the list (another test's composite going): nothing to play
                raise
    return releases


def play_trust_manager(kube: Kube) -> None:
    """Writes the ConfigMap the cluster gateway CA's Bundle targets, as trust-manager does once cert-manager has
    issued the CA, with a CA certificate whose key was never kept."""
    kube.ensure_namespace("modelplane-system")
    kube.apply({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "modelplane-cluster-gateway-ca", "namespace": "modelplane-system"},
                "data": {"ca.crt": (REPO_ROOT / "tests" / "fixtures" / "tls" / "cluster-gateway-ca.pem").read_text()}})


def tolerating(cluster: dict) -> list[dict]:
    """Tolerations of every taint the cluster puts on its nodes, as a deployment meant for it carries them."""
    return [{"key": t["key"], "operator": "Equal", "value": t["value"]} for t in cluster["spec"].get("taints", [])]


def exists(kube: Kube, obj: dict) -> bool:
    meta = obj.get("metadata") or {}
    return kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")) is not None
