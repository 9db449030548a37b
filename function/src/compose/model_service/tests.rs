use serde_json::{Value, json};

use super::compose;
use crate::compose::{
    Output,
    fixtures::{self, request, run, with_required},
};
use crate::proto::v1::{RunFunctionRequest, Status};

fn service(endpoints: Value) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelService",
           "metadata": {"name": "qwen", "namespace": "ml-team", "labels": {"tier": "prod"}},
           "spec": {"endpoints": endpoints}})
}

fn endpoint(name: &str, namespace: &str, labels: Value, url: &str, ready: bool) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelEndpoint",
           "metadata": {"name": name, "namespace": namespace, "labels": labels},
           "spec": {"url": url},
           "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
}

fn gateway(selector: Option<Value>) -> Value {
    let mut g = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway",
                       "metadata": {"name": "fleet"}, "spec": {"clusterName": "use1-a"},
                       "status": {"clusterName": "use1-a", "address": "203.0.113.9"}});
    if let Some(selector) = selector {
        g["spec"]["serviceSelector"] = selector;
    }
    g
}

fn cluster() -> Value {
    fixtures::cluster("use1-a").build()
}

fn resolved(xr: Value, endpoints: &[Value], gateways: &[Value]) -> RunFunctionRequest {
    with_required(
        with_required(
            with_required(request(xr), "endpoints", endpoints),
            "gateways",
            gateways,
        ),
        "clusters",
        &[cluster()],
    )
}

fn failover_entries() -> Value {
    json!([
        {"name": "ours", "priority": 0, "weight": 1, "selector": {"matchLabels": {"modelplane.ai/deployment": "qwen"}}},
        {"name": "together", "priority": 1, "selector": {"matchLabels": {"modelplane.ai/external-provider": "together"}}},
    ])
}

fn together() -> Value {
    let labels = json!({"modelplane.ai/external-provider": "together"});
    endpoint("together", "ml-team", labels, "https://api.together.xyz/", true)
}

fn route_failover(endpoints: &[Value]) -> Output {
    let req = resolved(service(failover_entries()), endpoints, &[gateway(None)]);
    run(compose, &req).unwrap()
}

fn condition<'a>(out: &'a Output, type_: &str) -> (Status, &'a str, &'a str) {
    let c = out
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .expect("condition");
    (c.status, c.reason, c.message.as_deref().unwrap_or_default())
}

fn route(out: &Output) -> &Value {
    &out.resources["fleet-route"].object["spec"]["forProvider"]["manifest"]
}

#[test]
fn endpoints_are_only_ever_asked_for_in_the_services_namespace() {
    let out = run(compose, &request(service(failover_entries()))).unwrap();
    assert!(out.resources.is_empty());
    assert_eq!(
        out.requirements["endpoints"].namespace.as_deref(),
        Some("ml-team")
    );
    assert_eq!(out.requirements["endpoints"].kind, "ModelEndpoint");
    assert_eq!(out.requirements["gateways"].namespace, None);
    assert_eq!(out.status["model"], "ml-team/qwen");
}

#[test]
fn a_service_selecting_nothing_is_not_ready_says_why_and_composes_no_route() {
    let other = endpoint(
        "llama",
        "ml-team",
        json!({"modelplane.ai/deployment": "llama"}),
        "http://10.0.0.1/v1",
        true,
    );
    let out = run(
        compose,
        &resolved(service(failover_entries()), &[other], &[gateway(None)]),
    )
    .unwrap();
    assert_eq!(out.ready, Some(false));
    let (status, reason, message) = condition(&out, "EndpointsResolved");
    assert_eq!((status, reason), (Status::ConditionFalse, "NoEndpoints"));
    assert!(message.contains("modelplane.ai/deployment=qwen"), "{message}");
    assert!(out.resources.is_empty(), "{:?}", out.resources.keys());
    assert_eq!(condition(&out, "RoutingReady").1, "NoBackends");
    assert_eq!(
        out.status["endpoints"],
        json!({"total": 0, "ready": 0, "routed": []})
    );
}

#[test]
fn an_endpoint_in_another_namespace_is_never_selected() {
    let labels = json!({"modelplane.ai/deployment": "qwen"});
    let foreign = endpoint("qwen-0", "other-team", labels, "http://10.0.0.1/v1", true);
    let out = run(
        compose,
        &resolved(service(failover_entries()), &[foreign], &[gateway(None)]),
    )
    .unwrap();
    assert_eq!(condition(&out, "EndpointsResolved").1, "NoEndpoints");
    assert!(out.resources.is_empty());
}

#[test]
fn a_route_fails_over_from_our_replicas_to_a_provider_by_model_name() {
    let ours = json!({"modelplane.ai/deployment": "qwen"});
    let endpoints = [
        endpoint(
            "qwen-a",
            "ml-team",
            ours.clone(),
            "http://gw-a.example.com/ml-team/qwen-a/v1",
            true,
        ),
        endpoint(
            "qwen-b",
            "ml-team",
            ours,
            "http://10.1.2.3:8080/ml-team/qwen-b/v1",
            true,
        ),
        together(),
    ];
    let out = route_failover(&endpoints);
    let route = route(&out);
    assert_eq!(route["kind"], "AIGatewayRoute");
    assert_eq!(route["metadata"], json!({"name": "qwen", "namespace": "ml-team"}));
    let rule = &route["spec"]["rules"][0];
    assert_eq!(
        rule["matches"][0]["headers"][0],
        json!({"type": "Exact", "name": "x-ai-eg-model", "value": "ml-team/qwen"})
    );
    let refs: Vec<(String, u64, u64)> = rule["backendRefs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["priority"].as_u64().unwrap(),
                r["weight"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        refs,
        [
            ("qwen-qwen-a".into(), 0, 1),
            ("qwen-qwen-b".into(), 0, 1),
            ("qwen-together".into(), 1, 1)
        ]
    );
    let manifest = |key: &str| &out.resources[key].object["spec"]["forProvider"]["manifest"];
    assert_eq!(
        manifest("fleet-backend-qwen-b")["spec"]["endpoints"],
        json!([{"ip": {"address": "10.1.2.3", "port": 8080}}])
    );
    assert_eq!(
        manifest("fleet-backend-together")["spec"]["tls"],
        json!({"wellKnownCACertificates": "System", "sni": "api.together.xyz"})
    );
    assert_eq!(
        manifest("fleet-service-backend-qwen-a")["spec"]["schema"],
        json!({"name": "OpenAI", "prefix": "/ml-team/qwen-a/v1"})
    );
    assert_eq!(
        manifest("fleet-service-backend-together")["spec"]["schema"]["prefix"],
        "/v1"
    );
    assert_eq!(
        out.resources["fleet-route"].object["spec"]["providerConfigRef"]["name"],
        "use1-a-pc"
    );
    assert_eq!(
        out.status["endpoints"],
        json!({"total": 3, "ready": 3, "routed": []})
    );
    assert_eq!(
        out.status["gateways"],
        json!([{"name": "fleet", "address": "203.0.113.9"}])
    );
    assert_eq!(
        out.status["address"], "http://203.0.113.9",
        "callers POST <address>/v1/chat/completions"
    );
    assert_eq!(condition(&out, "EndpointsResolved").0, Status::ConditionTrue);
    // Nothing observed yet: composed, but not ready.
    assert_eq!(out.ready, Some(false));
}

#[test]
fn an_endpoint_that_is_not_ready_leaves_the_route_and_its_tier_moves_up() {
    let endpoints = [
        endpoint(
            "qwen-a",
            "ml-team",
            json!({"modelplane.ai/deployment": "qwen"}),
            "http://10.0.0.1/v1",
            false,
        ),
        together(),
    ];
    let out = route_failover(&endpoints);
    let refs = &route(&out)["spec"]["rules"][0]["backendRefs"];
    assert_eq!(
        refs,
        &json!([{"name": "qwen-together", "priority": 0, "weight": 1}])
    );
    assert!(!out.resources.contains_key("fleet-backend-qwen-a"));
    assert!(
        condition(&out, "EndpointsResolved")
            .2
            .contains("entries with no ready endpoint: ours")
    );
}

#[test]
fn a_gateway_whose_selector_does_not_match_does_not_serve_the_service() {
    let ep = endpoint(
        "qwen-a",
        "ml-team",
        json!({"modelplane.ai/deployment": "qwen"}),
        "http://10.0.0.1/v1",
        true,
    );
    let picky = gateway(Some(json!({"matchLabels": {"tier": "dev"}})));
    let out = run(compose, &resolved(service(failover_entries()), &[ep], &[picky])).unwrap();
    assert!(out.resources.is_empty());
    assert_eq!(condition(&out, "RoutingReady").1, "NoGateway");
    assert_eq!(out.ready, Some(false));
}

#[test]
fn v0_3_1_entries_without_names_are_named_by_index() {
    let entries = json!([{"weight": 95, "selector": {"matchLabels": {"app": "qwen"}}},
                         {"weight": 5, "selector": {"matchLabels": {"app": "qwen-next"}}}]);
    let endpoints = [
        endpoint("a", "ml-team", json!({"app": "qwen"}), "http://10.0.0.1/v1", true),
        endpoint(
            "b",
            "ml-team",
            json!({"app": "qwen-next"}),
            "http://10.0.0.2/v1",
            true,
        ),
    ];
    let out = run(compose, &resolved(service(entries), &endpoints, &[gateway(None)])).unwrap();
    let refs = &route(&out)["spec"]["rules"][0]["backendRefs"];
    assert_eq!(
        refs,
        &json!([{"name": "qwen-a", "priority": 0, "weight": 19}, {"name": "qwen-b", "priority": 0, "weight": 1}])
    );
}

#[test]
fn bad_entries_are_fatal_naming_the_field() {
    let entry = |extra: Value| {
        let mut e = json!({"selector": {"matchLabels": {"app": "qwen"}}});
        if let (Some(e), Value::Object(extra)) = (e.as_object_mut(), extra) {
            e.extend(extra);
        }
        e
    };
    for (entries, field, needle) in [
        (
            json!([entry(json!({"weight": 0}))]),
            "spec.endpoints[0].weight",
            "less than the minimum of 1",
        ),
        (
            json!([entry(json!({"weight": 1_000_001}))]),
            "spec.endpoints[0].weight",
            "greater than the maximum of 1000000",
        ),
        (
            json!([entry(json!({"priority": 64}))]),
            "spec.endpoints[0].priority",
            "greater than the maximum of 63",
        ),
        (
            json!([entry(json!({"name": "a"})), entry(json!({"name": "a"}))]),
            "spec.endpoints",
            "unique",
        ),
        (
            json!([entry(json!({"name": "Bad_Name"}))]),
            "spec.endpoints[0].name",
            "does not match",
        ),
        (
            json!([{"selector": {"matchLabels": {}}}]),
            "spec.endpoints[0].selector.matchLabels",
            "less than 1 property",
        ),
        (json!([]), "spec.endpoints", "less than 1 item"),
        (
            json!([entry(json!({"name": "endpoints-1"})), entry(json!({}))]),
            "spec.endpoints[1].name",
            "unique",
        ),
    ] {
        let err = run(compose, &request(service(entries.clone()))).unwrap_err();
        assert_eq!(err.path, field, "{entries}: {err}");
        assert!(err.reason.contains(needle), "{err}");
    }
    let mut xr = service(json!([entry(json!({}))]));
    xr["spec"]["timeouts"] = json!({"request": "1 minute"});
    assert_eq!(
        run(compose, &request(xr)).unwrap_err().path,
        "spec.timeouts.request"
    );
    let negative = service(json!([entry(json!({"weight": -1}))]));
    assert!(
        run(compose, &request(negative))
            .unwrap_err()
            .path
            .contains("weight")
    );
}

#[test]
fn routed_lists_only_the_endpoints_the_applied_route_lists() {
    let replica = |name: &str| {
        let url = format!("http://{name}.gw.example.com/ml-team/qwen-0/v1");
        endpoint(
            name,
            "ml-team",
            json!({"modelplane.ai/deployment": "qwen"}),
            &url,
            true,
        )
    };
    let endpoints = [replica("qwen-a"), replica("qwen-b")];
    let first = route_failover(&endpoints);
    assert_eq!(
        first.status["endpoints"]["routed"],
        json!([]),
        "nothing applied yet"
    );
    // The gateway's cluster has applied a route listing only qwen-a (qwen-b arrived since).
    let mut applied = Value::Object(first.resources["fleet-route"].object.to_map());
    applied["status"] = json!({"atProvider": {"manifest": {"spec": {"rules": [
        {"backendRefs": [{"name": "qwen-qwen-a"}]}]}}}});
    let req = crate::compose::fixtures::with_observed(
        resolved(service(failover_entries()), &endpoints, &[gateway(None)]),
        "fleet-route",
        &applied,
    );
    let out = run(compose, &req).unwrap();
    assert_eq!(out.status["endpoints"]["routed"], json!(["qwen-a"]));
}

#[test]
fn a_provider_key_copy_is_owned_by_a_configmap_that_goes_with_the_service() {
    use crate::compose::fixtures::{OWNER_UID, observed_owner, sanitized_owned_secret, with_observed};
    let mut keyed = together();
    keyed["spec"]["credential"] = json!({"apiKey": {"secretRef": {"name": "together-api-key"}}});
    let req = resolved(service(failover_entries()), &[keyed], &[gateway(None)]);
    let out = run(compose, &req).unwrap();
    let owner = &out.resources["fleet-secret-owner"].object["spec"]["forProvider"]["manifest"];
    assert_eq!(owner["kind"], "ConfigMap");
    assert_eq!(
        owner["metadata"],
        json!({"name": "qwen-secret-owner", "namespace": "ml-team"})
    );

    let copy_key = "fleet-api-key-together";
    let mut copy = Value::Object(out.resources[copy_key].object.to_map());
    copy["metadata"]["finalizers"] = json!(["finalizer.managedresource.crossplane.io"]);
    copy["status"] = json!({"atProvider": {"manifest": {"data": {"redacted": null}}}});
    let req = with_observed(
        with_observed(req, "fleet-secret-owner", &observed_owner("qwen-secret-owner")),
        copy_key,
        &copy,
    );
    let out = run(compose, &req).unwrap();
    let copy = &out.resources[copy_key].object;
    assert_eq!(
        copy["spec"]["forProvider"]["manifest"]["metadata"]["ownerReferences"][0]["uid"],
        OWNER_UID
    );
    assert!(
        copy["spec"].get("references").is_none(),
        "the remote Secret does not carry its owner yet"
    );
    let (_, _, message) = condition(&out, "RoutingReady");
    assert!(message.contains("owner ConfigMap"), "{message}");

    let mut owned = Value::Object(copy.to_map());
    owned["metadata"]["finalizers"] = json!(["finalizer.managedresource.crossplane.io"]);
    owned["status"] = json!({"atProvider": {"manifest": sanitized_owned_secret("qwen-secret-owner")}});
    let out = run(compose, &with_observed(req, copy_key, &owned)).unwrap();
    assert!(out.resources[copy_key].object["spec"]["references"].is_array());
}

fn granting(from: &str, to: &str) -> Value {
    let mut g = gateway(None);
    g["spec"]["endpointGrants"] = json!([{"from": from, "to": to}]);
    g
}

/// Our replicas first, then a provider endpoint the platform team keeps in `shared-models`.
fn shared_failover_entries() -> Value {
    json!([
        {"name": "ours", "selector": {"matchLabels": {"modelplane.ai/deployment": "qwen"}}},
        {"name": "shared", "namespace": "shared-models", "priority": 1,
         "selector": {"matchLabels": {"modelplane.ai/external-provider": "together"}}},
    ])
}

fn shared_together() -> Value {
    let labels = json!({"modelplane.ai/external-provider": "together"});
    let mut shared = endpoint(
        "together",
        "shared-models",
        labels,
        "https://api.together.xyz/",
        true,
    );
    shared["spec"]["credential"] = json!({"apiKey": {"secretRef": {"name": "together-api-key"}}});
    shared
}

fn ours() -> Value {
    let labels = json!({"modelplane.ai/deployment": "qwen"});
    endpoint(
        "qwen-a",
        "ml-team",
        labels,
        "http://10.1.2.3:8080/ml-team/qwen-a/v1",
        true,
    )
}

fn backend_names(out: &Output) -> Vec<String> {
    route(out)["spec"]["rules"][0]["backendRefs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_granted_namespace_is_read_and_routed_with_its_own_key() {
    let req = resolved(
        service(shared_failover_entries()),
        &[ours()],
        &[granting("ml-team", "shared-models")],
    );
    let out = run(compose, &req).unwrap();
    let asked = &out.requirements["endpoints/shared-models"];
    assert_eq!(
        (asked.kind.as_str(), asked.namespace.as_deref()),
        ("ModelEndpoint", Some("shared-models"))
    );
    assert!(
        out.resources.is_empty(),
        "nothing is composed until it is answered"
    );
    assert_eq!(out.ready, Some(false));

    let req = with_required(req, "endpoints/shared-models", &[shared_together()]);
    let out = run(compose, &req).unwrap();
    let shared = super::route::backend_name("qwen", "shared-models/together");
    assert_eq!(backend_names(&out), ["qwen-qwen-a".to_owned(), shared.clone()]);
    assert_ne!(
        shared,
        super::route::backend_name("qwen", "shared-models-together")
    );
    assert_eq!(condition(&out, "EndpointsResolved").1, "Resolved");
    assert_eq!(out.status["endpoints"]["total"], 2);

    // The key is copied from the endpoint's namespace, never from a same-named Secret of the service's.
    use crate::compose::fixtures::{observed_owner, sanitized_owned_secret, with_observed};
    let copy_key = "fleet-api-key-shared-models_together";
    let mut owned = Value::Object(out.resources[copy_key].object.to_map());
    owned["metadata"]["finalizers"] = json!(["finalizer.managedresource.crossplane.io"]);
    owned["status"] = json!({"atProvider": {"manifest": sanitized_owned_secret("qwen-secret-owner")}});
    let req = with_observed(
        with_observed(req, "fleet-secret-owner", &observed_owner("qwen-secret-owner")),
        copy_key,
        &owned,
    );
    let out = run(compose, &req).unwrap();
    let from = &out.resources[copy_key].object["spec"]["references"][0]["patchesFrom"];
    assert_eq!(
        (&from["namespace"], &from["name"]),
        (&json!("shared-models"), &json!("together-api-key"))
    );
}

#[test]
fn an_ungranted_namespace_is_never_read_and_the_field_is_named() {
    // Grants the other way round, and to another namespace: neither lets ml-team into shared-models.
    let mut gateway = granting("shared-models", "ml-team");
    gateway["spec"]["endpointGrants"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "team-b", "to": "shared-models"}));
    // Even if Crossplane sent shared-models' endpoints under the service's own requirement, they are dropped.
    let req = resolved(
        service(shared_failover_entries()),
        &[ours(), shared_together()],
        &[gateway],
    );
    let out = run(compose, &req).unwrap();
    assert!(
        !out.requirements.keys().any(|k| k.contains("shared-models")),
        "{:?}",
        out.requirements.keys()
    );
    let (status, reason, message) = condition(&out, "EndpointsResolved");
    assert_eq!((status, reason), (Status::ConditionFalse, "NamespaceNotGranted"));
    assert!(message.contains("spec.endpoints[1].namespace"), "{message}");
    // The service's own entry still routes; nothing of the other namespace is routed or copied.
    assert_eq!(backend_names(&out), ["qwen-qwen-a"]);
    assert!(
        !out.resources.keys().any(|k| k.contains("together")),
        "{:?}",
        out.resources.keys()
    );
}

/// However many namespaces are granted, they are all asked for at once: one more call answers them all, within
/// the few calls Crossplane makes while requirements change.
#[test]
fn every_granted_namespace_is_asked_for_in_one_call() {
    let namespaces: Vec<String> = (0..12).map(|i| format!("shared-{i}")).collect();
    let entries: Vec<Value> = namespaces
        .iter()
        .map(|ns| json!({"name": ns, "namespace": ns, "selector": {"matchLabels": {"app": "qwen"}}}))
        .collect();
    let mut gateway = gateway(None);
    gateway["spec"]["endpointGrants"] = namespaces
        .iter()
        .map(|ns| json!({"from": "ml-team", "to": ns}))
        .collect();
    let req = resolved(service(Value::Array(entries)), &[], &[gateway]);
    let out = run(compose, &req).unwrap();
    let asked: Vec<&String> = out
        .requirements
        .keys()
        .filter(|k| k.starts_with("endpoints/"))
        .collect();
    assert_eq!(asked.len(), namespaces.len(), "{asked:?}");
    let mut req = req;
    for ns in &namespaces {
        req = with_required(req, &format!("endpoints/{ns}"), &[]);
    }
    let settled = run(compose, &req).unwrap();
    assert_eq!(
        settled.requirements, out.requirements,
        "the next call asks for nothing new"
    );
}
