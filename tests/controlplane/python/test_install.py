"""Modelplane installed the way a user installs it (README, "Install into Crossplane"), with Crossplane and the
packages' runtimes as pods on a real node, on a control plane of its own (`controlplane.sh run --kubelets 1`,
without --crossplane):

- the packages are built with the real Crossplane CLI and pushed to a registry on the first node's bridge address
  (xpkgs.py), which the Crossplane pod and the node's containerd both reach (containerd told by a hosts.toml that
  it speaks plain HTTP);
- step 1: Crossplane is its Helm chart, rendered from the pinned module (cluster/charts/crossplane) by Helm's own
  engine (`render-chart`, as `helm install --dry-run` renders it) with the step's `provider.defaultActivations=null`
  and only what this machine needs (chart_values), and applied: core and its RBAC manager run in pods from an image
  of the Crossplane binary the harness builds, laid out as Crossplane's release image is (the binary on PATH, its
  CRDs at /crds, its webhook configurations at /webhookconfigurations, user 65532), under the chart's own
  ServiceAccounts and RBAC, with its Services, certificates and admission webhooks;
- ImageConfigs rewrite ghcr.io/modelplaneai, xpkg.crossplane.io/crossplane-contrib and xpkg.upbound.io/upbound to
  the registry, as an air-gapped user points Crossplane at a mirror;
- step 2 applies examples/install/01-namespace.yaml and 02-configuration.yaml unchanged, and the package manager
  resolves every dependency from the registry; the Function's and provider-kubernetes' Deployments, made by
  Crossplane's package runtime, start on the real node from the images it resolved (pulled by containerd), and
  Crossplane, in its pod, calls the function through its Service with the certificates it issued itself;
- through that installation, the Existing example cluster (its kubeconfig pointing back at this API server through
  the `kubernetes` Service) and a ModelDeployment become Ready, provider-kubernetes applying and observing what the
  function composes.

Not verbatim, and why: Crossplane's image is built here and imported into the node's containerd under the chart's
default repository (no registry holding it is reachable), so the chart is given the release's tag (a released
chart's appVersion; the module's says 0.0.1); the real node is tainted so that only pods that ask land on it, so
Crossplane's pods get its node selector and toleration (chart values), and so do the Function's and
provider-kubernetes' (a DeploymentRuntimeConfig each, named by runtimeConfigRef as step 2 does for
provider-kubernetes); provider-kubernetes polls every 10 s, as the harness runs it, instead of its default 10 min,
so that what it applies is seen Ready within a test's bounds. Every other dependency runs on a node kwok
simulates, where its pod is Ready without starting: provider-eks (idle until an EKS cluster exists) and the
stand-ins of xpkgs.stand_ins(), packages under the real names carrying vendored CRDs and no controller.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import images
import xpkgs
from installs import built_component, function_binary, install_workload_crds
from kube import REPO_ROOT, Kube, describe, load_yaml_documents, wait_for
from real_nodes import KUBELET_LABEL, TOLERATE_ALL, pod_status, require_kubelets
from simulated_nodes import apply_simulated, cluster_nodes, device_classes, node
from test_scheduling import (all_engines_running, apply_until_serving, cache_volume, engine_pods, existing_cluster,
                             standalone_deployment)
from workload import API, OBJECT_API, composed_by, kubeconfig_pointing_back

PKG = "pkg.crossplane.io/v1"
NAMESPACE = "crossplane-system"
# Pulling 16 packages, establishing their CRDs and MRDs and rolling out 15 Deployments.
INSTALL_SECONDS = 300
# Pulling an image (the function's debug binary is about 100 MB) and starting a pod on a loaded 2-core machine.
POD_SECONDS = 300
RENDER_SECONDS = 120
# What Crossplane names the Configuration's dependencies it installs (package/README.md, "The function's name").
FUNCTION_OBJECT = "modelplaneai-function-modelplane"
CROSSPLANE_MODULE = "github.com/crossplane/crossplane/v2"
# The image Crossplane's chart runs by default (its values.yaml, image.repository).
CROSSPLANE_REPOSITORY = "xpkg.crossplane.io/crossplane/crossplane"
# The real node's label and taint, for the pods that must run there.
ON_REAL_NODE = {"nodeSelector": dict(KUBELET_LABEL), "tolerations": list(TOLERATE_ALL)}
PROVIDER_KUBERNETES_CONFIG = "provider-kubernetes-sanitize-secrets"
FUNCTION_CONFIG = "function-modelplane-on-real-node"


def crossplane_module() -> tuple[Path, str]:
    """The pinned Crossplane module's directory and release (tests/controlplane/modules/crossplane)."""
    listing = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", CROSSPLANE_MODULE],
                             cwd=REPO_ROOT / "tests" / "controlplane" / "modules" / "crossplane",
                             capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, f"go list {CROSSPLANE_MODULE}: {listing.stderr}"
    directory, version = listing.stdout.split()
    return Path(directory), version


def crossplane_image(module: Path, version: str, out: Path) -> str:
    """Crossplane's image from the binary controlplane.sh built, laid out as the release image is; imported into
    every real node's containerd. Returns its name."""
    name = f"{CROSSPLANE_REPOSITORY}:{version}"
    files: dict[str, images.FileSource] = dict(images.with_libraries("/usr/local/bin/crossplane",
                                                                      built_component("crossplane")))
    for directory in ("crds", "webhookconfigurations"):
        for path in sorted((module / "cluster" / directory).glob("*.yaml")):
            files[f"/{directory}/{path.name}"] = path.read_bytes()
    images.load_image(images.build_image(name, files, entrypoint=["crossplane"], user="65532", out=out))
    return name


def chart_values(version: str) -> dict:
    """The values this install gives Crossplane's chart, each named in the module's docstring."""
    return {
        "image": {"tag": version},
        # README step 1: `--set provider.defaultActivations=null`.
        "provider": {"defaultActivations": None},
        **ON_REAL_NODE,
        "rbacManager": dict(ON_REAL_NODE),
    }


def render_chart(module: Path, values: dict, kube: Kube, work: Path) -> list[dict]:
    """The chart's manifests as `helm install crossplane -n crossplane-system` renders them, for this API
    server's Kubernetes version."""
    values_file = work / "crossplane-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    version = kube.request("GET", "/version")["gitVersion"]
    chart = module / "cluster" / "charts" / "crossplane"
    done = subprocess.run([str(built_component("render-chart")), "-chart", str(chart), "-values", str(values_file),
                           "-release", "crossplane", "-namespace", NAMESPACE, "-kube-version", version],
                          capture_output=True, text=True, timeout=RENDER_SECONDS)
    assert done.returncode == 0, f"render-chart crossplane failed:\n{done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def trust_plain_http(registry: xpkgs.Registry) -> None:
    """Tells every real node's containerd that the registry speaks plain HTTP (its hosts.toml, which containerd
    reads at each pull: nodes.sh points it at the node's certs.d)."""
    state = Path(os.environ["CONTROLPLANE_STATE"])
    for name in require_kubelets():
        hosts = state / name / "certs.d" / registry.address
        hosts.mkdir(parents=True, exist_ok=True)
        (hosts / "hosts.toml").write_text(f'server = "http://{registry.address}"\n\n'
                                          f'[host."http://{registry.address}"]\n'
                                          '  capabilities = ["pull", "resolve"]\n')


def on_real_node(runtime_config: dict) -> dict:
    """A DeploymentRuntimeConfig whose pods also carry the real node's selector and toleration."""
    config = copy.deepcopy(runtime_config)
    template = config["spec"]["deploymentTemplate"]["spec"].setdefault("template", {})
    template.setdefault("spec", {}).update(copy.deepcopy(ON_REAL_NODE))
    template["spec"].setdefault("containers", [{"name": "package-runtime"}])
    return config


def deployment_pods(kube: Kube, name: str) -> list[dict]:
    """The pods of Deployment `name` in crossplane-system that are not going away."""
    deployment = kube.get("apps/v1", "Deployment", name, NAMESPACE)
    if not deployment:
        return []
    labels = deployment["spec"]["selector"]["matchLabels"]
    return [p for p in kube.list("v1", "Pod", NAMESPACE) if not p["metadata"].get("deletionTimestamp")
            and labels.items() <= (p["metadata"].get("labels") or {}).items()]


def running_on_real_node(kube: Kube, name: str) -> dict | None:
    """The one pod of Deployment `name`, once it is Ready on a real node with every container started."""
    pods = deployment_pods(kube, name)
    if len(pods) != 1 or not pods[0]["spec"].get("nodeName", "").startswith("kubelet-"):
        return None
    statuses = pods[0]["status"].get("containerStatuses") or []
    if not (statuses and all(s.get("started") for s in statuses) and is_true(pods[0], "Ready")):
        return None
    return pods[0]


def describe_pods(kube: Kube, name: str) -> str:
    return str([pod_status(kube, NAMESPACE, p["metadata"]["name"]) for p in deployment_pods(kube, name)]) or \
        f"no pods of Deployment {name}"


def wait_on_real_node(kube: Kube, name: str) -> dict:
    return wait_for(f"Deployment {name}'s pod Ready on a real node", lambda: running_on_real_node(kube, name),
                    POD_SECONDS, lambda: describe_pods(kube, name))


def stop_pods(kube: Kube) -> None:
    """Deletes Crossplane's Deployments, then the package runtime's (Crossplane would make them again), and waits
    until no pod of theirs is left: the harness's `down` then has none to wait for on the real node."""
    chart = ("crossplane", "crossplane-rbac-manager")
    for name in chart:
        kube.delete("apps/v1", "Deployment", name, NAMESPACE)

    def crossplane_pods() -> list[str]:
        return [p["metadata"]["name"] for p in kube.list("v1", "Pod", NAMESPACE)
                if (p["metadata"].get("labels") or {}).get("app") in chart]

    wait_for("Crossplane's pods gone", lambda: not crossplane_pods(), POD_SECONDS, lambda: str(crossplane_pods()))
    for deployment in kube.list("apps/v1", "Deployment", NAMESPACE):
        kube.delete("apps/v1", "Deployment", deployment["metadata"]["name"], NAMESPACE)
    wait_for(f"every pod of {NAMESPACE} gone", lambda: not kube.list("v1", "Pod", NAMESPACE), POD_SECONDS,
             lambda: str([p["metadata"]["name"] for p in kube.list("v1", "Pod", NAMESPACE)]))


@dataclasses.dataclass
class Installed:
    kube: Kube
    registry: xpkgs.Registry
    cli: xpkgs.Cli
    work: Path
    pushed: dict[str, str]
    chart: list[dict]
    crossplane_image: str


def condition(obj: dict | None, kind: str) -> dict:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c
    return {}


def is_true(obj: dict | None, *kinds: str) -> bool:
    return all(condition(obj, kind).get("status") == "True" for kind in kinds)


def said_false(objects: list[dict | None], words: str) -> str | None:
    """The message of the first condition of `objects` that is False and contains `words`."""
    for obj in objects:
        for c in ((obj or {}).get("status") or {}).get("conditions") or []:
            if c.get("status") == "False" and words in c.get("message", ""):
                return c["message"]
    return None


def conditions(obj: dict | None) -> str:
    return yaml.safe_dump(((obj or {}).get("status") or {}).get("conditions"), width=200)


@pytest.fixture(scope="module")
def installed(kube: Kube, tmp_path_factory) -> Installed:
    require_kubelets()
    if kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "configurations.pkg.crossplane.io"):
        pytest.fail("Crossplane's CRDs are already installed: run test_install.py on a control plane of its own "
                    "(`controlplane.sh run --kubelets 1`, without --crossplane), as tests/run.sh does")
    work = tmp_path_factory.mktemp("install")
    module, version = crossplane_module()
    function_bin = function_binary()
    # The first node's bridge address: pods reach it, and so does this machine (the nodes' containerd, the CLI).
    registry = xpkgs.Registry(work, os.environ["CONTROLPLANE_CLUSTER_DNS"])
    try:
        trust_plain_http(registry)
        pushed = xpkgs.build_and_push(work, registry, function_bin, function_bin.parent / "modelplane-package")
        image = crossplane_image(module, version, work / "crossplane.tar")
        # Where the packages that cannot run here go: one untainted node kwok runs.
        apply_simulated(kube, [node("install-0", "system", [])])
        # README step 1: `helm install crossplane ... -n crossplane-system --create-namespace`.
        kube.ensure_namespace(NAMESPACE)
        chart = render_chart(module, chart_values(version), kube, work)
        for obj in chart:
            kube.apply(obj)
        wait_on_real_node(kube, "crossplane")
        for prefix, path in xpkgs.PREFIXES.items():
            kube.apply({"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "ImageConfig",
                        "metadata": {"name": "mirror-" + path},
                        "spec": {"matchImages": [{"type": "Prefix", "prefix": prefix}],
                                 "rewriteImage": {"prefix": f"{registry.address}/{path}"}}})
        # README step 2, verbatim.
        for obj in load_yaml_documents(REPO_ROOT / "examples" / "install" / "01-namespace.yaml",
                                       REPO_ROOT / "examples" / "install" / "02-configuration.yaml"):
            kube.apply(obj)
        yield Installed(kube, registry, xpkgs.Cli(work), work, pushed, chart, image)
        stop_pods(kube)
    finally:
        registry.stop()
        # About 0.5 GB (the binaries three times: image tarballs, xpkgs, registry blobs); the logs are in
        # CONTROLPLANE_STATE, the pods' through the API while the control plane runs.
        shutil.rmtree(work, ignore_errors=True)


def test_crossplane_runs_from_its_chart_on_the_real_node(installed: Installed):
    kube = installed.kube
    rendered = {(o["kind"], o["metadata"]["name"]) for o in installed.chart}
    assert {("Deployment", "crossplane"), ("Deployment", "crossplane-rbac-manager"),
            ("Service", "crossplane-webhooks"), ("ServiceAccount", "crossplane"),
            ("ServiceAccount", "rbac-manager")} <= rendered, sorted(rendered)
    for name, account in (("crossplane", "crossplane"), ("crossplane-rbac-manager", "rbac-manager")):
        pod = wait_on_real_node(kube, name)
        assert pod["spec"]["serviceAccountName"] == account, pod["spec"]
        [status] = pod["status"]["containerStatuses"]
        assert status["image"] == installed.crossplane_image, status
        # The init container (`core init`, `rbac init`) ran to completion.
        [init] = pod["status"]["initContainerStatuses"]
        assert (init["state"].get("terminated") or {}).get("exitCode") == 0, init
    # `core init` made the certificates the chart mounts, and pointed the admission webhooks at the chart's
    # Service, which kube-apiserver reaches through kube-proxy (every apply of a Crossplane object passes them).
    for secret in ("crossplane-root-ca", "crossplane-tls-server", "crossplane-tls-client"):
        assert (kube.get("v1", "Secret", secret, NAMESPACE) or {}).get("data"), f"Secret {secret}"
    webhooks = kube.get("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "crossplane-no-usages")
    assert webhooks and {w["clientConfig"]["service"]["name"] for w in webhooks["webhooks"]} == \
        {"crossplane-webhooks"}, webhooks


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


def apply_rest_of_step_2(kube: Kube) -> None:
    """README step 2 after the Configuration: the activation policy, provider-kubernetes' DeploymentRuntimeConfig
    (given the real node's selector and toleration, and the poll interval the harness runs provider-kubernetes
    with, 10 s instead of its default 10 min, so that what it applies is seen Ready within a test's bounds) and
    the patch naming it."""
    for obj in load_yaml_documents(REPO_ROOT / "package" / "configuration" / "activation"):
        kube.apply(obj)
    [sanitize] = load_yaml_documents(REPO_ROOT / "examples" / "install" /
                                     "06-provider-kubernetes-sanitize-secrets.yaml")
    assert sanitize["metadata"]["name"] == PROVIDER_KUBERNETES_CONFIG
    config = on_real_node(sanitize)
    [container] = config["spec"]["deploymentTemplate"]["spec"]["template"]["spec"]["containers"]
    container["args"] = ["--poll=10s"]
    kube.apply(config)
    patch_runtime_config(kube, "Provider", xpkgs.object_name(xpkgs.PROVIDER_KUBERNETES), PROVIDER_KUBERNETES_CONFIG)


def test_the_rest_of_step_2_activates_only_what_the_policy_names(installed: Installed):
    """README step 2 after the Configuration: the activation policy, and provider-kubernetes' Secret redaction (its
    DeploymentRuntimeConfig, given the real node's selector and toleration, and the patch naming it). Its
    Deployment then runs the real controller from its package on the real node, redacting Secrets."""
    kube = installed.kube
    wait_installed(installed)
    apply_rest_of_step_2(kube)
    provider_kubernetes = xpkgs.object_name(xpkgs.PROVIDER_KUBERNETES)
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

    revision = revision_of(kube, "ProviderRevision", provider_kubernetes)
    pod = wait_on_real_node(kube, revision["metadata"]["name"])
    [container] = pod["spec"]["containers"]
    assert {"name": "SANITIZE_SECRETS", "value": "true"} in container["env"], container["env"]
    assert "--poll=10s" in container["args"], container
    [status] = pod["status"]["containerStatuses"]
    assert status["image"] == f"{installed.registry.address}/crossplane-contrib/provider-kubernetes:" \
        f"{installed.pushed[xpkgs.PROVIDER_KUBERNETES]}", status
    assert status["restartCount"] == 0, status
    wait_for("provider-kubernetes Healthy on the real node", lambda: is_true(
        kube.get(PKG, "Provider", provider_kubernetes), "Installed", "Healthy"), INSTALL_SECONDS,
        lambda: conditions(kube.get(PKG, "Provider", provider_kubernetes)))


def patch_spec(kube: Kube, api_version: str, kind: str, name: str, spec: dict, namespace: str | None = None) -> dict:
    """A merge patch of `spec`, as `kubectl patch --type merge` sends it. Returns the object patched."""
    return kube.request("PATCH", kube.path(api_version, kind, namespace, name), body={"spec": spec},
                        content_type="application/merge-patch+json", what=f"patch {kind} {name}")


def patch_runtime_config(kube: Kube, kind: str, name: str, config: str) -> None:
    patch_spec(kube, PKG, kind, name, {"runtimeConfigRef": {"name": config}})


def active_revisions(kube: Kube, kind: str, package: str) -> list[dict]:
    """The package's revisions whose desired state is Active (the package manager keeps the one before, inactive)."""
    return [r for r in kube.list(PKG, kind) if r["spec"].get("desiredState") == "Active"
            and r["metadata"]["labels"].get("pkg.crossplane.io/package") == package]


def revision_of(kube: Kube, kind: str, package: str) -> dict:
    [revision] = active_revisions(kube, kind, package)
    return revision


def function_endpoints(kube: Kube) -> list[str]:
    """The ready addresses behind the Function's Service."""
    slices = [s for s in kube.list("discovery.k8s.io/v1", "EndpointSlice", NAMESPACE)
              if s["metadata"].get("labels", {}).get("kubernetes.io/service-name") == FUNCTION_OBJECT]
    return sorted(a for s in slices for e in s.get("endpoints") or [] for a in e["addresses"]
                  if (e.get("conditions") or {}).get("ready"))


def function_on_real_node(kube: Kube) -> None:
    """The Function's Deployment moved to the real node: a DeploymentRuntimeConfig with its selector and
    toleration, named by the Function's runtimeConfigRef."""
    kube.apply(on_real_node({"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "DeploymentRuntimeConfig",
                             "metadata": {"name": FUNCTION_CONFIG},
                             "spec": {"deploymentTemplate": {"spec": {"selector": {}}}}}))
    patch_runtime_config(kube, "Function", FUNCTION_OBJECT, FUNCTION_CONFIG)


def test_the_function_runs_our_image_on_the_real_node_and_crossplane_calls_it(installed: Installed):
    """The package runtime's Deployment of the Function starts on the real node from the image the package
    manager resolved through the ImageConfig (our runtime image inside our package, pulled by containerd from the
    registry), serves with the certificate Crossplane issued from its own root CA, and Crossplane, in its pod,
    calls it through its Service: the default InferenceClasses (the end of README step 2), composed by it, become
    Synced and Ready."""
    kube = installed.kube
    wait_installed(installed)
    function_on_real_node(kube)
    revision = revision_of(kube, "FunctionRevision", FUNCTION_OBJECT)
    status = revision["status"]
    assert status["capabilities"] == ["composition"], status
    assert {"name": "mirror-modelplaneai", "reason": "RewriteImage"} in status["appliedImageConfigRefs"], status
    assert status["endpoint"] == f"dns:///{FUNCTION_OBJECT}.{NAMESPACE}:9443", status
    assert kube.get("v1", "Service", FUNCTION_OBJECT, NAMESPACE), f"no Service {FUNCTION_OBJECT}"
    pod = wait_on_real_node(kube, revision["metadata"]["name"])
    [container] = pod["status"]["containerStatuses"]
    assert container["image"] == f"{installed.registry.address}/modelplaneai/function-modelplane:{xpkgs.VERSION}", \
        container
    assert container["restartCount"] == 0, container
    # Crossplane issues the function's serving certificate itself, from the root CA `core init` made.
    secret = kube.get("v1", "Secret", status["tlsServerSecretName"], NAMESPACE)
    assert secret and {"tls.crt", "tls.key", "ca.crt"} <= set(secret["data"]), secret and list(secret["data"])
    root = kube.get("v1", "Secret", "crossplane-root-ca", NAMESPACE)
    assert base64.b64decode(secret["data"]["ca.crt"]) == base64.b64decode(root["data"]["tls.crt"])
    wait_for("the Function Healthy on the real node", lambda: is_true(kube.get(PKG, "Function", FUNCTION_OBJECT),
                                                                      "Installed", "Healthy"), INSTALL_SECONDS,
             lambda: conditions(kube.get(PKG, "Function", FUNCTION_OBJECT)))

    # The Service's only endpoint is that pod: the pod kwok ran before the patch is gone.
    wait_for("the function's Service routing to its pod on the real node",
             lambda: function_endpoints(kube) == [pod["status"]["podIP"]], POD_SECONDS,
             lambda: str(function_endpoints(kube)))

    classes = load_yaml_documents(REPO_ROOT / "package" / "configuration" / "classes")
    for obj in classes:
        kube.apply(obj)
    for obj in classes:
        name = obj["metadata"]["name"]
        wait_for(f"InferenceClass {name} Synced and Ready",
                 lambda: is_true(kube.get(obj["apiVersion"], obj["kind"], name), "Synced", "Ready"), INSTALL_SECONDS,
                 lambda: conditions(kube.get(obj["apiVersion"], obj["kind"], name)))


# --- composing through the installation --------------------------------------------------------------------------

EXISTING_CLUSTER = "onprem-installed"
# Crossplane (GOMAXPROCS 1 under the chart's 500m CPU limit) and provider-kubernetes (polling every 10 s)
# converging on a loaded 2-core machine.
CONVERGE_SECONDS = 300


def kubeconfig_through_the_service(kube: Kube) -> str:
    """The Existing cluster's kubeconfig as a pod uses it: this API server through the `kubernetes` Service (an
    address its certificate names), the admin's client certificate."""
    service = kube.get("v1", "Service", "kubernetes", "default")
    address = f"https://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"
    return kubeconfig_pointing_back(kube).replace(kube.server, address)


def test_an_existing_cluster_and_a_model_deployment_become_ready_through_it(installed: Installed):
    """The Existing example cluster, its kubeconfig pointing back at this API server through its Service, and the
    small example deployment, composed by our function in its pod, with provider-kubernetes in its pod applying
    and observing what the function composes: the InferenceCluster becomes Ready with its gateway's address, the
    ModelDeployment Ready with its replica. This API server is the workload cluster too, with its CRDs (stacks,
    routing, certificates, monitoring, autoscaling).

    Stand-ins, as in test_scheduling.py: provider-helm's charts and trust-manager (played by the test), Envoy
    Gateway (the test gives the cluster gateway its address), the cluster's nodes and the engine pods (kwok
    simulates both: they are scheduled onto the GPU pool with their devices, Running and Ready without starting)."""
    kube = installed.kube
    wait_installed(installed)
    apply_rest_of_step_2(kube)
    function_on_real_node(kube)
    provider_kubernetes = xpkgs.object_name(xpkgs.PROVIDER_KUBERNETES)
    wait_for("provider-kubernetes running on the real node", lambda: is_true(
        kube.get(PKG, "Provider", provider_kubernetes), "Healthy") and running_on_real_node(
        kube, revision_of(kube, "ProviderRevision", provider_kubernetes)["metadata"]["name"]), POD_SECONDS,
        lambda: conditions(kube.get(PKG, "Provider", provider_kubernetes)))
    wait_for("the Function running on the real node", lambda: running_on_real_node(
        kube, revision_of(kube, "FunctionRevision", FUNCTION_OBJECT)["metadata"]["name"]), POD_SECONDS)
    install_workload_crds(kube)
    classes = load_yaml_documents(REPO_ROOT / "examples" / "classes")
    cluster = existing_cluster(kube, EXISTING_CLUSTER)
    secret_ref = cluster["spec"]["cluster"]["existing"]["secretRef"]
    kube.apply({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": secret_ref["name"], "namespace": secret_ref.get("namespace", "modelplane-system")},
                "stringData": {secret_ref.get("key", "kubeconfig"): kubeconfig_through_the_service(kube)}})
    for obj in classes:
        kube.apply(obj)
    apply_simulated(kube, device_classes(classes) + cluster_nodes(cluster, classes) + [cache_volume(cluster)])
    apply_until_serving(kube, cluster)

    deployment = standalone_deployment(cluster)
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    kube.ensure_namespace(namespace)
    kube.apply(deployment)

    def deployment_now() -> dict:
        return kube.get(API, "ModelDeployment", name, namespace) or {}

    ready = wait_for("the ModelDeployment Ready", lambda: is_true(deployment_now(), "Ready") and deployment_now(),
                     CONVERGE_SECONDS, lambda: str(deployment_now().get("status")))
    assert ready["status"]["readyReplicas"] == 1, ready["status"]
    # provider-kubernetes, in its pod, applied the composed workload into the cluster, whose controllers made the
    # engine pods the replica asks for, on the cluster's GPU pool.
    copies = deployment["spec"]["template"]["spec"]["engines"][0]["copies"]
    pods = all_engines_running(kube, namespace, name, copies)
    assert pods, [p.get("status") for p in engine_pods(kube, namespace, name)]
    assert all(p["spec"]["nodeName"].startswith(f"{EXISTING_CLUSTER}-gpu-") for p in pods), \
        [p["spec"]["nodeName"] for p in pods]
    applied = [o for o in composed_by(kube, OBJECT_API, "Object", name) if is_true(o, "Ready", "Synced")]
    assert applied, "no composed Object Ready and Synced"


# --- another release, and back ----------------------------------------------------------------------------------


def release_after(version: str, step: int) -> str:
    major, minor, patch = version.lstrip("v").split(".")
    return f"v{major}.{minor}.{int(patch) + step}"


# The next release of both packages, and a release of the Function whose image cannot start.
NEXT = release_after(xpkgs.VERSION, 1)
CRASHING = release_after(xpkgs.VERSION, 2)
# The packages a release moves, with their revisions' kind.
RELEASED = (("Configuration", "modelplane", "ConfigurationRevision"), ("Function", FUNCTION_OBJECT, "FunctionRevision"))


def composites(kube: Kube) -> list[dict]:
    """What test_an_existing_cluster_and_a_model_deployment_become_ready_through_it composed: the Existing cluster
    and the one ModelDeployment."""
    deployments = [{"apiVersion": API, "kind": "ModelDeployment", **d} for d in kube.list(API, "ModelDeployment")]
    assert len(deployments) == 1, [describe(d) for d in deployments]
    cluster = kube.get(API, "InferenceCluster", EXISTING_CLUSTER)
    assert cluster, f"no InferenceCluster {EXISTING_CLUSTER}: the test composing it did not run"
    return [cluster] + deployments


def made_by_composing(kube: Kube) -> dict[str, dict]:
    """What composing the composites made: every composed object (spec.crossplane.resourceRefs, and in turn what
    the ModelEndpoints among them compose), every object those Objects applied into the cluster, every engine
    pod."""
    made: dict[str, dict] = {}
    pending = composites(kube)
    while pending:
        composite = pending.pop()
        for ref in composite["spec"]["crossplane"].get("resourceRefs") or []:
            obj = kube.get(ref["apiVersion"], ref["kind"], ref["name"],
                           ref.get("namespace") or composite["metadata"].get("namespace"))
            assert obj, f"{describe(composite)} refers to {ref}, which does not exist"
            made[describe(obj)] = obj
            if obj["apiVersion"] == API:
                pending.append(obj)
            elif (obj["apiVersion"], obj["kind"]) == (OBJECT_API, "Object"):
                manifest = obj["spec"]["forProvider"]["manifest"]
                applied = kube.get(manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"],
                                   manifest["metadata"].get("namespace"))
                if applied:
                    made["applied " + describe(applied)] = applied
    for deployment in kube.list(API, "ModelDeployment"):
        for pod in engine_pods(kube, deployment["metadata"]["namespace"], deployment["metadata"]["name"]):
            made[f"engine Pod {pod['metadata']['namespace']}/{pod['metadata']['name']}"] = pod
    return made


def fingerprint(obj: dict | None) -> tuple | None:
    """What changes when an object is deleted or recreated (its UID) or, for a pod, moved (its node). Not the
    generation: the InferenceCluster's two inference-extension CRD Objects are rewritten on its ordinary
    reconciles, with or without a new release (their generation climbs while nothing moves)."""
    if obj is None:
        return None
    return obj["metadata"]["uid"], (obj.get("spec") or {}).get("nodeName")


def assert_nothing_moved(kube: Kube, before: dict[str, dict]) -> None:
    after = made_by_composing(kube)
    changed = {k: (fingerprint(v), fingerprint(after.get(k))) for k, v in before.items()
               if fingerprint(after.get(k)) != fingerprint(v)}
    added = sorted(set(after) - set(before))
    assert not changed and not added, f"changed (before, after): {changed}; added: {added}"


def composed_at(kube: Kube, composite: dict, generation: int) -> dict | None:
    """The composite once Crossplane has reconciled its `generation` (its Synced condition observed it)."""
    meta = composite["metadata"]
    now = kube.get(composite["apiVersion"], composite["kind"], meta["name"], meta.get("namespace"))
    return now if condition(now, "Synced").get("observedGeneration") == generation else None


def touch(kube: Kube, composite: dict) -> int:
    """Changes the composite's spec where only Crossplane reads it (spec.crossplane.compositionUpdatePolicy, between
    Automatic and Manual: the Composition has one revision), so that Crossplane composes it again, through the
    function; returns the generation that makes."""
    meta = composite["metadata"]
    policy = composite["spec"]["crossplane"].get("compositionUpdatePolicy", "Automatic")
    other = "Manual" if policy == "Automatic" else "Automatic"
    patched = patch_spec(kube, composite["apiVersion"], composite["kind"], meta["name"],
                         {"crossplane": {"compositionUpdatePolicy": other}}, meta.get("namespace"))
    return patched["metadata"]["generation"]


def composed_again(kube: Kube) -> None:
    """Touches every composite and waits until Crossplane composed that generation through the function: Synced
    and Ready."""
    for composite in composites(kube):
        generation = touch(kube, composite)
        now = wait_for(f"{describe(composite)} composed at generation {generation}",
                       lambda: composed_at(kube, composite, generation), CONVERGE_SECONDS,
                       lambda: conditions(kube.get(composite["apiVersion"], composite["kind"],
                                                   composite["metadata"]["name"],
                                                   composite["metadata"].get("namespace"))))
        assert is_true(now, "Synced", "Ready"), f"{describe(composite)}: {conditions(now)}"


def function_image(installed: Installed, version: str) -> str:
    return f"{installed.registry.address}/{xpkgs.loopback_path(xpkgs.FUNCTION)}:{version}"


def released(installed: Installed, version: str, previous: dict[str, str]) -> dict[str, str]:
    """Waits until each package `previous` names a revision of (revision kind -> name) runs `version`: Installed
    and Healthy from that release through an active revision other than that one, healthy; the
    Function's pod Ready on the real node from that release's image, its Service's only endpoint, the previous
    revision's Deployment gone. Returns the revisions."""
    kube = installed.kube

    def on_release(kind: str, name: str, revision_kind: str) -> dict | None:
        package = kube.get(PKG, kind, name)
        revisions = active_revisions(kube, revision_kind, name)
        if not (is_true(package, "Installed", "Healthy") and len(revisions) == 1 and
                package["status"].get("resolvedPackage", "").endswith(f":{version}") and
                revisions[0]["metadata"]["name"] != previous.get(revision_kind) and
                is_true(revisions[0], "RevisionHealthy")):
            return None
        return revisions[0]

    revisions = {}
    for kind, name, revision_kind in (r for r in RELEASED if r[2] in previous):
        revisions[revision_kind] = wait_for(
            f"{kind} {name} Healthy at {version} through a new revision",
            lambda: on_release(kind, name, revision_kind), INSTALL_SECONDS,
            lambda: conditions(kube.get(PKG, kind, name)))["metadata"]["name"]
    function_revision = revisions["FunctionRevision"]
    assert is_true(kube.get(PKG, "FunctionRevision", function_revision), "RuntimeHealthy")
    pod = wait_on_real_node(kube, function_revision)
    [container] = pod["status"]["containerStatuses"]
    assert container["image"] == function_image(installed, version), container
    assert container["restartCount"] == 0, container
    wait_for("the previous revision's Deployment gone", lambda: not kube.get(
        "apps/v1", "Deployment", previous["FunctionRevision"], NAMESPACE), POD_SECONDS)
    wait_for("the function's Service routing to the new pod only",
             lambda: function_endpoints(kube) == [pod["status"]["podIP"]], POD_SECONDS,
             lambda: str(function_endpoints(kube)))
    return revisions


def move(kube: Kube, kind: str, name: str, reference: str) -> None:
    """What a user does to install another release: point the package at it (`kubectl patch --type merge`)."""
    patch_spec(kube, PKG, kind, name, {"package": reference})


def current_revisions(kube: Kube) -> dict[str, str]:
    return {revision_kind: revision_of(kube, revision_kind, name)["metadata"]["name"]
            for _, name, revision_kind in RELEASED}


def test_the_next_release_takes_over_and_back_with_nothing_composed_moved(installed: Installed):
    """The next release of the Configuration (its Function dependency raised to that release) and of the Function
    (the same binary, its runtime image labelled with the release, so a new package, revision and pod), installed
    as a user moves a package: `spec.package` patched to the new tag. Crossplane's package manager does not move
    an installed dependency (that is its alpha EnableAlphaDependencyVersionUpgrades, off by default and in the
    README's install), so the Configuration's new revision names the Function that holds it back, in Crossplane's
    words, until the user patches the Function's `spec.package` too. Then a new revision of each is active and
    healthy, the Function's pod runs the new image, the previous one is gone, and both composites, touched, are
    composed through it (Synced at their new generation, Ready); no composed object, applied object or engine pod
    was deleted, recreated or moved. Rolling back (the Configuration first, whose old range admits
    both Function releases, then the Function) does the same."""
    kube = installed.kube
    wait_installed(installed)
    before = made_by_composing(kube)
    first = current_revisions(kube)
    function_next = xpkgs.push_function(installed.cli, installed.registry, function_binary(), NEXT)
    configuration_next = xpkgs.push_configuration(installed.cli, installed.registry, NEXT, f">={NEXT}-0, <v1.0.0-0")

    move(kube, "Configuration", "modelplane", configuration_next)

    def held_back() -> str | None:
        return said_false([kube.get(PKG, "Configuration", "modelplane")] + kube.list(PKG, "ConfigurationRevision"),
                          "is incompatible with constraint")

    message = wait_for("the Configuration's new revision naming the Function it needs", held_back, INSTALL_SECONDS,
                       lambda: conditions(kube.get(PKG, "Configuration", "modelplane")))
    assert f"incompatible dependencies: existing package {xpkgs.FUNCTION}@{xpkgs.VERSION} is incompatible with " \
        f"constraint >={NEXT}-0, <v1.0.0-0" in message, message
    assert kube.get(PKG, "Function", FUNCTION_OBJECT)["spec"]["package"].endswith(f":{xpkgs.VERSION}")
    move(kube, "Function", FUNCTION_OBJECT, function_next)
    upgraded = released(installed, NEXT, first)
    composed_again(kube)
    assert_nothing_moved(kube, before)

    move(kube, "Configuration", "modelplane", f"{xpkgs.CONFIGURATION}:{xpkgs.VERSION}")
    move(kube, "Function", FUNCTION_OBJECT, f"{xpkgs.FUNCTION}:{xpkgs.VERSION}")
    # The first release's revisions, kept inactive by the package manager, are active again.
    assert released(installed, xpkgs.VERSION, upgraded) == first
    composed_again(kube)
    assert_nothing_moved(kube, before)
    kinds = {key.split()[-2] for key in before}
    assert {"ModelEndpoint", "HTTPRoute", "Pod"} <= kinds, sorted(before)


def test_a_function_release_that_cannot_start_is_named_and_composed_objects_stay(installed: Installed):
    """A Function release whose runtime image exits at once (its entrypoint passes a flag the binary refuses),
    installed as a user moves it. Crossplane activates a new revision at once and deactivates the previous one,
    deleting its Deployment (upstream's behaviour: crossplane/crossplane#7298, #6289), so the function serves no
    one until the user moves back: the revision's RuntimeHealthy and the Function's Healthy are False in
    Crossplane's words, the pod exits with an error, and a composite touched meanwhile is not Synced, naming the
    function, and keeps Ready. Nothing composed, applied or scheduled is deleted, recreated or moved;
    moving back to the release before serves again."""
    kube = installed.kube
    wait_installed(installed)
    before = made_by_composing(kube)
    first = current_revisions(kube)
    crashing = xpkgs.push_function(installed.cli, installed.registry, function_binary(), CRASHING,
                                   ("--no-such-flag",))
    move(kube, "Function", FUNCTION_OBJECT, crashing)

    def refused() -> tuple[dict, str, list[dict]] | None:
        revisions = active_revisions(kube, "FunctionRevision", FUNCTION_OBJECT)
        if len(revisions) != 1 or revisions[0]["metadata"]["name"] == first["FunctionRevision"]:
            return None
        pods = deployment_pods(kube, revisions[0]["metadata"]["name"])
        statuses = [s for p in pods for s in p["status"].get("containerStatuses") or []]
        exited = [s[state]["terminated"] for s in statuses for state in ("state", "lastState")
                  if (s.get(state) or {}).get("terminated")]
        message = said_false([kube.get(PKG, "Function", FUNCTION_OBJECT)], "function package deployment is unavailable")
        return (revisions[0], message, exited) if exited and message else None

    revision, message, exited = wait_for("Crossplane saying the new release's runtime is unavailable", refused,
                                         POD_SECONDS, lambda: conditions(kube.get(PKG, "Function", FUNCTION_OBJECT)))
    unavailable = "function package deployment is unavailable with message: Deployment does not have minimum " \
        "availability."
    assert message.startswith('Package runtime health is "False" with message: ') and unavailable in message, \
        message
    runtime = condition(revision, "RuntimeHealthy")
    assert runtime["status"] == "False" and unavailable in runtime["message"], runtime
    assert all(t["exitCode"] != 0 for t in exited), exited
    assert function_image(installed, CRASHING) in [
        c["image"] for p in deployment_pods(kube, revision["metadata"]["name"]) for c in p["spec"]["containers"]]
    assert not kube.get("apps/v1", "Deployment", first["FunctionRevision"], NAMESPACE)
    [_, deployment] = composites(kube)
    generation = touch(kube, deployment)
    now = wait_for(f"{describe(deployment)} reconciled at generation {generation}",
                   lambda: composed_at(kube, deployment, generation), CONVERGE_SECONDS,
                   lambda: conditions(kube.get(API, "ModelDeployment", deployment["metadata"]["name"],
                                               deployment["metadata"]["namespace"])))
    synced = condition(now, "Synced")
    assert synced["status"] == "False" and f'"{FUNCTION_OBJECT}"' in synced["message"], synced
    assert is_true(now, "Ready"), conditions(now)
    assert_nothing_moved(kube, before)

    move(kube, "Function", FUNCTION_OBJECT, f"{xpkgs.FUNCTION}:{xpkgs.VERSION}")
    released(installed, xpkgs.VERSION, {"FunctionRevision": revision["metadata"]["name"]})
    assert current_revisions(kube) == first
    composed_again(kube)
    assert_nothing_moved(kube, before)


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
        return said_false([kube.get(PKG, "Configuration", "broken")] + kube.list(PKG, "ConfigurationRevision"),
                          "function-missing")

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
        return said_false(objects, "package meta type is not Provider")

    # Crossplane's revision reconciler refuses it in these words (and logs them).
    wait_for("Crossplane refusing a Function package installed as a Provider", said, INSTALL_SECONDS,
             lambda: conditions(kube.get(PKG, "Provider", "wrong-kind")))
    assert is_true(kube.get(PKG, "Function", FUNCTION_OBJECT), "Installed", "Healthy")
