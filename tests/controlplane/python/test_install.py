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

The installation is install_step.py's, made once per run by conftest.py's session fixture; test_upgrade.py goes on
with it after these tests (another release and back, a release that cannot start, bad input), then
test_least_privilege.py (what each package's ServiceAccount may do).
"""

from __future__ import annotations

import base64

import xpkgs
from install_step import (CONVERGE_SECONDS, EXISTING_CLUSTER, FUNCTION_OBJECT, INSTALL_SECONDS, NAMESPACE, PKG,
                          POD_SECONDS, PROVIDER_KUBERNETES_CONFIG, Installed, conditions, function_endpoints,
                          function_on_real_node, is_true, on_real_node, patch_runtime_config, revision_of,
                          running_on_real_node, wait_installed, wait_on_real_node)
from installs import install_workload_crds
from kube import REPO_ROOT, Kube, load_yaml_documents, wait_for
from simulated_nodes import apply_simulated, cluster_nodes, device_classes
from test_scheduling import (all_engines_running, apply_until_serving, cache_volume, engine_pods, existing_cluster,
                             standalone_deployment)
from workload import API, OBJECT_API, composed_by, kubeconfig_pointing_back


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
