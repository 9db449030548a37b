"""The install step's installation (test_install.py, test_upgrade.py, then test_least_privilege.py): Crossplane
from its Helm chart on the real node, the packages built and pushed to a registry on the node's bridge, the
Configuration applied as README step 2 says; and what those tests ask of it (package conditions, revisions,
package pods on the real node). test_install.py's docstring says what is done verbatim and what is not, and why.

conftest.py's session fixture `installed` runs install() once for the whole step: the three files run in one
pytest invocation (tests/run.sh), in that order, on one installation.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import images
import xpkgs
from installs import built_component, function_binary
from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from real_nodes import KUBELET_LABEL, TOLERATE_ALL, pod_status, require_kubelets
from simulated_nodes import apply_simulated, node

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

# The Existing cluster test_install.py composes through the installation, which test_upgrade.py moves releases
# under.
EXISTING_CLUSTER = "onprem-installed"
# Crossplane (GOMAXPROCS 1 under the chart's 500m CPU limit) and provider-kubernetes (polling every 10 s)
# converging on a loaded 2-core machine.
CONVERGE_SECONDS = 300


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


def install(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Installs Crossplane and the packages (README steps 1 and 2, as far as the Configuration), yields the
    installation, then stops every pod in crossplane-system and the registry."""
    require_kubelets()
    if kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "configurations.pkg.crossplane.io"):
        pytest.fail("Crossplane's CRDs are already installed: run the install step on a control plane of its own "
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
