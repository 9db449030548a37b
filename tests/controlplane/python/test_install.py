"""Modelplane installed the way a user installs it (README, "Install into Crossplane"), as far as this machine
allows, on a control plane of its own (`controlplane.sh run --nodes`, without `--crossplane`):

- the packages are built with the real Crossplane CLI and pushed to a loopback registry (xpkgs.py);
- Crossplane core starts as its Helm chart runs it (step 1): `crossplane core init` with the chart's environment
  (the chart's TLS Secret names, no default activation policy: `--set provider.defaultActivations=null`), then
  `crossplane core start` with the client certificate init made, and the default package runtime (Deployment);
- ImageConfigs rewrite ghcr.io/modelplaneai, xpkg.crossplane.io/crossplane-contrib and xpkg.upbound.io/upbound to
  the loopback registry, as an air-gapped user points Crossplane at a mirror;
- step 2 applies examples/install/01-namespace.yaml and 02-configuration.yaml unchanged, and the package manager
  resolves every dependency from the registry.

Not verbatim, and why: Helm does not run (the chart's values are read from the pinned module, its two containers
become two host processes), so Crossplane runs on the host, not as a pod; webhooks are off (the API server could
not reach a Service here), as the harness's Crossplane runs; the package runtime's Deployments run on a kwok node
(scheduled and marked Ready, no container starts), so no provider's controller runs and Crossplane never dials the
function's pod; every dependency but our three packages and provider-kubernetes is a stand-in
(xpkgs.stand_ins()).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests
import yaml

import xpkgs
from installs import built_component, function_binary
from kube import REPO_ROOT, Kube, crds_dir, load_yaml_documents, wait_for
from simulated_nodes import apply_simulated, node, require_nodes

PKG = "pkg.crossplane.io/v1"
NAMESPACE = "crossplane-system"
# Pulling 16 packages, establishing their CRDs and MRDs and rolling out 15 Deployments on a kwok node.
INSTALL_SECONDS = 300
CORE_START_SECONDS = 120
INIT_ATTEMPTS = 5
# What Crossplane names the Configuration's dependencies it installs (package/README.md, "The function's name").
FUNCTION_OBJECT = "modelplaneai-function-modelplane"


class Core:
    """Crossplane core as its Helm chart runs it (cluster/charts/crossplane/templates/deployment.yaml of the pinned
    module): the init container's `core init`, then `core start`; recorded in CONTROLPLANE_PIDS."""

    def __init__(self, kube: Kube, work: Path):
        self.binary = built_component("crossplane")
        state = Path(os.environ["CONTROLPLANE_STATE"])
        kube.ensure_namespace(NAMESPACE)
        # The chart's ServiceAccount (templates/serviceaccount.yaml): the package runtime copies its image pull
        # Secrets into the Deployments it makes. Its RBAC is not applied: core runs as the harness's admin.
        kube.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": "crossplane", "namespace": NAMESPACE}})
        env = os.environ | {
            "POD_NAMESPACE": NAMESPACE, "POD_SERVICE_ACCOUNT": "crossplane", "ENABLE_WEBHOOKS": "false",
            "TLS_CA_SECRET_NAME": "crossplane-root-ca", "TLS_SERVER_SECRET_NAME": "crossplane-tls-server",
            "TLS_CLIENT_SECRET_NAME": "crossplane-tls-client",
        }
        # The chart's image holds the CRDs at /crds; here they are the vendored release's.
        # A kubelet restarts a failed init container: `core init` applies the CRDs and then uses one of them (the
        # Lock) at once, which fails while the API server does not serve it yet.
        for _ in range(INIT_ATTEMPTS):
            init = subprocess.run([str(self.binary), "core", "init"],
                                  env=env | {"CRDS_PATH": str(crds_dir() / "crossplane")},
                                  capture_output=True, text=True, timeout=CORE_START_SECONDS)
            with (state / "crossplane-init.log").open("a") as log:
                log.write(init.stdout + init.stderr)
            if init.returncode == 0:
                break
            time.sleep(2)
        assert init.returncode == 0, f"crossplane core init failed:\n{init.stderr[-3000:]}"
        # The chart mounts Secret crossplane-tls-client at /tls/client.
        client = work / "tls-client"
        client.mkdir()
        secret = kube.get("v1", "Secret", "crossplane-tls-client", NAMESPACE)
        assert secret and secret.get("data"), "core init made no crossplane-tls-client Secret"
        for key, value in secret["data"].items():
            (client / key).write_bytes(base64.b64decode(value))
        # The chart's emptyDir at /cache/xpkg: the package manager stores what it pulls there.
        (work / "xpkg-cache").mkdir()
        ports = [self._free_port() for _ in range(2)]
        self.log = state / "crossplane-installed.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(self.binary), "core", "start", "--xpkg-cache-dir", str(work / "xpkg-cache"),
                 "--poll-interval", "10s", "--sync-interval", "30s", "--debug"],
                env=env | {"TLS_CLIENT_CERTS_DIR": str(client), "LEADER_ELECTION": "false",
                           "HEALTH_PROBE_PORT": str(ports[0]), "METRICS_PORT": str(ports[1])},
                stdout=log, stderr=subprocess.STDOUT)
        with open(os.environ["CONTROLPLANE_PIDS"], "a") as pids:
            pids.write(f"crossplane-installed {self.process.pid} {self.binary}\n")
        wait_for("Crossplane core ready", lambda: self._ready(ports[0]), CORE_START_SECONDS,
                 lambda: self.log.read_text()[-3000:])

    def _ready(self, port: int) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"crossplane core start exited:\n{self.log.read_text()[-3000:]}")
        try:
            return requests.get(f"http://127.0.0.1:{port}/readyz", timeout=5).ok
        except requests.RequestException:
            return False

    @staticmethod
    def _free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@dataclasses.dataclass
class Installed:
    kube: Kube
    registry: xpkgs.Registry
    cli: xpkgs.Cli
    work: Path
    pushed: dict[str, str]


def condition(obj: dict | None, kind: str) -> dict:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c
    return {}


def is_true(obj: dict | None, *kinds: str) -> bool:
    return all(condition(obj, kind).get("status") == "True" for kind in kinds)


def conditions(obj: dict | None) -> str:
    return yaml.safe_dump(((obj or {}).get("status") or {}).get("conditions"), width=200)


@pytest.fixture(scope="module")
def installed(kube: Kube, tmp_path_factory) -> Installed:
    require_nodes()
    if kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "configurations.pkg.crossplane.io"):
        pytest.fail("Crossplane's CRDs are already installed: run test_install.py on a control plane of its own "
                    "(`controlplane.sh run --nodes`, without --crossplane), as tests/run.sh does")
    work = tmp_path_factory.mktemp("install")
    function_bin = function_binary()
    registry = xpkgs.Registry(work)
    core = None
    try:
        pushed = xpkgs.build_and_push(work, registry, function_bin, function_bin.parent / "modelplane-package")
        # Where the package runtime's pods go: one untainted node kwok runs.
        apply_simulated(kube, [node("install-0", "system", [])])
        core = Core(kube, work)
        for prefix, path in xpkgs.PREFIXES.items():
            kube.apply({"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "ImageConfig",
                        "metadata": {"name": "mirror-" + path},
                        "spec": {"matchImages": [{"type": "Prefix", "prefix": prefix}],
                                 "rewriteImage": {"prefix": f"{registry.address}/{path}"}}})
        # README step 2, verbatim.
        for obj in load_yaml_documents(REPO_ROOT / "examples" / "install" / "01-namespace.yaml",
                                       REPO_ROOT / "examples" / "install" / "02-configuration.yaml"):
            kube.apply(obj)
        yield Installed(kube, registry, xpkgs.Cli(work), work, pushed)
    finally:
        if core:
            core.stop()
        registry.stop()
        # About 0.5 GB (the binaries three times: image tarballs, xpkgs, registry blobs); the logs are in
        # CONTROLPLANE_STATE.
        shutil.rmtree(work, ignore_errors=True)


def dependency_objects() -> dict[str, str]:
    """Package object name -> kind, for every package the Configuration resolves (directly or through a family)."""
    names = {xpkgs.object_name(xpkgs.FUNCTION): "Function", xpkgs.object_name(xpkgs.PROVIDER_EKS): "Provider",
             xpkgs.object_name(xpkgs.PROVIDER_KUBERNETES): "Provider"}
    names |= {xpkgs.object_name(s.package): "Provider" for s in xpkgs.stand_ins()}
    return names


def wait_installed(installed: Installed) -> None:
    """The Configuration and every package it depends on Installed and Healthy."""
    kube = installed.kube
    wait_for("Configuration modelplane Installed and Healthy",
             lambda: is_true(kube.get(PKG, "Configuration", "modelplane"), "Installed", "Healthy"), INSTALL_SECONDS,
             lambda: conditions(kube.get(PKG, "Configuration", "modelplane")))
    wanted = dependency_objects()

    def unhealthy() -> dict[str, str]:
        return {name: conditions(kube.get(PKG, kind, name)) for name, kind in wanted.items()
                if not is_true(kube.get(PKG, kind, name), "Installed", "Healthy")}

    wait_for("every dependency Installed and Healthy", lambda: not unhealthy(), INSTALL_SECONDS,
             lambda: str(unhealthy()))
    # Each was pulled from the loopback registry through the ImageConfigs, at the release pushed there.
    for name, kind in wanted.items():
        obj = kube.get(PKG, kind, name)
        resolved = obj["status"].get("resolvedPackage", "")
        assert resolved.startswith(installed.registry.address + "/"), f"{kind} {name}: resolved {resolved!r}"


def test_configuration_resolves_every_dependency(installed: Installed):
    wait_installed(installed)
    # The package manager's dependency graph holds every package, stand-ins named as the real ones are.
    lock = installed.kube.get("pkg.crossplane.io/v1beta1", "Lock", "lock")
    locked = {p["source"] for p in lock["packages"]}
    wanted = {xpkgs.CONFIGURATION, xpkgs.FUNCTION, xpkgs.PROVIDER_EKS, xpkgs.PROVIDER_KUBERNETES}
    wanted |= {s.package for s in xpkgs.stand_ins()}
    assert locked == wanted, f"locked: {sorted(locked)}"


def test_the_configuration_serves_the_apis_and_calls_the_installed_function(installed: Installed):
    kube = installed.kube
    wait_installed(installed)
    ours = load_yaml_documents(REPO_ROOT / "package" / "configuration" / "xrds")
    for xrd in ours:
        live = kube.get(xrd["apiVersion"], xrd["kind"], xrd["metadata"]["name"])
        assert is_true(live, "Established"), f"XRD {xrd['metadata']['name']}: {conditions(live)}"
    for composition in load_yaml_documents(REPO_ROOT / "package" / "configuration" / "compositions"):
        live = kube.get(composition["apiVersion"], composition["kind"], composition["metadata"]["name"])
        assert live, f"Composition {composition['metadata']['name']} was not installed"
        called = {step["functionRef"]["name"] for step in live["spec"]["pipeline"]}
        assert called == {FUNCTION_OBJECT}, called
    assert kube.get(PKG, "Function", FUNCTION_OBJECT)


def test_the_rest_of_step_2_activates_only_what_the_policy_names(installed: Installed):
    """README step 2 after the Configuration, verbatim: the activation policy, provider-kubernetes' Secret
    redaction (its DeploymentRuntimeConfig and the patch naming it) and the default InferenceClasses."""
    kube = installed.kube
    wait_installed(installed)
    for obj in load_yaml_documents(REPO_ROOT / "package" / "configuration" / "activation",
                                   REPO_ROOT / "examples" / "install" / "06-provider-kubernetes-sanitize-secrets.yaml"):
        kube.apply(obj)
    provider_kubernetes = xpkgs.object_name(xpkgs.PROVIDER_KUBERNETES)
    kube.request("PATCH", kube.path(PKG, "Provider", name=provider_kubernetes),
                 body={"spec": {"runtimeConfigRef": {"name": "provider-kubernetes-sanitize-secrets"}}},
                 content_type="application/merge-patch+json", what=f"patch Provider {provider_kubernetes}")
    mrd = ("apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition")

    def state(name: str) -> str | None:
        return ((kube.get(*mrd, name) or {}).get("spec") or {}).get("state")

    # SafeStart: the policy's two kinds become Active (their CRDs served), every other stays Inactive.
    activated = ("objects.kubernetes.m.crossplane.io", "releases.helm.m.crossplane.io")
    wait_for("the policy's kinds Active", lambda: all(state(n) == "Active" for n in activated), INSTALL_SECONDS,
             lambda: str({n: state(n) for n in activated}))
    for name in activated:
        wait_for(f"CRD {name} Established", lambda: is_true(
            kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name), "Established"), INSTALL_SECONDS)
    others = {m["metadata"]["name"]: m["spec"].get("state") for m in kube.list(*mrd)
              if m["metadata"]["name"] not in activated}
    assert any(name.endswith(".eks.m.modelplane.ai") for name in others), sorted(others)
    assert set(others.values()) == {"Inactive"}, others

    def sanitized() -> bool:
        deployments = [d for d in kube.list("apps/v1", "Deployment", NAMESPACE)
                       if d["metadata"]["name"].startswith(provider_kubernetes + "-")]
        return bool(deployments) and all(
            {"name": "SANITIZE_SECRETS", "value": "true"} in (c.get("env") or [])
            for d in deployments for c in d["spec"]["template"]["spec"]["containers"])

    wait_for("provider-kubernetes' Deployment redacting Secrets", sanitized, INSTALL_SECONDS)
    for obj in load_yaml_documents(REPO_ROOT / "package" / "configuration" / "classes"):
        kube.apply(obj)


def test_the_function_runs_from_our_image_with_certificates_crossplane_issued(installed: Installed):
    """The package runtime's Deployment of the Function runs the runtime image embedded in our package, pulled
    through the ImageConfig, behind the Service Crossplane dials with the certificate it issued itself. (kwok
    marks its pod Ready; no container starts here.)"""
    kube = installed.kube
    wait_installed(installed)
    revisions = [r for r in kube.list(PKG, "FunctionRevision")
                 if r["metadata"]["labels"].get("pkg.crossplane.io/package") == FUNCTION_OBJECT]
    assert len(revisions) == 1, [r["metadata"]["name"] for r in revisions]
    revision = revisions[0]
    status = revision["status"]
    assert status["capabilities"] == ["composition"], status
    assert {"name": "mirror-modelplaneai", "reason": "RewriteImage"} in status["appliedImageConfigRefs"], status
    assert status["endpoint"] == f"dns:///{FUNCTION_OBJECT}.{NAMESPACE}:9443", status
    deployment = kube.get("apps/v1", "Deployment", revision["metadata"]["name"], NAMESPACE)
    assert deployment and deployment["status"].get("availableReplicas") == 1, deployment and deployment["status"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"{installed.registry.address}/modelplaneai/function-modelplane:{xpkgs.VERSION}"
    assert kube.get("v1", "Service", FUNCTION_OBJECT, NAMESPACE), f"no Service {FUNCTION_OBJECT}"
    # Crossplane issues the function's serving certificate itself, from the root CA `core init` made.
    secret = kube.get("v1", "Secret", status["tlsServerSecretName"], NAMESPACE)
    assert secret and {"tls.crt", "tls.key", "ca.crt"} <= set(secret["data"]), secret and list(secret["data"])
    root = kube.get("v1", "Secret", "crossplane-root-ca", NAMESPACE)
    assert base64.b64decode(secret["data"]["ca.crt"]) == base64.b64decode(root["data"]["tls.crt"])


def test_an_unpullable_dependency_is_named_and_nothing_installed_moves(installed: Installed):
    kube = installed.kube
    wait_installed(installed)
    before = kube.get(PKG, "Function", FUNCTION_OBJECT)["metadata"]["resourceVersion"]
    root = installed.work / "broken"
    root.mkdir()
    (root / "crossplane.yaml").write_text(yaml.safe_dump({
        "apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Configuration", "metadata": {"name": "broken"},
        "spec": {"dependsOn": [{"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
                                "package": "ghcr.io/modelplaneai/function-missing", "version": ">=v0.1.0"}]}}))
    xpkg = installed.cli.build(root, installed.work / "broken.xpkg")
    installed.cli.push(xpkg, f"{installed.registry.address}/modelplaneai/broken:{xpkgs.VERSION}")
    kube.apply({"apiVersion": PKG, "kind": "Configuration", "metadata": {"name": "broken"},
                "spec": {"package": f"ghcr.io/modelplaneai/broken:{xpkgs.VERSION}"}})

    def said() -> str | None:
        for obj in [kube.get(PKG, "Configuration", "broken")] + kube.list(PKG, "ConfigurationRevision"):
            for c in ((obj or {}).get("status") or {}).get("conditions") or []:
                if c.get("status") == "False" and "function-missing" in c.get("message", ""):
                    return c["message"]
        return None

    message = wait_for("Crossplane naming the dependency it cannot pull", said, INSTALL_SECONDS,
                       lambda: conditions(kube.get(PKG, "Configuration", "broken")))
    assert 'cannot resolve package dependencies: missing dependencies: "ghcr.io/modelplaneai/function-missing"' \
        in message, message
    assert kube.get(PKG, "Function", FUNCTION_OBJECT)["metadata"]["resourceVersion"] == before
    assert is_true(kube.get(PKG, "Configuration", "modelplane"), "Installed", "Healthy")


def test_a_package_of_the_wrong_kind_is_refused_by_name(installed: Installed):
    kube = installed.kube
    wait_installed(installed)
    kube.apply({"apiVersion": PKG, "kind": "Provider", "metadata": {"name": "wrong-kind"},
                "spec": {"package": f"{xpkgs.FUNCTION}:{xpkgs.VERSION}"}})

    def said() -> str | None:
        objects = [kube.get(PKG, "Provider", "wrong-kind")] + [
            r for r in kube.list(PKG, "ProviderRevision")
            if r["metadata"]["labels"].get("pkg.crossplane.io/package") == "wrong-kind"]
        for obj in objects:
            for c in ((obj or {}).get("status") or {}).get("conditions") or []:
                if c.get("status") == "False" and "package meta type is not Provider" in c.get("message", ""):
                    return c["message"]
        return None

    # Crossplane's revision reconciler refuses it in these words (and logs them).
    wait_for("Crossplane refusing a Function package installed as a Provider", said, INSTALL_SECONDS,
             lambda: conditions(kube.get(PKG, "Provider", "wrong-kind")))
    assert is_true(kube.get(PKG, "Function", FUNCTION_OBJECT), "Installed", "Healthy")
