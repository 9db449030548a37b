"""What the control-plane tests install: the upstream CRDs, provider-eks' CRDs, and our Configuration (XRDs,
Compositions, default classes, activation policy), plus `modelplane-function render` of the examples."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from kube import REPO_ROOT, Kube, crds_dir, describe, load_yaml_documents, wait_for

# One version of each upstream CRD (a directory holds several releases of some): the ones the serving stacks pin.
UPSTREAM_CRDS = (
    "lws-leaderworkerset.yaml",
    "grove-podcliqueset.yaml",
    "grove-podclique.yaml",
    "grove-podcliquescalinggroup.yaml",
    "grove-podgang.yaml",
    "kai-queue.yaml",
    "kai-podgroup.yaml",
    "modelexpress-crds.yaml",
    "crossplane",
    "provider-kubernetes",
    "provider-helm",
    "routing/gateway-api/v1.5.1",
    "routing/gaie/v1.6.0",
    "routing/gaie/v1.5.0",
    "routing/gaie/v0.5.1",
    "routing/envoy-gateway/v1.8.1",
    "routing/envoy-ai-gateway/v0.7.0",
    "cert-manager/v1.17.2",
    "trust-manager/v0.25.0",
    "prometheus-operator/v0.82.2",
    "keda/v2.20.2",
    "metallb/v0.16.1",
)
PROVIDER_EKS_CRDS = REPO_ROOT / "package" / "provider-eks" / "crds"
CONFIGURATION = REPO_ROOT / "package" / "configuration"
ESTABLISH_TIMEOUT_SECONDS = 120


CONTROLPLANE = REPO_ROOT / "tests" / "controlplane"


def built_component(name: str) -> Path:
    """A binary `controlplane.sh build NAME` makes (or reuses when nothing it is built from changed), e.g. the test
    peers `mock-engine` and `dra-driver`."""
    done = subprocess.run(["bash", str(CONTROLPLANE / "controlplane.sh"), "build", name], capture_output=True,
                          text=True, timeout=2400)
    assert done.returncode == 0, f"controlplane.sh build {name} failed:\n{done.stderr}"
    return CONTROLPLANE / ".bin" / name


def stop_process(process: subprocess.Popen, grace: float = 10) -> None:
    """Stops a process a test started: SIGTERM, then SIGKILL after GRACE seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(grace)


def function_binary() -> Path:
    path = Path(os.environ.get("MODELPLANE_FUNCTION_BIN", ""))
    if not path.is_file():
        pytest.fail("MODELPLANE_FUNCTION_BIN must name the built modelplane-function binary")
    return path


# `render --until-ready` exits so when the composite settles without becoming Ready (a replica left unplaced).
NOT_READY_EXIT = 4


def render(xr: Path, *required: Path, observed: tuple[Path, ...] = (), until_ready: bool = False,
           settled_not_ready_ok: bool = False, flags: tuple[str, ...] = ()) -> list[dict]:
    """`modelplane-function render XR --required ... --observed ... [--until-ready] FLAGS...`: the composite (first
    document), then what it composes. With `settled_not_ready_ok`, a composite that settles not Ready is an
    answer, not a failure."""
    argv = [str(function_binary()), "render", str(xr)]
    for path in required:
        argv += ["--required", str(path)]
    for path in observed:
        argv += ["--observed", str(path)]
    if until_ready:
        argv.append("--until-ready")
    argv += flags
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    accepted = (0, NOT_READY_EXIT) if settled_not_ready_ok else (0,)
    assert done.returncode in accepted, f"render {xr} failed ({done.returncode}):\n{done.stderr}{done.stdout}"
    return [doc for doc in yaml.load_all(done.stdout, Loader=_JsonLikeLoader) if doc]


class _JsonLikeLoader(yaml.SafeLoader):
    """YAML 1.1 reads an unquoted `1970-01-01T00:00:00Z` as a datetime, which turns into a different string on its
    way to the API server; the function composed a string (a CRD's defaults carry such values), so keep it one."""


_JsonLikeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def crd_files() -> list[Path]:
    """The pinned upstream CRDs, every upjet provider's vendored CRDs (`provider-upjet-<cloud>/`), and
    provider-eks'."""
    root = crds_dir()
    upjet = sorted(path for path in root.glob("provider-upjet-*") if path.is_dir())
    return [root / entry for entry in UPSTREAM_CRDS] + upjet + [PROVIDER_EKS_CRDS]


def is_established(kube: Kube, name: str) -> bool:
    crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name) or {}
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def rendered_as_helm_would(crd: dict) -> dict:
    """cert-manager's CRDs carry its chart's templates in label values (`{{ .Release.Name }}`), which no API
    server accepts; its chart renders them. Labels and annotations are not part of the schema under test, so
    templated ones are dropped."""
    meta = crd["metadata"]
    if not any("{{" in str(v) for key in ("labels", "annotations") for v in (meta.get(key) or {}).values()):
        return crd
    crd = copy.deepcopy(crd)
    for key in ("labels", "annotations"):
        kept = {k: v for k, v in (crd["metadata"].get(key) or {}).items() if "{{" not in str(v)}
        crd["metadata"].pop(key, None)
        if kept:
            crd["metadata"][key] = kept
    return crd


def install_crds(kube: Kube) -> list[str]:
    names = []
    for crd in load_yaml_documents(*crd_files()):
        assert crd.get("kind") == "CustomResourceDefinition", f"not a CRD: {describe(crd)}"
        if (crd["spec"].get("conversion") or {}).get("strategy") == "Webhook":
            # Only the running provider can convert; controlplane.sh installed this CRD pointing at it.
            live = kube.get(crd["apiVersion"], crd["kind"], crd["metadata"]["name"])
            assert live, (f"{crd['metadata']['name']} needs its provider's conversion webhook: "
                          "run controlplane.sh crossplane")
            crd = copy.deepcopy(crd)
            crd["spec"]["conversion"] = live["spec"]["conversion"]
        kube.apply(rendered_as_helm_would(crd))
        names.append(crd["metadata"]["name"])
    for name in names:
        wait_for(f"CRD {name} Established", lambda: is_established(kube, name), ESTABLISH_TIMEOUT_SECONDS)
    return names


def install_workload_crds(kube: Kube) -> list[str]:
    """The CRDs a workload cluster holds (the serving stacks', routing, certificates, monitoring, autoscaling), on
    an API server that is one: none of the control plane's (Crossplane's, its providers')."""
    control_plane = {"crossplane", "provider-kubernetes", "provider-helm"}
    files = [crds_dir() / entry for entry in UPSTREAM_CRDS if entry not in control_plane]
    names = []
    for crd in load_yaml_documents(*files):
        assert crd.get("kind") == "CustomResourceDefinition", f"not a CRD: {describe(crd)}"
        kube.apply(rendered_as_helm_would(crd))
        names.append(crd["metadata"]["name"])
    for name in names:
        wait_for(f"CRD {name} Established", lambda: is_established(kube, name), ESTABLISH_TIMEOUT_SECONDS)
    return names


def install_configuration(kube: Kube) -> None:
    """Our XRDs (Crossplane generates their CRDs), Compositions, default classes and activation policy, applied
    with strict field validation."""
    xrds = load_yaml_documents(CONFIGURATION / "xrds")
    for xrd in xrds:
        kube.apply(xrd)
    for xrd in xrds:
        name = xrd["metadata"]["name"]
        wait_for(f"Crossplane to establish the CRD of XRD {name}", lambda: is_established(kube, name),
                 ESTABLISH_TIMEOUT_SECONDS,
                 lambda: str((kube.get(xrd["apiVersion"], xrd["kind"], name) or {}).get("status")))
    for doc in load_yaml_documents(CONFIGURATION / "compositions", CONFIGURATION / "activation"):
        kube.apply(doc)
