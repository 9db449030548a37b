"""The cluster gateway we compose, read by Envoy Gateway's own translator: `egctl x translate` (v1.8.1, the release
our vendored Envoy Gateway CRDs come from, built by `controlplane.sh build egctl`) turns the Gateway API and Envoy
Gateway objects a rendered InferenceCluster composes, plus the Secret the real cluster's cert-manager would issue,
into the status Envoy Gateway would write and the xDS Envoy would load. No API server is needed.

Proven here: every object is Accepted with its references resolved, and the HTTPS listener requires a client
certificate validated against exactly the CA we mean, in each state (refusing everyone before a fleet CA, the
fleet CA once published, for every example cluster of each cloud, nothing when the cluster opts out), and what the
translator reports when a reference is broken (a missing CA Secret named by our cluster's status too). On the fleet gateway: its Gateway, EnvoyProxy and caller-key
SecurityPolicy, and a ModelService's Backends, are accepted; a route to a TLS backend presents the fleet client
certificate and checks the backend's name; the caller keys are enforced on the route; a caller Secret that cannot be
copied is named by the gateway's status, and the policy composed meanwhile denies every route; a service selecting no
endpoint says so and gives the translator no route. Not proven: Envoy's data
path (no Envoy runs here), the replicas' routes (their InferencePool backends go to Envoy AI Gateway's extension
server, which egctl does not run), and the fleet's AIGatewayRoutes (model names, weights, priorities): Envoy AI
Gateway's controller turns those into HTTPRoutes and is not served by the Go module proxy, so a stand-in HTTPRoute
takes their place.
"""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import installs
from kube import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"
CLUSTER = EXAMPLES / "clusters" / "existing-onprem.yaml"
SERVICES = REPO_ROOT / "tests" / "fixtures" / "services" / "fleet.yaml"
REFUSE_ALL_CA = (REPO_ROOT / "function" / "src" / "workload" / "cluster_gateway" / "refuse-all-ca.pem").read_text()
# What egctl reads: Gateway API and Envoy Gateway kinds, and the Secrets and ConfigMaps they name.
TRANSLATED_KINDS = {"GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "ReferenceGrant", "ClientTrafficPolicy",
                    "BackendTrafficPolicy", "SecurityPolicy", "BackendTLSPolicy", "EnvoyProxy", "Backend",
                    "ConfigMap", "Secret"}
NAMESPACE = "modelplane-system"
SERVING_SECRET = "cluster-gateway-tls"
TRUST = "modelplane-fleet-client-cas"
POLICY = "cluster-gateway-clients"
# The fleet gateway's copy of the example's caller keys (ml-team-callers), made by provider-kubernetes.
CALLERS = "callers-ml-team-callers"


def _certificate(common_name: str, *, ca: bool, not_after: datetime.datetime) -> tuple[str, str]:
    """A self-signed certificate and its key, PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_after - datetime.timedelta(days=365)).not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem.decode()


def serving_secret() -> dict:
    """The gateway's serving certificate, which cert-manager issues on the real cluster."""
    tomorrow = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    cert, key = _certificate("cluster-gateway.modelplane.internal", ca=False, not_after=tomorrow)
    b64 = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": SERVING_SECRET, "namespace": NAMESPACE},
            "data": {"tls.crt": b64(cert), "tls.key": b64(key)}}


def composed_for_egctl(documents: list[dict]) -> list[dict]:
    """The manifests of the provider-kubernetes Objects a render composed that egctl reads."""
    manifests = [d["spec"]["forProvider"]["manifest"] for d in documents[1:]
                 if d.get("kind") == "Object" and "manifest" in d.get("spec", {}).get("forProvider", {})]
    return [m for m in manifests if m["kind"] in TRANSLATED_KINDS]


def translate(resources: list[dict], tmp_path: Path, to: str) -> dict:
    """`egctl x translate --from gateway-api --to TO -o json` of RESOURCES."""
    source = tmp_path / f"input-{to.replace(',', '-')}.yaml"
    source.write_text(yaml.safe_dump_all(resources))
    argv = [str(installs.built_component("egctl")), "x", "translate", "--from", "gateway-api", "--to", to,
            "-t", "all", "-o", "json", "-f", str(source)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"egctl refused the input:\n{done.stderr}"
    return json.loads(done.stdout)


def conditions(obj: dict) -> dict[str, dict]:
    """A translated object's conditions by type: a policy's (per ancestor, the first) or a listener's."""
    status = obj.get("status") or {}
    found = (status.get("ancestors") or [{}])[0].get("conditions") or status.get("conditions") or []
    return {c["type"]: c for c in found}


def listener_conditions(translated: dict) -> dict[str, dict]:
    (gateway,) = translated["gateways"]
    (listener,) = gateway["status"]["listeners"]
    return {c["type"]: c for c in listener["conditions"]}


def https_listener_tls(translated: dict) -> dict:
    """The DownstreamTlsContext of the xDS listener Envoy would load for the cluster gateway's HTTPS listener."""
    (proxy,) = translated["xds"].values()
    dumps = [c for c in proxy["configs"] if c["@type"].endswith("ListenersConfigDump")]
    chains = [chain for dump in dumps for listener in dump.get("dynamicListeners") or []
              for chain in listener["activeState"]["listener"].get("filterChains") or []]
    contexts = [chain["transportSocket"]["typedConfig"] for chain in chains if "transportSocket" in chain]
    assert len(contexts) == 1, f"one HTTPS filter chain expected: {contexts}"
    return contexts[0]


def trusted_client_ca(resources: list[dict], tmp_path: Path) -> str | None:
    """The PEM Envoy Gateway hands the listener as its client CA (from its IR: xDS names it by SDS only)."""
    ir = translate(resources, tmp_path, "ir")
    listeners = [listener for infra in ir["xdsIR"].values() for listener in infra.get("http") or []]
    (listener,) = listeners
    ca = ((listener.get("tls") or {}).get("caCertificate") or {}).get("certificate")
    return base64.b64decode(ca).decode() if ca else None


def render_cluster(tmp_path: Path, *required: Path, opt_out: bool = False, cluster: Path = CLUSTER) -> list[dict]:
    if opt_out:
        xr = yaml.safe_load(cluster.read_text())
        xr["spec"]["gateway"] = {"beforeFleetClientCA": "AdmitAll"}
        cluster = tmp_path / "opted-out.yaml"
        cluster.write_text(yaml.safe_dump(xr))
    return installs.render(cluster, EXAMPLES / "classes", EXAMPLES / "install", *required, until_ready=True)


def published_fleet_gateway(tmp_path: Path) -> tuple[Path, str]:
    """The example fleet gateway taken to Ready, as a file a cluster can require, and the CA it publishes."""
    gateway = installs.render(EXAMPLES / "services" / "fleet-gateway.yaml", SERVICES, until_ready=True)[0]
    (ca,) = gateway["status"]["clientCertificateAuthorities"]
    path = tmp_path / "fleet-gateway.yaml"
    path.write_text(yaml.safe_dump(gateway))
    return path, ca


def assert_accepted_and_requiring(resources: list[dict], tmp_path: Path) -> dict:
    translated = translate(resources, tmp_path, "gateway-api,xds")
    assert conditions(translated["gatewayClass"])["Accepted"]["status"] == "True", translated["gatewayClass"]
    listener = listener_conditions(translated)
    for kind in ("Accepted", "ResolvedRefs", "Programmed"):
        assert listener[kind]["status"] == "True", listener
    (policy,) = translated["clientTrafficPolicies"]
    assert policy["metadata"]["name"] == POLICY
    assert conditions(policy)["Accepted"]["status"] == "True", policy["status"]
    assert https_listener_tls(translated).get("requireClientCertificate") is True
    return translated


def test_before_any_fleet_ca_the_cluster_gateway_requires_a_certificate_under_the_placeholder(tmp_path):
    documents = render_cluster(tmp_path)
    assert documents[0]["status"]["gateway"]["admits"] == "Nobody"
    resources = composed_for_egctl(documents) + [serving_secret()]
    assert_accepted_and_requiring(resources, tmp_path)
    assert trusted_client_ca(resources, tmp_path).strip() == REFUSE_ALL_CA.strip()


@pytest.mark.parametrize("cluster", sorted((EXAMPLES / "clusters").glob("*.yaml")), ids=lambda path: path.stem)
def test_once_the_fleet_gateway_publishes_its_ca_the_cluster_gateway_requires_a_certificate_under_it(tmp_path,
                                                                                                    cluster):
    """Every example cluster, each cloud's and both stacks', provisioned or Existing."""
    gateway, ca = published_fleet_gateway(tmp_path)
    documents = render_cluster(tmp_path, gateway, cluster=cluster)
    assert documents[0]["status"]["gateway"]["admits"] == "FleetGateways"
    resources = composed_for_egctl(documents) + [serving_secret()]
    assert_accepted_and_requiring(resources, tmp_path)
    assert trusted_client_ca(resources, tmp_path).strip() == ca.strip()


def test_an_opted_out_cluster_gateway_requires_no_certificate_until_a_fleet_ca(tmp_path):
    documents = render_cluster(tmp_path, opt_out=True)
    resources = composed_for_egctl(documents) + [serving_secret()]
    assert not [r for r in resources if r["kind"] == "ClientTrafficPolicy"]
    translated = translate(resources, tmp_path, "gateway-api,xds")
    assert listener_conditions(translated)["Programmed"]["status"] == "True"
    assert "requireClientCertificate" not in https_listener_tls(translated)
    assert trusted_client_ca(resources, tmp_path) is None


def test_broken_references_are_reported_by_the_translator(tmp_path):
    resources = composed_for_egctl(render_cluster(tmp_path)) + [serving_secret()]

    # The serving certificate's Secret missing: the listener is not programmed, naming the Secret.
    translated = translate([r for r in resources if r["kind"] != "Secret"], tmp_path, "gateway-api,xds")
    listener = listener_conditions(translated)
    assert listener["ResolvedRefs"]["reason"] == "InvalidCertificateRef", listener
    assert SERVING_SECRET in listener["ResolvedRefs"]["message"]
    assert listener["Programmed"]["status"] == "False"

    # The trusted CAs' ConfigMap missing: the policy is refused, naming the ConfigMap. Envoy Gateway then still
    # requires a certificate but validates it against nothing (an empty validation context), which would admit
    # any certificate: why the ConfigMap and the policy are composed together and the policy never alone.
    translated = translate([r for r in resources if r["metadata"]["name"] != TRUST], tmp_path, "gateway-api,xds")
    (policy,) = translated["clientTrafficPolicies"]
    accepted = conditions(policy)["Accepted"]
    assert accepted["status"] == "False" and TRUST in accepted["message"], accepted
    tls = https_listener_tls(translated)
    assert not tls["commonTlsContext"].get("validationContextSdsSecretConfig"), tls

    # Only an expired CA in the bundle: refused the same way, naming it as expired.
    expired, _ = _certificate("expired fleet CA", ca=True,
                              not_after=datetime.datetime(2021, 1, 1, tzinfo=datetime.timezone.utc))
    stale = [dict(r, data={"ca.crt": expired}) if r["metadata"]["name"] == TRUST else r for r in resources]
    translated = translate(stale, tmp_path, "gateway-api,xds")
    (policy,) = translated["clientTrafficPolicies"]
    accepted = conditions(policy)["Accepted"]
    assert accepted["status"] == "False" and "has expired" in accepted["message"], accepted
    assert not https_listener_tls(translated)["commonTlsContext"].get("validationContextSdsSecretConfig")


def unpublished_ca_observed(tmp_path: Path) -> Path:
    """What provider-kubernetes reports for a cluster whose cert-manager never issued the gateway's CA Secret: the
    Gateway has its address, and the ConfigMap trust-manager would publish the CA into does not exist."""
    def observed(key: str, status: dict) -> dict:
        return {"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
                "metadata": {"name": key, "annotations": {"crossplane.io/composition-resource-name": key}},
                "spec": {"forProvider": {"manifest": {}}}, "status": status}

    addressed = observed("object-cluster-gateway-gateway", {
        "atProvider": {"manifest": {"status": {"addresses": [{"value": "203.0.113.7"}]}}},
        "conditions": [{"type": "Ready", "status": "True", "reason": "Available"},
                       {"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}]})
    unpublished = observed("object-cluster-gateway-ca-published", {"conditions": [
        {"type": "Synced", "status": "False", "reason": "ReconcileError",
         "message": "observe failed: external resource does not exist"}]})
    path = tmp_path / "observed-ca.yaml"
    path.write_text(yaml.safe_dump_all([addressed, unpublished]))
    return path


def test_a_gateway_whose_ca_secret_is_missing_is_named_by_our_status_and_by_the_translator(tmp_path):
    """cert-manager's CA Secret missing: nothing signs the serving certificate and nothing publishes the CA. Our
    status and the translator agree: the InferenceCluster's GatewayReady names the empty field, the CA Secret, the
    serving certificate's Secret and the provider's words, and the translator leaves the listener unprogrammed,
    naming that same serving Secret."""
    cluster = installs.render(CLUSTER, EXAMPLES / "classes", EXAMPLES / "install",
                              observed=(unpublished_ca_observed(tmp_path),))[0]
    ready = {c["type"]: c for c in cluster["status"]["conditions"]}["GatewayReady"]
    assert (ready["status"], ready["reason"]) == ("False", "CertificatePending"), ready
    for named in ("status.gateway.caCertificate is empty", "CA Secret cert-manager/modelplane-cluster-gateway-ca",
                  f"Secret {NAMESPACE}/{SERVING_SECRET}",
                  "(provider-kubernetes: observe failed: external resource does not exist)"):
        assert named in ready["message"], (named, ready["message"])
    assert "caCertificate" not in cluster["status"]["gateway"], cluster["status"]["gateway"]

    # The same cluster's objects, without the serving certificate nobody could issue.
    translated = translate(composed_for_egctl(render_cluster(tmp_path)), tmp_path, "gateway-api,xds")
    listener = listener_conditions(translated)
    assert listener["ResolvedRefs"]["reason"] == "InvalidCertificateRef", listener
    assert f"{NAMESPACE}/{SERVING_SECRET}" in listener["ResolvedRefs"]["message"], listener
    assert listener["Programmed"]["status"] == "False", listener


def fleet_gateway_resources(tmp_path: Path) -> list[dict]:
    """What the example fleet gateway and a ModelService compose for Envoy Gateway, with what the real clusters
    would hold: the caller keys provider-kubernetes copies in, the client certificate cert-manager issues, the
    GatewayClass the fleet gateway's cluster composes, and a stand-in for the HTTPRoute Envoy AI Gateway makes of
    the ModelService's AIGatewayRoute, to the hosted provider's Backend."""
    fleet = installs.render(EXAMPLES / "services" / "fleet-gateway.yaml", SERVICES, until_ready=True)
    service = installs.render(EXAMPLES / "services" / "qwen3-coder.yaml", SERVICES, until_ready=True)
    cluster_class = [r for r in composed_for_egctl(render_cluster(tmp_path)) if r["kind"] == "GatewayClass"]
    resources = composed_for_egctl(fleet) + composed_for_egctl(service) + cluster_class
    callers = next(r for r in resources if r["kind"] == "Secret" and r["metadata"]["name"] == CALLERS)
    callers["data"] = {"alice": base64.b64encode(b"key-alice").decode()}
    client = serving_secret()
    client["metadata"]["name"] = "fleet-gateway-client"
    hosted = next(r for r in resources if r["kind"] == "Backend" and "tls" in r["spec"])
    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "stand-in", "namespace": hosted["metadata"]["namespace"]},
             "spec": {"parentRefs": [{"name": "inference-gateway", "namespace": NAMESPACE}],
                      "rules": [{"backendRefs": [{"group": "gateway.envoyproxy.io", "kind": "Backend",
                                                  "name": hosted["metadata"]["name"]}]}]}}
    return resources + [client, route]


def xds_configs(translated: dict, kind: str) -> list[dict]:
    (proxy,) = translated["xds"].values()
    return [c for c in proxy["configs"] if c["@type"].endswith(kind)]


def xds_routes(translated: dict) -> list[dict]:
    return [r for dump in xds_configs(translated, "RoutesConfigDump")
            for config in dump.get("dynamicRouteConfigs") or []
            for host in config["routeConfig"].get("virtualHosts") or [] for r in host.get("routes") or []]


def test_the_fleet_gateway_presents_its_client_certificate_and_enforces_caller_keys(tmp_path):
    translated = translate(fleet_gateway_resources(tmp_path), tmp_path, "gateway-api,xds")
    assert listener_conditions(translated)["Programmed"]["status"] == "True"
    (policy,) = translated["securityPolicies"]
    assert conditions(policy)["Accepted"]["status"] == "True", policy["status"]
    for backend in translated["backends"]:
        assert conditions(backend)["Accepted"]["status"] == "True", backend
    (route,) = translated["httpRoutes"]
    route_conditions = {c["type"]: c for c in route["status"]["parents"][0]["conditions"]}
    assert route_conditions["Accepted"]["status"] == route_conditions["ResolvedRefs"]["status"] == "True"

    clusters = [c["cluster"] for dump in xds_configs(translated, "ClustersConfigDump")
                for c in dump.get("dynamicActiveClusters") or [] if "stand-in" in c["cluster"]["name"]]
    sockets = [m["transportSocket"]["typedConfig"] for c in clusters for m in c.get("transportSocketMatches") or []]
    assert sockets, clusters
    for tls in sockets:
        presented = [s["name"] for s in tls["commonTlsContext"]["tlsCertificateSdsSecretConfigs"]]
        assert presented == [f"{NAMESPACE}/fleet-gateway-client"], tls
        assert tls["commonTlsContext"]["combinedValidationContext"]["defaultValidationContext"], tls

    routes = xds_routes(translated)
    assert routes
    for r in routes:
        keys = r.get("typedPerFilterConfig", {}).get("envoy.filters.http.api_key_auth")
        assert keys and [c["client"] for c in keys["credentials"]] == ["alice"], r


def test_a_missing_caller_key_secret_is_reported_by_the_translator(tmp_path):
    resources = [r for r in fleet_gateway_resources(tmp_path) if r["metadata"]["name"] != CALLERS]
    translated = translate(resources, tmp_path, "gateway-api,xds")
    (policy,) = translated["securityPolicies"]
    accepted = conditions(policy)["Accepted"]
    assert accepted["status"] == "False" and CALLERS in accepted["message"], accepted
    # Fail closed: with the keys unreadable every route answers 500 rather than admitting callers unchecked.
    routes = xds_routes(translated)
    assert routes and all(r.get("directResponse", {}).get("status") == 500 for r in routes), routes


def refused_copy_observed(tmp_path: Path) -> Path:
    """What provider-kubernetes reports when the example's caller Secret was made in the team's namespace, not in
    Modelplane's: the copy's owner ConfigMap exists, the empty copy exists and is owned, and the reference to the
    Secret fails. Shaped as the real provider writes it (only `Synced` carries the generation)."""
    owner_uid = "0b3f6a1e-6c1d-4a55-9d2e-7a5c1f0e2b44"
    annotated = lambda key: {"namespace": NAMESPACE,  # noqa: E731
                             "annotations": {"crossplane.io/composition-resource-name": key}}
    owner = {"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
             "metadata": {"name": "fleet-owner", **annotated("secret-owner")},
             "status": {"atProvider": {"manifest": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                 "name": "inference-gateway-secret-owner", "namespace": NAMESPACE, "uid": owner_uid}}}}}
    copy = {"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
            "metadata": {"name": "fleet-callers", "generation": 3,
                         "finalizers": ["finalizer.managedresource.crossplane.io"], **annotated(CALLERS)},
            "spec": {"references": [{"patchesFrom": {"apiVersion": "v1", "kind": "Secret", "name": "ml-team-callers",
                                                     "namespace": NAMESPACE, "fieldPath": "data"},
                                     "toFieldPath": "data"}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "Available"},
                {"type": "Synced", "status": "False", "reason": "ReconcileError", "observedGeneration": 3,
                 "message": f'cannot resolve references: secrets "ml-team-callers" not found in {NAMESPACE}'}],
                "atProvider": {"manifest": {"apiVersion": "v1", "kind": "Secret", "data": {"redacted": None},
                                            "metadata": {"name": CALLERS, "namespace": NAMESPACE,
                                                         "ownerReferences": [{"uid": owner_uid}]}}}}}
    path = tmp_path / "observed.yaml"
    path.write_text(yaml.safe_dump_all([owner, copy]))
    return path


def test_a_caller_secret_in_the_wrong_namespace_is_named_by_our_status_and_refuses_every_caller(tmp_path):
    """Our status and the translator agree: the gateway names the field listing the unreadable Secret, with the
    provider's words, and says every request is refused; the policy it composes meanwhile is Accepted by Envoy
    Gateway and denies every route."""
    fleet = installs.render(EXAMPLES / "services" / "fleet-gateway.yaml", SERVICES,
                            observed=(refused_copy_observed(tmp_path),))
    auth = {c["type"]: c for c in fleet[0]["status"]["conditions"]}["CallerAuth"]
    assert (auth["status"], auth["reason"]) == ("False", "KeysPending"), auth
    assert ("spec.auth.apiKey.secretRefs[0] (Secret modelplane-system/ml-team-callers): provider-kubernetes cannot "
            'copy it: cannot resolve references: secrets "ml-team-callers" not found') in auth["message"], auth
    assert "every request is refused" in auth["message"]
    (policy,) = [r for r in composed_for_egctl(fleet) if r["kind"] == "SecurityPolicy"]
    assert "apiKeyAuth" not in policy["spec"], "no key is trusted that is not on the cluster"

    # The same gateway as when keys are in effect, with the policy composed meanwhile in place of the keyed one.
    resources = [policy if r["kind"] == "SecurityPolicy" else r for r in fleet_gateway_resources(tmp_path)]
    translated = translate(resources, tmp_path, "gateway-api,xds")
    (translated_policy,) = translated["securityPolicies"]
    assert conditions(translated_policy)["Accepted"]["status"] == "True", translated_policy["status"]
    routes = xds_routes(translated)
    assert routes
    for r in routes:
        filters = r.get("typedPerFilterConfig") or {}
        assert "envoy.filters.http.api_key_auth" not in filters, r
        assert any("rbac" in name for name in filters), f"a route admits callers unchecked: {r}"


def test_a_service_selecting_no_endpoint_is_named_by_our_status_and_gives_the_translator_no_route(tmp_path):
    """Our status and the translator agree: a ModelService whose entries select no ModelEndpoint says so, naming
    `spec.endpoints` and each selector, and composes no backend and no route; the fleet gateway then carries no
    route Envoy would send a caller anywhere by."""
    service = yaml.safe_load((EXAMPLES / "services" / "qwen3-coder.yaml").read_text())
    for entry in service["spec"]["endpoints"]:
        entry["selector"]["matchLabels"] = {"modelplane.ai/deployment": "no-such-deployment"}
    path = tmp_path / "selecting-nothing.yaml"
    path.write_text(yaml.safe_dump(service))
    rendered = installs.render(path, SERVICES, until_ready=True, settled_not_ready_ok=True)
    resolved = {c["type"]: c for c in rendered[0]["status"]["conditions"]}["EndpointsResolved"]
    assert (resolved["status"], resolved["reason"]) == ("False", "NoEndpoints"), resolved
    assert "no ModelEndpoint matches any entry of spec.endpoints" in resolved["message"], resolved
    assert "ours: modelplane.ai/deployment=no-such-deployment in ml-team" in resolved["message"], resolved
    assert not [r for r in composed_for_egctl(rendered) if r["kind"] in ("Backend", "HTTPRoute")], rendered

    fleet = installs.render(EXAMPLES / "services" / "fleet-gateway.yaml", SERVICES, until_ready=True)
    cluster_class = [r for r in composed_for_egctl(render_cluster(tmp_path)) if r["kind"] == "GatewayClass"]
    resources = composed_for_egctl(fleet) + composed_for_egctl(rendered) + cluster_class + [
        dict(serving_secret(), metadata={"name": "fleet-gateway-client", "namespace": NAMESPACE})]
    translated = translate(resources, tmp_path, "gateway-api,xds")
    assert listener_conditions(translated)["Programmed"]["status"] == "True"
    assert not translated.get("httpRoutes") and not xds_routes(translated), "a route to nothing"
