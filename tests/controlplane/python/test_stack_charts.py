"""Each stack chart whose pinned release is reachable here as a data file (its project's Go module, served by the
Go module proxy), rendered with exactly the values our composed provider-helm Release sets, by Helm's own engine,
and admitted by the real API server. `render-chart` (tests/controlplane/modules/helm/render-chart, built by
`controlplane.sh build render-chart`) renders a chart as `helm install --dry-run` would, with Helm v4.3.2 (the
major provider-helm v1.4 links).

Proven here, for gateway-helm v1.8.1, cert-manager v1.17.2, trust-manager v0.25.0, node-feature-discovery
v0.18.3, dra-driver-nvidia-gpu v0.4.1, LWS v0.8.0 and MetalLB v0.16.1 (docs/testing.md lists the charts not
reachable): every value key we set is one the chart reads (declared in its values.yaml, or inside a map the chart
passes whole into a file a typed loader reads), and taking any of them away changes what the chart renders or makes
it refuse; every manifest it renders (its CRDs too) passes the API server's admission with strict field validation
(server-side dry-run apply). Envoy Gateway's configuration, which the chart passes through from our values and
Envoy Gateway's loader decodes leniently, is decoded strictly into its own Go type (`check-eg-config`, on egctl's
module).

Some modules hold a chart as its release build leaves it before substitution; the test fills the placeholders as
that build does, in a copy: gateway-helm's `values.tmpl.yaml` (`${GatewayImage}`, `${GatewayImagePullPolicy}`:
the release's image, IfNotPresent) and version `v0.0.0-latest`; cert-manager's `Chart.template.yaml`
(`{{IS_PRERELEASE}}`), version `v0.0.0`, and its CRD templates, kept in `deploy/crds`; trust-manager's version
`v0.0.0`.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

import installs
from kube import ApiError, Kube, wait_for

EXAMPLES = installs.REPO_ROOT / "examples"
MODULES = installs.CONTROLPLANE / "modules"
# The Kubernetes release the test control plane runs (its .Capabilities.KubeVersion for the chart).
KUBE_VERSION = "v1.34.4"


@dataclasses.dataclass(frozen=True)
class Chart:
    """A stack chart whose release a Go module holds as data: CHART at PATH in MODULE@VERSION."""

    chart: str
    module: str
    version: str
    path: str
    # The example cluster whose composed Release for CHART is checked.
    cluster: str = "existing-onprem.yaml"
    # Value maps the chart passes whole into a file a typed loader reads, by key path.
    passed_whole: tuple[tuple[str, ...], ...] = ()
    # What the project's release build does to the directory before it packages the chart.
    prepare: Callable[[Path, "Chart"], None] = lambda chart, spec: None
    # The chart version our component table pins, where the project does not spell it as its tag.
    chart_version: str = ""

    @property
    def pinned(self) -> str:
        return self.chart_version or self.version


def fill_envoy_gateway(chart: Path, spec: Chart) -> None:
    """gateway-helm's release placeholders, filled as its release build fills them: values.tmpl.yaml becomes
    values.yaml with the release's image and IfNotPresent, and the version and appVersion become the release."""
    template = (chart / "values.tmpl.yaml").read_text()
    assert "${GatewayImage}" in template and "${GatewayImagePullPolicy}" in template, "the placeholders moved"
    (chart / "values.yaml").write_text(
        template.replace("${GatewayImage}", f"docker.io/envoyproxy/gateway:{spec.version}")
        .replace("${GatewayImagePullPolicy}", "IfNotPresent"))
    (chart / "values.tmpl.yaml").unlink()
    set_version(chart, spec, "v0.0.0-latest")


def fill_cert_manager(chart: Path, spec: Chart) -> None:
    """cert-manager's chart as its release build assembles it: Chart.yaml from Chart.template.yaml, and the CRDs
    (themselves templates, behind crds.enabled) from deploy/crds into templates/."""
    template = (chart / "Chart.template.yaml").read_text()
    assert "{{IS_PRERELEASE}}" in template, "the placeholder moved"
    (chart / "Chart.yaml").write_text(template.replace("{{IS_PRERELEASE}}", "false"))
    (chart / "Chart.template.yaml").unlink()
    set_version(chart, spec, "v0.0.0")
    for crd in sorted((chart.parent.parent / "crds").glob("crd-*.yaml")):
        shutil.copy(crd, chart / "templates" / crd.name)


def set_version(chart: Path, spec: Chart, placeholder: str) -> None:
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    assert meta["version"] == placeholder, f"{spec.chart}'s version is no longer a placeholder: {meta['version']}"
    meta["version"] = meta["appVersion"] = spec.version
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))


ENVOY_GATEWAY = Chart("gateway-helm", "github.com/envoyproxy/gateway", "v1.8.1", "charts/gateway-helm",
                      # config.envoyGateway becomes the EnvoyGateway configuration (envoy-gateway.yaml).
                      passed_whole=(("config", "envoyGateway"),), prepare=fill_envoy_gateway)
# Every stack chart whose pinned release the Go module proxy serves (docs/testing.md lists the others). A chart
# released with another version than its module's (LWS, node-feature-discovery) is the module's tag's chart.
CHARTS = [
    ENVOY_GATEWAY,
    Chart("cert-manager", "github.com/cert-manager/cert-manager", "v1.17.2", "deploy/charts/cert-manager",
          prepare=fill_cert_manager),
    Chart("trust-manager", "github.com/cert-manager/trust-manager", "v0.25.0", "deploy/charts/trust-manager",
          prepare=lambda chart, spec: set_version(chart, spec, "v0.0.0")),
    Chart("node-feature-discovery", "sigs.k8s.io/node-feature-discovery", "v0.18.3",
          "deployment/helm/node-feature-discovery", chart_version="0.18.3"),
    Chart("dra-driver-nvidia-gpu", "sigs.k8s.io/dra-driver-nvidia-gpu", "v0.4.1",
          "deployments/helm/dra-driver-nvidia-gpu", chart_version="0.4.1"),
    Chart("lws", "sigs.k8s.io/lws", "v0.8.0", "charts/lws"),
    Chart("metallb", "go.universe.tf/metallb", "v0.16.1", "charts/metallb", cluster="existing-kind.yaml",
          chart_version="0.16.1"),
]


def module_dir(module: str, version: str) -> Path:
    """The module's files in Go's module cache, downloaded through the module proxy when absent."""
    done = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True,
                          timeout=600, cwd=MODULES / "egctl")
    assert done.returncode == 0, f"go mod download {module}@{version} failed:\n{done.stderr}{done.stdout}"
    return Path(json.loads(done.stdout)["Dir"])


def chart_dir(spec: Chart, tmp_path: Path) -> Path:
    """A writable copy of the chart's directory (with its module's tree above it), prepared for packaging."""
    source = module_dir(spec.module, spec.version)
    copy = tmp_path / "module"
    top = spec.path.split("/")[0]
    shutil.copytree(source / top, copy / top)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    chart = copy / spec.path
    spec.prepare(chart, spec)
    return chart


def composed_release(spec: Chart) -> dict:
    """The provider-helm Release the example cluster composes for the chart."""
    documents = installs.render(EXAMPLES / "clusters" / spec.cluster, EXAMPLES / "classes", EXAMPLES / "install",
                                until_ready=True)
    (release,) = [d for d in documents[1:] if d.get("kind") == "Release"
                  and d["spec"]["forProvider"]["chart"]["name"] == spec.chart]
    return release


def render_chart(chart: Path, values: dict, release: str, namespace: str, tmp_path: Path,
                 refusal_ok: bool = False) -> list[dict] | None:
    """`render-chart` of CHART with VALUES: the manifests Helm would install (None for a chart that refuses
    the values, where REFUSAL_OK)."""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    argv = [str(installs.built_component("render-chart")), "-chart", str(chart), "-values",
            str(values_file), "-release", release, "-namespace", namespace, "-kube-version", KUBE_VERSION]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and refusal_ok:
        return None
    assert done.returncode == 0, f"Helm refused the chart with our values:\n{done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def leaves(values: dict, prefix: tuple = ()) -> list[tuple[tuple, object]]:
    """Every key path VALUES sets down to a value that is not a map (a list is one value)."""
    found = []
    for key, value in values.items():
        path = (*prefix, key)
        found += leaves(value, path) if isinstance(value, dict) and value else [(path, value)]
    return found


def lookup(tree: dict, path: tuple) -> tuple[bool, object]:
    """Whether the map TREE holds PATH, and its value there."""
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return False, None
        tree = tree[key]
    return True, tree


def without(values: dict, path: tuple) -> dict:
    """VALUES with the key at PATH removed, and any map left empty by it."""
    copy = json.loads(json.dumps(values))
    parents = [copy]
    for key in path[:-1]:
        parents.append(parents[-1][key])
    del parents[-1][path[-1]]
    for depth in range(len(path) - 1, 0, -1):
        if parents[depth]:
            break
        del parents[depth - 1][path[depth - 1]]
    return copy


@dataclasses.dataclass
class Rendered:
    spec: Chart
    chart: Path
    release: dict  # the Release's spec.forProvider
    manifests: list[dict]

    def render(self, values: dict, tmp_path: Path, refusal_ok: bool = False) -> list[dict] | None:
        return render_chart(self.chart, values, self.release_name, self.release["namespace"], tmp_path, refusal_ok)

    @property
    def release_name(self) -> str:
        return self.spec.chart


_rendered: dict[str, Rendered] = {}


def rendered(spec: Chart, tmp_path_factory) -> Rendered:
    """The chart, the Release our example cluster composes for it, and what Helm renders from its values (once a
    session per chart)."""
    if spec.chart not in _rendered:
        tmp_path = tmp_path_factory.mktemp(spec.chart)
        chart = chart_dir(spec, tmp_path)
        release = composed_release(spec)["spec"]["forProvider"]
        assert release["chart"]["version"] == spec.pinned, f"the component table moved off {spec.pinned}"
        manifests = render_chart(chart, release.get("values") or {}, spec.chart, release["namespace"], tmp_path)
        _rendered[spec.chart] = Rendered(spec, chart, release, manifests)
    return _rendered[spec.chart]


@pytest.fixture(scope="module", params=CHARTS, ids=[c.chart for c in CHARTS])
def stack_chart(request, tmp_path_factory) -> Rendered:
    return rendered(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def envoy_gateway(tmp_path_factory) -> Rendered:
    return rendered(ENVOY_GATEWAY, tmp_path_factory)


def envoy_gateway_config(manifests: list[dict]) -> str:
    (config,) = [m for m in manifests if m["kind"] == "ConfigMap" and m["metadata"]["name"] == "envoy-gateway-config"]
    return config["data"]["envoy-gateway.yaml"]


def strict_envoy_gateway_config(text: str, tmp_path: Path) -> subprocess.CompletedProcess:
    source = tmp_path / "envoy-gateway.yaml"
    source.write_text(text)
    return subprocess.run([str(installs.built_component("check-eg-config")), str(source)],
                          capture_output=True, text=True, timeout=60)


def unread_keys(chart: Rendered, values: dict, tmp_path: Path, rendering: bool = True) -> tuple[list[str], list[str]]:
    """The keys of VALUES the chart neither declares nor passes on, and (RENDERING) those it renders the same
    without."""
    defaults = yaml.safe_load((chart.chart / "values.yaml").read_text()) or {}
    manifests = chart.render(values, tmp_path) if rendering else []
    undeclared, ignored = [], []
    for path, value in leaves(values):
        declared, default = lookup(defaults, path)
        passed_whole = any(path[:len(prefix)] == prefix and lookup(defaults, prefix)[0]
                           for prefix in chart.spec.passed_whole)
        if not declared and not passed_whole:
            undeclared.append(".".join(path))
            continue
        if not rendering or (declared and default == value):
            continue
        # A key the chart reads changes what it renders when it is taken away (or the chart refuses to render
        # without it: dra-driver-nvidia-gpu's gpuResourcesEnabledOverride).
        if chart.render(without(values, path), tmp_path, refusal_ok=True) == manifests:
            ignored.append(".".join(path))
    return undeclared, ignored


def test_every_value_we_set_is_read_by_the_chart(stack_chart, tmp_path):
    undeclared, ignored = unread_keys(stack_chart, stack_chart.release.get("values") or {}, tmp_path)
    name = f"{stack_chart.spec.chart} {stack_chart.spec.version}"
    assert not undeclared, f"keys {name} neither declares nor passes on: {undeclared}"
    assert not ignored, f"keys {name} renders the same without: {ignored}"


def test_the_envoy_gateway_configuration_decodes_strictly(envoy_gateway, tmp_path):
    """What the chart writes from config.envoyGateway is decoded by Envoy Gateway's loader, which drops a field it
    does not know without a word: decoded strictly into its own type here, every field we set must exist."""
    text = envoy_gateway_config(envoy_gateway.manifests)
    decoded = yaml.safe_load(text)
    for path, value in leaves(envoy_gateway.release["values"]["config"]["envoyGateway"]):
        assert lookup(decoded, path) == (True, value), f"{'.'.join(path)} did not reach envoy-gateway.yaml:\n{text}"
    done = strict_envoy_gateway_config(text, tmp_path)
    assert done.returncode == 0, f"Envoy Gateway's config type refuses what we set:\n{done.stderr}\n{text}"


def test_a_key_the_chart_ignores_fails(envoy_gateway, tmp_path):
    """The checks catch a misspelt key: Helm renders either without a word; the value walk names the top-level
    one, and the strict decoder the one inside the configuration the chart passes on."""
    values = json.loads(json.dumps(envoy_gateway.release["values"]))
    values["config"]["envoyGateway"]["extensionManager"]["hook"] = {"xdsTranslator": {"post": ["Translation"]}}
    values["deployement"] = {"replicas": 2}
    undeclared, _ = unread_keys(envoy_gateway, values, tmp_path, rendering=False)
    assert undeclared == ["deployement.replicas"], undeclared
    done = strict_envoy_gateway_config(envoy_gateway_config(envoy_gateway.render(values, tmp_path)), tmp_path)
    assert done.returncode != 0 and '"hook"' in done.stderr, done.stderr


_installed_crds: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def remove_installed_crds(kube):
    """The CRDs the admission test installed go when the module ends: the other tests see the control plane as
    they would without it."""
    yield
    for name in _installed_crds:
        kube.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)


def install_crd_of(kube: Kube, manifest: dict, tmp_path_factory) -> None:
    """Where MANIFEST is of a kind the server does not serve yet, the CRD another stack chart installs before it
    (trust-manager's Issuer is cert-manager's), applied for real."""
    group = manifest["apiVersion"].rpartition("/")[0]
    try:
        kube.resource(manifest["apiVersion"], manifest["kind"])
        return
    except AssertionError:
        pass
    for spec in CHARTS:
        for crd in rendered(spec, tmp_path_factory).manifests:
            if (crd["kind"] == "CustomResourceDefinition" and crd["spec"]["group"] == group
                    and crd["spec"]["names"]["kind"] == manifest["kind"]):
                kube.apply(crd)
                _installed_crds.append(crd["metadata"]["name"])
                wait_for(f"CRD {crd['metadata']['name']} established",
                         lambda name=crd["metadata"]["name"]: installs.is_established(kube, name), 60)
                return


def test_the_rendered_manifests_are_admitted(stack_chart, platform: Kube, tmp_path_factory):
    """Every manifest, CRDs first as Helm installs them, through the API server's admission without being stored
    (server-side dry-run apply, unknown fields refused); the release namespace exists as provider-helm creates it."""
    namespace = stack_chart.release["namespace"]
    platform.ensure_namespace(namespace)
    kinds = {m["kind"] for m in stack_chart.manifests}
    assert kinds & {"Deployment", "DaemonSet"}, kinds
    refused = []
    for manifest in stack_chart.manifests:
        manifest = json.loads(json.dumps(manifest))
        meta = manifest.setdefault("metadata", {})
        try:
            install_crd_of(platform, manifest, tmp_path_factory)
            if platform.resource(manifest["apiVersion"], manifest["kind"]).namespaced:
                meta.setdefault("namespace", namespace)
            platform.dry_run(manifest)
        except (AssertionError, ApiError) as error:
            refused.append(f"{manifest['kind']} {meta.get('name')}: {error}")
    assert not refused, "the API server refuses what the chart renders:\n" + "\n".join(refused)
