//! Fleet routing against the real schemas: every object the ModelService composer puts on a gateway's cluster
//! is accepted by the vendored Envoy Gateway / Envoy AI Gateway CRDs (`tests/crds/routing/`, structure, CEL and
//! undeclared fields) inside a provider-kubernetes Object its CRD accepts, and the routing XRDs reject what the
//! API forbids.

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{fatal, problems, read_documents, repo_root, xrd_schema};
use modelplane_function::{
    proto::v1::RunFunctionResponse,
    render::{self, Inputs},
    run_function,
};
use serde_json::{Value, json};

/// The `openAPIV3Schema` of `version` in the CRD at `path` (repo-relative).
fn crd_schema(path: &str, version: &str) -> Value {
    let crd = read_documents(&repo_root().join(path)).remove(0);
    let served = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == version)
        .unwrap_or_else(|| panic!("{path} serves no {version}"));
    served["schema"]["openAPIV3Schema"].clone()
}

fn schema_for(object: &Value) -> Value {
    let path = match (
        object["apiVersion"].as_str().unwrap(),
        object["kind"].as_str().unwrap(),
    ) {
        ("aigateway.envoyproxy.io/v1beta1", "AIGatewayRoute") => {
            "tests/crds/routing/envoy-ai-gateway/v0.7.0/aigateway.envoyproxy.io_aigatewayroutes.yaml"
        }
        ("aigateway.envoyproxy.io/v1beta1", "AIServiceBackend") => {
            "tests/crds/routing/envoy-ai-gateway/v0.7.0/aigateway.envoyproxy.io_aiservicebackends.yaml"
        }
        ("aigateway.envoyproxy.io/v1beta1", "BackendSecurityPolicy") => {
            "tests/crds/routing/envoy-ai-gateway/v0.7.0/aigateway.envoyproxy.io_backendsecuritypolicies.yaml"
        }
        ("gateway.envoyproxy.io/v1alpha1", "SecurityPolicy") => {
            "tests/crds/routing/envoy-gateway/v1.8.1/gateway.envoyproxy.io_securitypolicies.yaml"
        }
        ("gateway.envoyproxy.io/v1alpha1", "Backend") => {
            "tests/crds/routing/envoy-gateway/v1.8.1/gateway.envoyproxy.io_backends.yaml"
        }
        ("monitoring.coreos.com/v1", "PodMonitor") => {
            "tests/crds/prometheus-operator/v0.82.2/monitoring.coreos.com_podmonitors.yaml"
        }
        ("gateway.networking.k8s.io/v1", "Gateway") => {
            "tests/crds/routing/gateway-api/v1.5.1/gateway.networking.k8s.io_gateways.yaml"
        }
        ("gateway.networking.k8s.io/v1", "GatewayClass") => {
            "tests/crds/routing/gateway-api/v1.5.1/gateway.networking.k8s.io_gatewayclasses.yaml"
        }
        ("gateway.envoyproxy.io/v1alpha1", "EnvoyProxy") => {
            "tests/crds/routing/envoy-gateway/v1.8.1/gateway.envoyproxy.io_envoyproxies.yaml"
        }
        ("gateway.envoyproxy.io/v1alpha1", "ClientTrafficPolicy") => {
            "tests/crds/routing/envoy-gateway/v1.8.1/gateway.envoyproxy.io_clienttrafficpolicies.yaml"
        }
        ("cert-manager.io/v1", "Certificate") => "tests/crds/cert-manager/v1.17.2/crd-certificates.yaml",
        ("cert-manager.io/v1", "ClusterIssuer") => "tests/crds/cert-manager/v1.17.2/crd-clusterissuers.yaml",
        ("trust.cert-manager.io/v1alpha1", "Bundle") => {
            "tests/crds/trust-manager/v0.25.0/trust.cert-manager.io_bundles.yaml"
        }
        ("kubernetes.m.crossplane.io/v1alpha1", "Object") => {
            "tests/crds/provider-kubernetes/kubernetes.m.crossplane.io_objects.yaml"
        }
        other => panic!("no vendored CRD for {other:?}"),
    };
    let version = object["apiVersion"].as_str().unwrap().rsplit('/').next().unwrap();
    crd_schema(path, version)
}

fn example(file: &str) -> Value {
    read_documents(&repo_root().join("examples/services").join(file)).remove(0)
}

fn endpoint(name: &str, namespace: &str, labels: Value, url: &str) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelEndpoint",
           "metadata": {"name": name, "namespace": namespace, "labels": labels},
           "spec": {"url": url}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
}

fn fleet() -> Vec<Value> {
    let mut provider = example("together-endpoint.yaml");
    provider["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    let ours = json!({"modelplane.ai/deployment": "qwen3-coder"});
    vec![
        provider,
        endpoint(
            "qwen3-coder-1a2b3",
            "ml-team",
            ours.clone(),
            "http://use1-a.gw.example.com/ml-team/qwen3-coder-1a2b3/v1",
        ),
        endpoint(
            "qwen3-coder-4c5d6",
            "ml-team",
            ours.clone(),
            "http://10.20.30.40:8080/ml-team/qwen3-coder-4c5d6/v1",
        ),
        // Same labels, another team: never routed.
        endpoint("qwen3-coder-x", "other-team", ours, "http://10.9.9.9/v1"),
        json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway", "metadata": {"name": "fleet"},
               "spec": {"clusterName": "use1-a"}, "status": {"clusterName": "use1-a", "address": "203.0.113.9"}}),
        json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "use1-a"},
               "status": {"providerConfigName": "use1-a", "stack": "Standard"}}),
    ]
}

fn render(composite: &Value, required: Vec<Value>) -> RunFunctionResponse {
    render_observed(composite, required, Vec::new())
}

fn desired(rsp: &RunFunctionResponse) -> Vec<(String, Value)> {
    rsp.desired
        .as_ref()
        .unwrap()
        .resources
        .iter()
        .map(|(key, r)| (key.clone(), r.resource.as_ref().unwrap().to_json().unwrap()))
        .collect()
}

fn manifest_kinds(objects: &[(String, Value)]) -> Vec<&str> {
    objects
        .iter()
        .map(|(_, o)| o["spec"]["forProvider"]["manifest"]["kind"].as_str().unwrap())
        .collect()
}

/// Every composed Object, and the manifest inside it unless it is a core kind, against its vendored CRD.
fn assert_valid(objects: &[(String, Value)]) {
    for (key, object) in objects {
        let found = problems(&schema_for(object), object, None);
        assert!(found.is_empty(), "{key} (Object): {found:#?}");
        let manifest = &object["spec"]["forProvider"]["manifest"];
        // Built-in kinds: the control-plane suite's API server checks those.
        if ["v1", "apps/v1", "networking.k8s.io/v1"].contains(&manifest["apiVersion"].as_str().unwrap()) {
            continue;
        }
        let found = problems(&schema_for(manifest), manifest, None);
        assert!(found.is_empty(), "{key} ({}): {found:#?}", manifest["kind"]);
    }
}

/// A composed resource as observed: Ready, under its composition-resource-name, with `extra` merged in.
fn observed(key: &str, object: &Value, extra: Value) -> Value {
    let mut o = object.clone();
    o["metadata"]["annotations"] = json!({"crossplane.io/composition-resource-name": key});
    o["status"] = json!({"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}]});
    if let (Some(o), Some(extra)) = (o.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            if let (Some(Value::Object(into)), Value::Object(from)) = (o.get_mut(k), v) {
                into.extend(from.clone());
            } else {
                o.insert(k.clone(), v.clone());
            }
        }
    }
    o
}

fn render_observed(composite: &Value, required: Vec<Value>, observed: Vec<Value>) -> RunFunctionResponse {
    let inputs = Inputs {
        composite: composite.clone(),
        required,
        observed,
        ..Default::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime
        .block_on(render::run(&inputs, |req| async move { Ok(run_function(req)) }))
        .unwrap()
}

fn gateway_cluster() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
           "metadata": {"name": "eks-h200-us-east"},
           "status": {"providerConfigName": "eks-h200-us-east", "stack": "Standard"}})
}

const OWNER_UID: &str = "0e5d3c1a-7f42-4b8e-a1d6-9c3b2e4f5a60";

/// A Secret copy as provider-kubernetes (with `--sanitize-secrets`) reports it once created, owned by the
/// ConfigMap [`created_owner`] reports; any other Object as merely created.
fn created_copy(key: &str, object: &Value) -> Value {
    let manifest = &object["spec"]["forProvider"]["manifest"];
    let remote = match manifest["kind"].as_str() {
        Some("Secret") => json!({"data": {"redacted": null}, "metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "inference-gateway-secret-owner", "uid": OWNER_UID}]}}),
        Some("ConfigMap") => json!({"metadata": {"name": manifest["metadata"]["name"], "uid": OWNER_UID}}),
        _ => json!({}),
    };
    observed(
        key,
        object,
        json!({"metadata": {"finalizers": ["finalizer.managedresource.crossplane.io"], "generation": 1},
               "status": {"atProvider": {"manifest": remote}}}),
    )
}

/// `kinds` and the kinds of the fleet gateway's client CA chain (the CA's Certificate, its issuer, the Bundle and
/// the published CA it observes), sorted. The client certificate itself comes once the CA is published.
fn with_client_chain<'a>(kinds: &[&'a str]) -> Vec<&'a str> {
    let mut all = kinds.to_vec();
    all.extend(["Bundle", "Certificate", "ClusterIssuer", "ConfigMap"]);
    // The standby server, from the first call on.
    all.extend(["Deployment", "NetworkPolicy", "PodMonitor", "Service"]);
    all.sort_unstable();
    all
}

/// The fleet client CA trust-manager publishes in these tests.
fn published_client_ca() -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tls/cluster-gateway-ca.pem"),
    )
    .unwrap()
}

/// Every object of the gateway's as created on its cluster: the copies as [`created_copy`] says, the callers
/// policy Ready, the client CA published, and a cert-manager Certificate issued for the spec it was given.
fn settled(objects: &[(String, Value)]) -> Vec<Value> {
    objects
        .iter()
        .map(|(key, o)| {
            let manifest = &o["spec"]["forProvider"]["manifest"];
            match (key.as_str(), manifest["kind"].as_str()) {
                ("callers-policy", _) => observed(key, o, json!({})),
                ("client-ca-published", _) => observed(
                    key,
                    o,
                    json!({"status": {"atProvider": {"manifest": {"data": {"ca.crt": published_client_ca()}}}}}),
                ),
                (_, Some("Certificate")) => {
                    observed(key, o, json!({"status": {"atProvider": {"manifest": manifest}}}))
                }
                _ => created_copy(key, o),
            }
        })
        .collect()
}

#[test]
fn every_object_composed_for_the_example_gateway_is_accepted_by_the_vendored_crds() {
    let mut gateway = example("fleet-gateway.yaml");
    gateway["spec"]["hostname"] = json!("inference.example.com");
    gateway["spec"]["tls"] = json!({"certificateRefs": [{"name": "inference-example-com"}]});
    assert_eq!(
        problems(&xrd_schema("inferencegateways.yaml"), &gateway, None),
        Vec::<String>::new()
    );
    let rsp = render(&gateway, vec![gateway_cluster()]);
    assert_eq!(fatal(&rsp), Vec::<&str>::new());
    let first = desired(&rsp);
    let mut kinds = manifest_kinds(&first);
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        with_client_chain(&["ConfigMap", "Secret", "Secret", "SecurityPolicy"]),
        "the copies, their owner, the deny-all policy and the client certificate chain first; no listener yet"
    );
    assert_valid(&first);
    // Once every copy exists, the policy is in place and the client CA is published: the listener, the copies'
    // references, and the client certificate issued under that CA.
    let second = desired(&render_observed(
        &gateway,
        vec![gateway_cluster()],
        settled(&first),
    ));
    let mut kinds = manifest_kinds(&second);
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        with_client_chain(&[
            "Certificate",
            "ConfigMap",
            "Gateway",
            "Secret",
            "Secret",
            "SecurityPolicy"
        ]),
        "the listener, and the client certificate once its CA is published"
    );
    assert_valid(&second);
    let objects = desired(&render_observed(
        &gateway,
        vec![gateway_cluster()],
        settled(&second),
    ));
    let mut kinds = manifest_kinds(&objects);
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        with_client_chain(&[
            "Certificate",
            "ConfigMap",
            "EnvoyProxy",
            "Gateway",
            "Secret",
            "Secret",
            "SecurityPolicy"
        ]),
        "the EnvoyProxy presenting the client certificate once it is issued"
    );
    assert!(
        objects
            .iter()
            .filter(|(_, o)| o["spec"]["forProvider"]["manifest"]["kind"] == "Secret")
            .all(|(_, o)| o["spec"]["references"].is_array())
    );
    assert_valid(&objects);
    let gateway_object = |objects: &[(String, Value)]| {
        objects.iter().find(|(key, _)| key == "gateway").unwrap().1["spec"]["forProvider"]["manifest"].clone()
    };
    assert!(
        gateway_object(&objects)["spec"]["infrastructure"].is_null(),
        "the Gateway takes the EnvoyProxy only once it exists"
    );
    client_certificate_is_presented_then_published(&gateway, &objects);

    let mut tls_without_hostname = example("fleet-gateway.yaml");
    tls_without_hostname["spec"]["tls"] = json!({"certificateRefs": [{"name": "fleet-tls"}]});
    let found = problems(&xrd_schema("inferencegateways.yaml"), &tls_without_hostname, None);
    assert!(found.iter().any(|p| p.contains("hostname")), "{found:#?}");
    let mut both_levels = example("fleet-gateway.yaml");
    both_levels["spec"]["auth"]["secretRefs"] = json!([{"name": "other"}]);
    let found = problems(&xrd_schema("inferencegateways.yaml"), &both_levels, None);
    assert!(found.iter().any(|p| p.contains("not both")), "{found:#?}");
}

/// With every object of the gateway on its cluster, the Gateway takes the EnvoyProxy that presents the client
/// certificate; once the observed Gateway shows it took it, the status publishes the client CA.
fn client_certificate_is_presented_then_published(gateway: &Value, objects: &[(String, Value)]) {
    let ca = published_client_ca();
    let seen = |objects: &[(String, Value)], took_proxy: bool| -> Vec<Value> {
        let mut seen = settled(objects);
        for ((key, o), seen) in objects.iter().zip(&mut seen) {
            if key == "gateway" {
                let mut manifest = json!({"status": {"addresses": [{"value": "203.0.113.7"}]}});
                if took_proxy {
                    manifest["spec"] = o["spec"]["forProvider"]["manifest"]["spec"].clone();
                }
                *seen = observed(key, o, json!({"status": {"atProvider": {"manifest": manifest}}}));
            }
        }
        seen
    };
    let rsp = render_observed(gateway, vec![gateway_cluster()], seen(objects, false));
    let third = desired(&rsp);
    let manifest =
        third.iter().find(|(key, _)| key == "gateway").unwrap().1["spec"]["forProvider"]["manifest"].clone();
    assert_eq!(
        manifest["spec"]["infrastructure"]["parametersRef"],
        json!({"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": "fleet-gateway-proxy"})
    );
    assert_valid(&third);
    let status = |rsp: &RunFunctionResponse| {
        rsp.desired
            .as_ref()
            .unwrap()
            .composite
            .as_ref()
            .unwrap()
            .resource
            .as_ref()
            .unwrap()
            .to_json()
            .unwrap()["status"]
            .clone()
    };
    assert!(
        status(&rsp)["clientCertificateAuthorities"].is_null(),
        "no CA is published before the Gateway presents certificates under it: {}",
        status(&rsp)
    );
    let rsp = render_observed(gateway, vec![gateway_cluster()], seen(&third, true));
    assert_eq!(status(&rsp)["clientCertificateAuthorities"], json!([ca]));
    assert_eq!(
        problems(
            &xrd_schema("inferencegateways.yaml"),
            &json!({"apiVersion": "modelplane.ai/v1alpha1",
            "kind": "InferenceGateway", "metadata": {"name": "fleet"}, "spec": gateway["spec"], "status": status(&rsp)}),
            None
        ),
        Vec::<String>::new()
    );
}

/// The provider keys and caller keys stay in their Secrets: whatever Crossplane sends back — even Objects as an
/// unsanitizing provider-kubernetes reports them, key in spec and status — none of it comes out of the function.
#[test]
fn no_secret_data_ever_appears_in_the_functions_output() {
    const KEY: &str = "c2stbGl2ZS1kby1ub3QtbGVhaw==";
    let leaked = |key: &str, object: &Value| {
        observed(
            key,
            object,
            json!({"metadata": {"finalizers": ["finalizer.managedresource.crossplane.io"], "generation": 1},
                   "spec": {"forProvider": {"manifest": {"data": {"apiKey": KEY}}}},
                   "status": {"atProvider": {"manifest": {"data": {"apiKey": KEY}}}}}),
        )
    };
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "together-api-key", "namespace": "ml-team"}, "data": {"apiKey": KEY}});
    let mut required = fleet();
    required.push(secret);
    for composite in [example("qwen3-coder.yaml"), example("fleet-gateway.yaml")] {
        let required = if composite["kind"] == "InferenceGateway" {
            vec![gateway_cluster()]
        } else {
            required.clone()
        };
        let first = desired(&render(&composite, required.clone()));
        let seen: Vec<Value> = first.iter().map(|(key, o)| leaked(key, o)).collect();
        let rsp = render_observed(&composite, required, seen);
        let out = serde_json::to_string(&json!({
            "desired": desired(&rsp),
            "results": rsp.results.iter().map(|r| r.message.clone()).collect::<Vec<_>>(),
            "conditions": rsp.conditions.iter().map(|c| c.message.clone()).collect::<Vec<_>>(),
            "status": rsp.desired.as_ref().and_then(|d| d.composite.as_ref())
                .and_then(|c| c.resource.as_ref()).map(|r| r.to_json().unwrap()),
        }))
        .unwrap();
        assert!(
            !out.contains(KEY),
            "{}: the key came out: {out}",
            composite["kind"]
        );
        assert!(
            out.contains("sanitize-secrets"),
            "{}: the copy says why it waits",
            composite["kind"]
        );
    }
}

#[test]
fn every_object_composed_for_the_example_service_is_accepted_by_the_vendored_crds() {
    let rsp = render(&example("qwen3-coder.yaml"), fleet());
    assert_eq!(fatal(&rsp), Vec::<&str>::new());
    let objects = desired(&rsp);
    let kinds = manifest_kinds(&objects);
    assert_eq!(
        kinds.iter().filter(|k| **k == "AIGatewayRoute").count(),
        1,
        "{kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| **k == "Backend").count(), 3, "{kinds:?}");
    assert_eq!(
        kinds.iter().filter(|k| **k == "AIServiceBackend").count(),
        3,
        "{kinds:?}"
    );
    assert_valid(&objects);
    let route = objects.iter().find(|(key, _)| key == "fleet-route").unwrap();
    let refs = &route.1["spec"]["forProvider"]["manifest"]["spec"]["rules"][0]["backendRefs"];
    let names: Vec<&str> = refs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        !names.iter().any(|n| n.ends_with("-x")),
        "another namespace's endpoint was routed: {names:?}"
    );
}

#[test]
fn a_service_over_a_thousand_endpoints_composes_a_route_envoy_accepts() {
    let mut required: Vec<Value> = (0..1000)
        .map(|i| {
            endpoint(
                &format!("qwen3-coder-{i:04}"),
                "ml-team",
                json!({"modelplane.ai/deployment": "qwen3-coder"}),
                &format!("http://10.0.{}.{}/v1", i / 250, i % 250 + 1),
            )
        })
        .collect();
    required.extend(fleet().into_iter().filter(|o| o["kind"] != "ModelEndpoint"));
    let rsp = render(&example("qwen3-coder.yaml"), required);
    assert_eq!(fatal(&rsp), Vec::<&str>::new());
    let route = desired(&rsp)
        .into_iter()
        .find(|(key, _)| key == "fleet-route")
        .unwrap()
        .1;
    let manifest = &route["spec"]["forProvider"]["manifest"];
    let found = problems(&schema_for(manifest), manifest, None);
    assert!(found.is_empty(), "{found:#?}");
    assert!(
        rsp.results
            .iter()
            .any(|r| r.message.contains("left out of the route"))
    );
}

#[test]
fn the_routing_xrds_accept_the_examples_and_reject_what_the_api_forbids() {
    let service = xrd_schema("modelservices.yaml");
    let endpoint_schema = xrd_schema("modelendpoints.yaml");
    for compiled in [
        kube_cel::compile_schema(&service),
        kube_cel::compile_schema(&endpoint_schema),
    ] {
        assert!(!compiled.has_errors(), "{:#?}", compiled.compilation_errors());
    }
    let good = example("qwen3-coder.yaml");
    assert_eq!(problems(&service, &good, None), Vec::<String>::new());
    assert_eq!(
        problems(&endpoint_schema, &example("together-endpoint.yaml"), None),
        Vec::<String>::new()
    );

    let with_entries = |entries: Value| {
        let mut s = good.clone();
        s["spec"]["endpoints"] = entries;
        s
    };
    let selector = json!({"matchLabels": {"app": "qwen"}});
    for (entries, needle) in [
        (json!([{"weight": 0, "selector": selector}]), "weight"),
        (json!([{"weight": 1_000_001, "selector": selector}]), "weight"),
        (json!([{"priority": 64, "selector": selector}]), "priority"),
        (
            json!([{"name": "a", "selector": selector}, {"name": "a", "selector": selector}]),
            "unique",
        ),
        (json!([{"selector": {"matchLabels": {}}}]), "matchLabels"),
        (json!([]), "endpoints"),
    ] {
        let found = problems(&service, &with_entries(entries.clone()), None);
        assert!(found.iter().any(|p| p.contains(needle)), "{entries}: {found:#?}");
    }
    // v0.3.1 manifests carry no names and no priorities.
    let legacy =
        with_entries(json!([{"weight": 95, "selector": selector}, {"weight": 5, "selector": selector}]));
    assert_eq!(problems(&service, &legacy, None), Vec::<String>::new());

    for url in [
        "api.together.xyz",
        "ftp://x/",
        "https://user:pw@h/",
        "https://h/v1?key=1",
        "https://bad_host/",
    ] {
        let mut e = example("together-endpoint.yaml");
        e["spec"]["url"] = json!(url);
        let found = problems(&endpoint_schema, &e, None);
        assert!(found.iter().any(|p| p.contains("url")), "{url}: {found:#?}");
    }
}

#[test]
fn upstream_documentation_manifests_validate_and_render_without_a_fatal() {
    let dir = repo_root().join("function/tests/fixtures/upstream-routing");
    let mut fleet_for_eu = fleet();
    fleet_for_eu.push(json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
                             "metadata": {"name": "gw-gcp-eu"}, "status": {"providerConfigName": "gw-gcp-eu"}}));
    let mut rendered = 0;
    for file in common::yaml_files(&dir) {
        for doc in read_documents(&file) {
            let xrd = match doc["kind"].as_str().unwrap() {
                "ModelService" => "modelservices.yaml",
                "ModelEndpoint" => "modelendpoints.yaml",
                "InferenceGateway" => "inferencegateways.yaml",
                other => panic!("{}: unexpected kind {other}", file.display()),
            };
            assert_eq!(
                problems(&xrd_schema(xrd), &doc, None),
                Vec::<String>::new(),
                "{}",
                file.display()
            );
            let rsp = render(&doc, fleet_for_eu.clone());
            assert_eq!(fatal(&rsp), Vec::<&str>::new(), "{}", file.display());
            rendered += 1;
        }
    }
    assert_eq!(rendered, 3);
}

/// Tenancy: a ModelService reaches only its own namespace. Another team's ModelEndpoint that its selector matches
/// (as if Crossplane had returned it) is never routed, and every Secret the service's copies read is in the
/// service's namespace: nothing names another team's Secret.
#[test]
fn a_service_reaches_only_its_own_namespace() {
    let composite = example("qwen3-coder.yaml");
    assert_eq!(composite["metadata"]["namespace"], "ml-team");
    let first = desired(&render(&composite, fleet()));
    let seen: Vec<Value> = first.iter().map(|(key, o)| created_copy(key, o)).collect();
    let second = desired(&render_observed(&composite, fleet(), seen));
    for step in [&first, &second] {
        let text = serde_json::to_string(step).unwrap();
        assert!(
            !text.contains("10.9.9.9") && !text.contains("other-team"),
            "another team's endpoint was routed: {text}"
        );
    }
    let sources: Vec<&Value> = second
        .iter()
        .flat_map(|(_, o)| o["spec"]["references"].as_array().into_iter().flatten())
        .map(|r| &r["patchesFrom"]["namespace"])
        .collect();
    assert!(!sources.is_empty(), "the provider key is copied by reference");
    assert!(sources.iter().all(|ns| *ns == "ml-team"), "{sources:?}");
}

/// The cross-namespace example as a user renders it (docs/routing.md): with the fixture gateway's grant, the
/// service routes the platform team's shared provider and copies its key from shared-models, never from
/// ml-team; with the grant gone, nothing of shared-models is routed or copied and the field is named.
#[test]
fn the_shared_provider_example_is_routed_only_by_grant() {
    let composite = example("qwen3-coder-shared-overflow.yaml");
    let fixture = read_documents(&repo_root().join("tests/fixtures/services/fleet.yaml"));
    let key_sources = |required: Vec<Value>| {
        let first = desired(&render(&composite, required.clone()));
        let seen: Vec<Value> = first.iter().map(|(key, o)| created_copy(key, o)).collect();
        let second = desired(&render_observed(&composite, required, seen));
        assert_valid(&second);
        let sources: Vec<String> = second
            .iter()
            .flat_map(|(_, o)| o["spec"]["references"].as_array().into_iter().flatten())
            .map(|r| r["patchesFrom"]["namespace"].as_str().unwrap().to_owned())
            .collect();
        (second, sources)
    };
    let (objects, sources) = key_sources(fixture.clone());
    assert_eq!(sources, ["shared-models"]);
    assert!(
        objects.iter().any(
            |(_, o)| o["spec"]["forProvider"]["manifest"]["spec"]["endpoints"][0]["fqdn"]["hostname"]
                == "api.together.xyz"
        ),
        "the shared provider is a backend"
    );

    let ungranted: Vec<Value> = fixture
        .into_iter()
        .map(|mut o| {
            if o["kind"] == "InferenceGateway" {
                o["spec"].as_object_mut().unwrap().remove("endpointGrants");
            }
            o
        })
        .collect();
    let rsp = render(&composite, ungranted.clone());
    let (objects, sources) = key_sources(ungranted);
    assert!(sources.is_empty(), "{sources:?}");
    let text = serde_json::to_string(&objects).unwrap();
    assert!(
        !text.contains("shared-models") && !text.contains("together"),
        "{text}"
    );
    let resolved = rsp
        .conditions
        .iter()
        .find(|c| c.r#type == "EndpointsResolved")
        .unwrap();
    assert_eq!(resolved.reason, "NamespaceNotGranted");
    assert!(
        resolved
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("spec.endpoints[1].namespace"),
        "{resolved:?}"
    );
}
