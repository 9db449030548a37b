"""Pods on the real nodes of the test control plane (`controlplane.sh run --kubelets N`): kubelets with containerd,
a bridge network, kube-proxy and CoreDNS (tests/controlplane/nodes.sh).

Every real node carries the label `modelplane.test/kubelet=true` and, unless CONTROLPLANE_KUBELET_TAINTS says
otherwise, the taint `modelplane.test/kubelet=true:NoSchedule`, so a pod lands there only when it asks to (`on_real_node`).
Images are built here from files (images.py) and run with `imagePullPolicy: Never`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import images
from kube import Kube, wait_for

KUBELET_LABEL = {"modelplane.test/kubelet": "true"}
# Tolerates the real nodes' default taint and any a caller gave them.
TOLERATE_ALL = [{"operator": "Exists"}]
# A shell and its tools (busybox: sh, httpd, nc, nslookup, ...).
SHELL_IMAGE = "modelplane.test/busybox:local"
# Container starts, probes and restarts on a loaded 2-core machine: seconds each, bounded generously.
POD_SECONDS = 120


def require_kubelets() -> list[str]:
    """The real nodes' names; fails (never skips) a test that needs them when the control plane has none."""
    names = [n for n in os.environ.get("CONTROLPLANE_KUBELETS", "").split(",") if n]
    if not names:
        pytest.fail("these tests need real nodes: run them under `controlplane.sh run --nodes --kubelets 2`")
    return names


def load_shell_image(scratch: Path) -> str:
    """Builds the busybox image and imports it into every real node's containerd; returns its name."""
    images.load_image(images.build_image(SHELL_IMAGE, images.busybox_files(), entrypoint=["/bin/sh"],
                                         out=scratch / "busybox.tar"))
    return SHELL_IMAGE


def on_real_node(spec: dict) -> dict:
    """`spec` (a PodSpec) placed on a real node."""
    return spec | {"nodeSelector": dict(KUBELET_LABEL), "tolerations": list(TOLERATE_ALL),
                   # busybox's sh as PID 1 ignores SIGTERM: do not wait the default 30 s for it.
                   "terminationGracePeriodSeconds": 1}


def shell_container(name: str, script: str, **fields) -> dict:
    return {"name": name, "image": SHELL_IMAGE, "imagePullPolicy": "Never", "command": ["/bin/sh", "-c", script],
            **fields}


def pod(namespace: str, name: str, containers: list[dict], **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                                           "labels": {"app": name}},
            "spec": on_real_node({"containers": containers, **spec})}


def condition(obj: dict, kind: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c["status"]
    return None


def pod_status(kube: Kube, namespace: str, name: str) -> str:
    status = (kube.get("v1", "Pod", name, namespace) or {}).get("status") or {}
    return str({k: status.get(k) for k in ("phase", "conditions", "containerStatuses")})


def wait_ready(kube: Kube, namespace: str, name: str) -> dict:
    return wait_for(f"pod {namespace}/{name} Ready",
                    lambda: (p := kube.get("v1", "Pod", name, namespace)) and condition(p, "Ready") == "True" and p,
                    POD_SECONDS, lambda: pod_status(kube, namespace, name))


def wait_finished(kube: Kube, namespace: str, name: str) -> dict:
    def finished():
        p = kube.get("v1", "Pod", name, namespace) or {}
        return p if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None
    return wait_for(f"pod {namespace}/{name} finished", finished, POD_SECONDS,
                    lambda: pod_status(kube, namespace, name))


def events(kube: Kube, namespace: str, name: str) -> list[dict]:
    """The events about object `name` (the kubelet records probe failures, pulls and restarts as events)."""
    listing = kube.request("GET", f"/api/v1/namespaces/{namespace}/events",
                           params={"fieldSelector": f"involvedObject.name={name}"}) or {}
    return listing.get("items", [])


def probe_failures(kube: Kube, namespace: str, name: str, probe: str | None = None) -> list[str]:
    """The kubelet's messages for failed probes of pod `name`: of one probe (`Startup`, `Readiness`, `Liveness`), or
    of any."""
    return [e["message"] for e in events(kube, namespace, name) if e["reason"] == "Unhealthy"
            and (probe is None or e["message"].startswith(f"{probe} probe failed"))]


def pod_log(kube: Kube, namespace: str, name: str) -> str:
    """The pod's log, read through kube-apiserver from the kubelet (its client certificate, the kubelet's
    serving certificate checked against the test CA)."""
    response = kube.session.get(f"{kube.server}/api/v1/namespaces/{namespace}/pods/{name}/log", timeout=30)
    assert response.ok, f"log of {namespace}/{name}: HTTP {response.status_code}: {response.text}"
    return response.text
