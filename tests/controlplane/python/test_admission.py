"""Real admission for everything the examples compose.

Each example is rendered with `modelplane-function render` (as the README shows), and every document it prints is
sent to kube-apiserver as a server-side dry run (`dryRun=All`) with `fieldValidation=Strict`: the composite itself,
every composed resource, and, for provider-kubernetes Objects, the manifest each one carries (what provider-kubernetes
would apply to the workload cluster, here checked against the same server with the serving stacks' CRDs installed).
The server runs the real structural schema, pruning (reported as an error under Strict), defaulting, CEL rules and
its admission plugins; nothing is stored.
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path

import pytest
import yaml

import installs
from kube import REPO_ROOT, ApiError, Kube, describe, load_yaml_documents

EXAMPLES = REPO_ROOT / "examples"
CLASSES = EXAMPLES / "classes"
CLUSTERS = EXAMPLES / "clusters"
# The clouds' provider configs, which a provisioned cluster requires before it composes anything.
INSTALL = EXAMPLES / "install"
STANDARD = REPO_ROOT / "tests" / "fixtures" / "clusters" / "standard"
DYNAMO = REPO_ROOT / "tests" / "fixtures" / "clusters" / "dynamo"
FLEET = REPO_ROOT / "tests" / "fixtures" / "model-cache" / "fleet.yaml"
SERVICES = REPO_ROOT / "tests" / "fixtures" / "services" / "fleet.yaml"
KEDA = REPO_ROOT / "tests" / "crds" / "keda" / "v2.20.2" / "keda.sh_scaledobjects.yaml"

# (example, what its function call needs), as the documentation renders them.
RENDERED = [
    *[(path, ()) for path in sorted(CLASSES.glob("*.yaml"))],
    *[(path, (CLASSES, INSTALL)) for path in sorted(CLUSTERS.glob("*.yaml"))],
    (EXAMPLES / "deployments" / "qwen3-coder.yaml", (STANDARD,)),
    (EXAMPLES / "deployments" / "qwen3-coder.yaml", (DYNAMO,)),
    (EXAMPLES / "deployments" / "qwen3-small.yaml", (STANDARD, DYNAMO)),
    (EXAMPLES / "deployments" / "qwen3-235b-pd.yaml", (STANDARD,)),
    (EXAMPLES / "deployments" / "qwen3-235b-pd.yaml", (DYNAMO,)),
    # With KEDA's CRD answered (as Crossplane reads it from the control plane), its ScaledObject too.
    (EXAMPLES / "deployments" / "qwen3-small-autoscaled.yaml", (STANDARD, KEDA)),
    # Scaling to zero: the wake-up trigger, and the standby ModelEndpoint.
    (EXAMPLES / "deployments" / "qwen3-small-to-zero.yaml", (STANDARD, KEDA)),
    (EXAMPLES / "caches" / "qwen3-coder.yaml", (FLEET,)),
    (EXAMPLES / "services" / "fleet-gateway.yaml", (SERVICES,)),
    # Upstream's shape, with the gateway's own MetalLB pool.
    (EXAMPLES / "services" / "fleet-gateway-metallb.yaml", (SERVICES,)),
    (EXAMPLES / "services" / "qwen3-coder.yaml", (SERVICES,)),
]
PROVIDER_KUBERNETES_GROUPS = ("kubernetes.crossplane.io", "kubernetes.m.crossplane.io")


def case_id(case: tuple[Path, tuple[Path, ...]]) -> str:
    xr, required = case
    return "+".join([str(xr.relative_to(EXAMPLES))] + [p.name for p in required])


def is_object(obj: dict) -> bool:
    return obj.get("kind") == "Object" and obj.get("apiVersion", "").rpartition("/")[0] in PROVIDER_KUBERNETES_GROUPS


def as_crossplane_creates(obj: dict) -> dict:
    """`render` prints owner references with an empty uid (it has no server to ask); Crossplane fills in the
    composite's. An empty uid is refused by the server, so a made-up one stands in."""
    obj = copy.deepcopy(obj)
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if not ref.get("uid"):
            ref["uid"] = str(uuid.uuid4())
    return obj


def admit(kube: Kube, obj: dict, origin: str, problems: list[str]) -> None:
    meta = obj.get("metadata") or {}
    if meta.get("namespace"):
        kube.ensure_namespace(meta["namespace"])
    try:
        kube.dry_run(obj)
    except ApiError as error:
        problems.append(f"{origin}: {describe(obj)}: {error.message}")
    except AssertionError as error:
        problems.append(f"{origin}: {describe(obj)}: {error}")


def admit_composed(kube: Kube, composed: list[dict], problems: list[str]) -> None:
    for obj in composed:
        name = ((obj.get("metadata") or {}).get("annotations") or {}).get("crossplane.io/composition-resource-name")
        origin = f"composed {name}"
        admit(kube, as_crossplane_creates(obj), origin, problems)
        if is_object(obj):
            manifest = ((obj.get("spec") or {}).get("forProvider") or {}).get("manifest")
            assert isinstance(manifest, dict), f"{origin}: an Object without spec.forProvider.manifest"
            admit(kube, manifest, f"{origin}: its manifest", problems)


@pytest.mark.parametrize("case", RENDERED, ids=case_id)
def test_every_composed_object_passes_strict_server_side_admission(platform, case):
    xr, required = case
    # render prints the composite as Crossplane would write it back (status only); the example itself is what a
    # user applies.
    composed = installs.render(xr, *required)[1:]
    problems: list[str] = []
    for composite in load_yaml_documents(xr):
        admit(platform, composite, "the example", problems)
    admit_composed(platform, composed, problems)
    assert composed or xr.parent == CLASSES, f"{case_id(case)} composed nothing"
    assert not problems, "the API server refused:\n" + "\n".join(problems)


@pytest.mark.parametrize("cluster", sorted(CLUSTERS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_stage_of_every_example_cluster_passes_strict_server_side_admission(platform, cluster):
    """`render --until-ready` takes a cluster through every stage its cloud's provider would (each stage composed
    once the one before is simulated Ready, with the IDs a provider reports); what it ends with is everything the
    cluster composes, each of which must pass the same admission as the first stage's."""
    composed = [d for d in installs.render(cluster, CLASSES, INSTALL, until_ready=True)[1:] if d.get("kind") != "Result"]
    kinds = {d.get("kind") for d in composed}
    assert "Release" in kinds, f"{cluster.name} never reached its components: {sorted(kinds)}"
    problems: list[str] = []
    admit_composed(platform, composed, problems)
    assert not problems, "the API server refused:\n" + "\n".join(problems)


def test_provider_eks_example_passes_strict_server_side_admission(platform):
    problems: list[str] = []
    for obj in load_yaml_documents(EXAMPLES / "provider-eks" / "cluster.yaml"):
        admit(platform, obj, "examples/provider-eks/cluster.yaml", problems)
    assert not problems, "the API server refused:\n" + "\n".join(problems)


def test_a_misspelt_field_is_refused_by_name(platform):
    """The check itself: the server must name an unknown field in a composed manifest, not prune it silently."""
    documents = installs.render(EXAMPLES / "deployments" / "qwen3-coder.yaml", STANDARD)
    manifest = next(o["spec"]["forProvider"]["manifest"] for o in documents[1:]
                    if is_object(o) and o["spec"]["forProvider"]["manifest"]["kind"] == "LeaderWorkerSet")
    manifest = copy.deepcopy(manifest)
    manifest["spec"]["startupPolicyy"] = "LeaderCreated"
    problems: list[str] = []
    admit(platform, manifest, "mutated", problems)
    assert len(problems) == 1 and ".spec.startupPolicyy: field not declared in schema" in problems[0], problems


@pytest.mark.parametrize("deployment", ["qwen3-coder.yaml", "qwen3-small.yaml", "qwen3-235b-pd.yaml"])
def test_routing_objects_of_a_replica_on_a_cluster_with_a_gateway_pass_strict_server_side_admission(
        platform, tmp_path, deployment):
    """Both fixture clusters given a gateway address: every replica also gets its InferencePool, endpoint picker
    and HTTPRoute, checked by the server against the vendored Gateway API and GAIE CRDs and Kubernetes' kinds."""
    for source in [*STANDARD.glob("*.yaml"), *DYNAMO.glob("*.yaml")]:
        for doc in load_yaml_documents(source):
            if doc["kind"] == "InferenceCluster":
                doc["status"]["gateway"] = {"address": "203.0.113.7", "admits": "Nobody"}  # its client policy held
            (tmp_path / f"{source.parent.name}-{source.name}").write_text(yaml.safe_dump(doc))
    composed = installs.render(EXAMPLES / "deployments" / deployment, tmp_path)[1:]
    manifests = [((o.get("spec") or {}).get("forProvider") or {}).get("manifest") for o in composed if is_object(o)]
    kinds = {m["kind"] for m in manifests}
    assert {"InferencePool", "HTTPRoute", "Role", "RoleBinding", "ServiceAccount", "ConfigMap"} <= kinds, kinds
    problems: list[str] = []
    for obj in composed:
        admit(platform, as_crossplane_creates(obj), "composed", problems)
    for manifest in manifests:
        admit(platform, manifest, "a manifest", problems)
    assert not problems, "the API server refused:\n" + "\n".join(problems)


@pytest.mark.parametrize("stack", [STANDARD, DYNAMO], ids=["standard", "dynamo"])
def test_prefill_decode_gangs_pass_strict_server_side_admission(platform, tmp_path, stack):
    """The prefill/decode example with both engines made Leader + Worker gangs, on a cluster with room for both and
    a gateway: the LeaderWorkerSets or PodCliqueSets (role labels, the decode leader's sidecar), the pool, picker
    and route are admitted by the server against the vendored CRDs."""
    xr = load_yaml_documents(EXAMPLES / "deployments" / "qwen3-235b-pd.yaml")[0]
    for engine in xr["spec"]["template"]["spec"]["engines"]:
        leader = copy.deepcopy(engine["members"][0])
        leader["role"] = "Leader"
        worker = copy.deepcopy(leader)
        worker["role"] = "Worker"
        worker["worker"] = {"nodes": 1}
        engine["members"] = [leader, worker]
    (tmp_path / "pd.yaml").write_text(yaml.safe_dump(xr))
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    for source in stack.glob("*.yaml"):
        for doc in load_yaml_documents(source):
            if doc["kind"] == "InferenceCluster":
                doc["status"]["pools"][0]["nodeCount"] = 4
                doc["status"]["gateway"] = {"address": "203.0.113.7", "admits": "Nobody"}  # its client policy held
            (clusters / source.name).write_text(yaml.safe_dump(doc))
    composed = installs.render(tmp_path / "pd.yaml", clusters)[1:]
    manifests = [((o.get("spec") or {}).get("forProvider") or {}).get("manifest") for o in composed if is_object(o)]
    gangs = [m for m in manifests if m["kind"] in ("LeaderWorkerSet", "PodCliqueSet")]
    assert len(gangs) == 2 and "pd-sidecar" in str(gangs), [m["kind"] for m in manifests]
    problems: list[str] = []
    for obj in composed:
        admit(platform, as_crossplane_creates(obj), "composed", problems)
    for manifest in manifests:
        admit(platform, manifest, "a manifest", problems)
    assert not problems, "the API server refused:\n" + "\n".join(problems)


def test_mutual_tls_on_the_hop_to_a_cluster_gateway_passes_strict_server_side_admission(platform, tmp_path):
    """The fleet gateway taken to Ready (`render --until-ready`) composes its client CA, certificate, Bundle and
    the EnvoyProxy presenting the certificate, and publishes the CA; a cluster rendered with that gateway requires
    it: a ClientTrafficPolicy on its gateway and the ConfigMap of trusted CAs. All of it passes admission."""
    documents = installs.render(EXAMPLES / "services" / "fleet-gateway.yaml", SERVICES, until_ready=True)
    gateway, composed = documents[0], [d for d in documents[1:] if d.get("kind") != "Result"]
    manifests = {(o["spec"]["forProvider"]["manifest"]["kind"], o["spec"]["forProvider"]["manifest"]["metadata"]["name"])
                 for o in composed if is_object(o)}
    assert ("EnvoyProxy", "fleet-gateway-proxy") in manifests, sorted(manifests)
    assert ("Certificate", "fleet-gateway-client") in manifests, sorted(manifests)
    cas = (gateway.get("status") or {}).get("clientCertificateAuthorities") or []
    assert len(cas) == 1 and cas[0].startswith("-----BEGIN CERTIFICATE-----"), gateway.get("status")
    problems: list[str] = []
    admit_composed(platform, composed, problems)

    published = tmp_path / "gateway.yaml"
    published.write_text(yaml.safe_dump(gateway))
    cluster = CLUSTERS / "existing-onprem.yaml"
    documents = installs.render(cluster, CLASSES, INSTALL, published, until_ready=True)
    composed = [d for d in documents[1:] if d.get("kind") != "Result"]
    policies = [o["spec"]["forProvider"]["manifest"] for o in composed if is_object(o)
                and o["spec"]["forProvider"]["manifest"]["kind"] == "ClientTrafficPolicy"]
    assert len(policies) == 1, "the cluster gateway requires the fleet gateway's client certificate"
    refs = policies[0]["spec"]["tls"]["clientValidation"]["caCertificateRefs"]
    assert refs == [{"group": "", "kind": "ConfigMap", "name": "modelplane-fleet-client-cas"}]
    status = documents[0].get("status") or {}
    assert len((status.get("gateway") or {}).get("trustedClientAuthorities") or []) == 1, status.get("gateway")
    admit_composed(platform, composed, problems)
    assert not problems, "the API server refused:\n" + "\n".join(problems)


UPSTREAM_FIXTURES = REPO_ROOT / "function" / "tests" / "fixtures"
# Upstream Modelplane's documentation manifests, vendored verbatim (each folder's SOURCES.md says from where).
UPSTREAM = ("upstream", "upstream-clouds", "upstream-docs", "upstream-routing")
# Upstream's own kind that is not ours (its ModelDeployment composes one per replica); docs/api.md says so.
NOT_SERVED = ("ModelReplica",)


def test_upstreams_documentation_manifests_are_admitted_unchanged(platform):
    """What a user migrating from upstream applies: every object of a kind we serve, as upstream's docs write it,
    passes the API server's admission of our XRDs (schema, defaults, CEL, unknown fields refused). A namespaced one
    without a namespace goes to `default`, as `kubectl apply` sends it."""
    problems: list[str] = []
    admitted: dict[str, int] = {}
    for folder in UPSTREAM:
        for path in sorted((UPSTREAM_FIXTURES / folder).rglob("*.yaml")):
            for doc in load_yaml_documents(path):
                if doc.get("apiVersion") != "modelplane.ai/v1alpha1" or doc.get("kind") in NOT_SERVED:
                    continue
                if platform.resource(doc["apiVersion"], doc["kind"]).namespaced:
                    doc.setdefault("metadata", {}).setdefault("namespace", "default")
                admit(platform, doc, str(path.relative_to(UPSTREAM_FIXTURES)), problems)
                admitted[doc["kind"]] = admitted.get(doc["kind"], 0) + 1
    assert admitted.get("InferenceGateway", 0) >= 4, admitted
    assert not problems, "the API server refused:\n" + "\n".join(problems)
