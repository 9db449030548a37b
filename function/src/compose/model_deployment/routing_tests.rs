//! A replica's ModelEndpoint across reconciles: published only while the replica is Ready on a cluster whose
//! gateway has an address, and, when the replica moves, the new placement's endpoint is Ready and routed by the
//! services that select it before the old endpoint goes, and the old workload goes only once no service routes
//! its endpoint, so the deployment keeps serving through the move.

use serde_json::{Value, json};

use super::{
    engine_tests::next_request,
    tests::{compose_on, dynamo, seed, standard},
    *,
};
use crate::compose::fixtures::{run, with_required};

pub(super) const WEST: &str = "eks-h200-us-west";
pub(super) const EAST: &str = "eks-h200-us-east";

/// `cluster` whose gateway answers at `address`.
fn with_gateway(mut cluster: Value, address: &str) -> Value {
    cluster["status"]["gateway"] = crate::compose::fixtures::reachable_gateway(address);
    cluster
}

pub(super) fn west() -> Value {
    with_gateway(standard(), "203.0.113.10")
}

pub(super) fn east() -> Value {
    with_gateway(dynamo(), "eks-east-gw.example.com")
}

fn draining(mut cluster: Value) -> Value {
    cluster["spec"]["taints"] = json!([{"key": "maintenance", "effect": "NoExecute"}]);
    cluster
}

/// The endpoint keys composed, in order.
pub(super) fn endpoints(out: &Output) -> Vec<&str> {
    out.resources
        .keys()
        .filter(|k| k.starts_with("endpoint-"))
        .map(String::as_str)
        .collect()
}

pub(super) fn step(previous: &Output, clusters: &[Value], ready: impl Fn(&str) -> bool) -> Output {
    run(compose, &next_request(&seed(), clusters, previous, ready)).unwrap()
}

#[test]
fn a_ready_replica_publishes_its_endpoint_through_its_clusters_gateway() {
    let placed = compose_on(seed(), &[west()]);
    assert_eq!(endpoints(&placed), Vec::<&str>::new(), "loading: no traffic");
    let ready = step(&placed, &[west()], |_| true);
    assert_eq!(endpoints(&ready), ["endpoint-0-eks-h200-us-west"]);
    let endpoint = &ready.resources["endpoint-0-eks-h200-us-west"];
    assert!(!endpoint.ready, "not observed Ready yet");
    let object = &endpoint.object;
    assert_eq!(
        (&object["apiVersion"], &object["kind"]),
        (&json!("modelplane.ai/v1alpha1"), &json!("ModelEndpoint"))
    );
    assert_eq!(object["metadata"]["namespace"], "ml-team");
    assert_eq!(
        object["spec"],
        json!({"origin": "https://203.0.113.10",
               "api": {"schema": "OpenAI", "prefix": "/ml-team/qwen3-coder-0/v1"},
               "model": "qwen3-coder",
               "tls": {"serverName": "cluster-gateway.modelplane.internal",
                       "caCertificate": crate::compose::fixtures::TEST_CA}})
    );
    let labels = &object["metadata"]["labels"];
    assert_eq!(labels["modelplane.ai/deployment"], "qwen3-coder");
    assert_eq!(labels["modelplane.ai/cluster"], WEST);
    assert_eq!(labels["modelplane.ai/replica-index"], "0");

    // Its engines stop serving (a crash, a rollout): the endpoint is dropped at once.
    let unready = step(&ready, &[west()], |k| k.starts_with("endpoint-"));
    assert_eq!(endpoints(&unready), Vec::<&str>::new());
}

#[test]
fn a_cluster_without_a_gateway_address_or_ca_gets_no_endpoint_and_an_ipv6_address_is_bracketed() {
    let placed = compose_on(seed(), &[standard()]);
    let ready = step(&placed, &[standard()], |_| true);
    assert_eq!(endpoints(&ready), Vec::<&str>::new());
    assert_eq!(
        ready.status["readyReplicas"], 1,
        "it runs; it is just not reachable"
    );
    let v6 = with_gateway(standard(), "fd00::7");
    let placed = compose_on(seed(), std::slice::from_ref(&v6));
    let ready = step(&placed, std::slice::from_ref(&v6), |_| true);
    assert_eq!(
        ready.resources["endpoint-0-eks-h200-us-west"].object["spec"]["origin"],
        "https://[fd00::7]"
    );
    // An address, but no CA published yet: no endpoint, never one behind a plaintext hop.
    let mut unverified = standard();
    unverified["status"]["gateway"] = json!({"address": "203.0.113.10"});
    let placed = compose_on(seed(), std::slice::from_ref(&unverified));
    let ready = step(&placed, std::slice::from_ref(&unverified), |_| true);
    assert_eq!(endpoints(&ready), Vec::<&str>::new());
    assert_eq!(ready.status["readyReplicas"], 1);
}

/// A ModelService selecting the deployment whose applied routes list `routed`.
fn service(routed: &[&str]) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelService",
           "metadata": {"name": "qwen", "namespace": "ml-team"},
           "spec": {"endpoints": [{"selector": {"matchLabels": {"modelplane.ai/deployment": "qwen3-coder"}}}]},
           "status": {"endpoints": {"routed": routed}}})
}

pub(super) fn step_served(
    previous: &Output,
    clusters: &[Value],
    ready: impl Fn(&str) -> bool,
    routed: &[&str],
) -> Output {
    let req = next_request(&seed(), clusters, previous, ready);
    run(
        compose,
        &with_required(req, services::SERVICES, &[service(routed)]),
    )
    .unwrap()
}

pub(super) const WEST_ENDPOINT: &str = "qwen3-coder-0-eks-h200-us-west";
pub(super) const EAST_ENDPOINT: &str = "qwen3-coder-0-eks-h200-us-east";

#[test]
fn a_moving_deployment_keeps_serving_the_new_endpoint_is_routed_before_the_old_one_goes() {
    // 1-2: the replica runs on us-west and its endpoint is Ready.
    let placed = compose_on(seed(), &[west()]);
    let routed = step(&placed, &[west()], |_| true);
    let serving = step(&routed, &[west()], |_| true);
    assert_eq!(endpoints(&serving), ["endpoint-0-eks-h200-us-west"]);
    assert!(serving.resources["endpoint-0-eks-h200-us-west"].ready);
    assert!(
        !serving.requirements.contains_key(services::SERVICES),
        "services are read only while a replica moves"
    );

    // 3: us-west drains; the replica is placed on us-east. Its engines load there; us-west keeps serving.
    let fleet = [draining(west()), east()];
    let moving = step(&serving, &fleet, |_| true);
    assert_eq!(moving.status["replicas"][0]["cluster"], EAST);
    assert_eq!(endpoints(&moving), ["endpoint-0-eks-h200-us-west"]);
    let on_east = |ready_east: bool| move |k: &str| !k.contains(EAST) || ready_east;
    let loading = step_served(&moving, &fleet, on_east(false), &[WEST_ENDPOINT]);
    assert!(loading.requirements.contains_key(services::SERVICES));
    assert_eq!(endpoints(&loading), ["endpoint-0-eks-h200-us-west"]);

    // 4: us-east serves: its endpoint appears while us-west's is still there.
    let overlap = step_served(&loading, &fleet, on_east(true), &[WEST_ENDPOINT]);
    let both = ["endpoint-0-eks-h200-us-east", "endpoint-0-eks-h200-us-west"];
    assert_eq!(endpoints(&overlap), both);
    assert_eq!(
        overlap.resources["endpoint-0-eks-h200-us-east"].object["spec"]["origin"],
        "https://eks-east-gw.example.com"
    );
    // Its endpoint is Ready, but no service routes it yet: everything stays.
    let unrouted = step_served(&overlap, &fleet, |_| true, &[WEST_ENDPOINT]);
    assert_eq!(endpoints(&unrouted), both);
    // Before Crossplane fetched the services, nothing is let go either.
    let unknown = step(&overlap, &fleet, |_| true);
    assert_eq!(endpoints(&unknown), both);

    // 5: the service routes the new endpoint: only now does the old endpoint go; its workload stays while the
    // service's route still lists the old endpoint, so no request is sent to a replica that is gone.
    let handed = step_served(&unrouted, &fleet, |_| true, &[WEST_ENDPOINT, EAST_ENDPOINT]);
    assert_eq!(endpoints(&handed), ["endpoint-0-eks-h200-us-east"]);
    assert!(
        handed
            .resources
            .keys()
            .any(|k| k.starts_with("replica-0-eks-h200-us-west")),
        "{:?}",
        handed.resources.keys()
    );
    assert_eq!(handed.status["replicas"][0]["movingFrom"]["cluster"], WEST);

    // 6: the route no longer lists the old endpoint: the old workload goes.
    let moved = step_served(&handed, &fleet, |_| true, &[EAST_ENDPOINT]);
    assert_eq!(endpoints(&moved), ["endpoint-0-eks-h200-us-east"]);
    assert!(
        moved.resources.keys().all(|k| !k.contains(WEST)),
        "{:?}",
        moved.resources.keys()
    );
    assert!(moved.status["replicas"][0].get("movingFrom").is_none());

    // At no step was the deployment without an endpoint once it first served.
    for out in [
        &serving, &moving, &loading, &overlap, &unrouted, &unknown, &handed, &moved,
    ] {
        assert!(!endpoints(out).is_empty());
    }
}

#[test]
fn a_moving_replica_keeps_its_old_endpoint_while_its_pod_report_is_not_written() {
    // No pod reporter writes the report (one not running yet): the Object reading it is never Ready.
    let unreported = |k: &str| !k.ends_with("-pods");
    let placed = compose_on(seed(), &[west()]);
    let serving = step(&step(&placed, &[west()], unreported), &[west()], unreported);
    assert_eq!(endpoints(&serving), ["endpoint-0-eks-h200-us-west"]);
    let fleet = [draining(west()), east()];
    let moving = step(&serving, &fleet, unreported);
    assert_eq!(moving.status["replicas"][0]["cluster"], EAST);
    let loading = step_served(
        &moving,
        &fleet,
        |k| unreported(k) && !k.contains(EAST),
        &[WEST_ENDPOINT],
    );
    assert_eq!(
        endpoints(&loading),
        ["endpoint-0-eks-h200-us-west"],
        "the old placement serves until the new one does"
    );
}

#[test]
fn a_move_to_a_cluster_without_a_gateway_does_not_wait_for_an_endpoint_that_never_comes() {
    let placed = compose_on(seed(), &[west()]);
    let serving = step(&step(&placed, &[west()], |_| true), &[west()], |_| true);
    let fleet = [draining(west()), dynamo()];
    let moving = step(&serving, &fleet, |_| true);
    // The new placement serves: there is no endpoint to wait for, so the old endpoint goes at once; its workload
    // stays only while a service still routes the old endpoint.
    let draining_routes = step_served(&moving, &fleet, |_| true, &[WEST_ENDPOINT]);
    assert_eq!(endpoints(&draining_routes), Vec::<&str>::new());
    assert!(draining_routes.resources.keys().any(|k| k.contains(WEST)));
    let moved = step_served(&draining_routes, &fleet, |_| true, &[]);
    assert!(
        moved.resources.keys().all(|k| !k.contains(WEST)),
        "{:?}",
        moved.resources.keys()
    );
    assert_eq!(endpoints(&moved), Vec::<&str>::new());
}

/// `cluster` whose gateway has its address and CA, and admits `admits` (None: not reported).
fn admitting(admits: Option<&str>) -> Value {
    let mut cluster = west();
    match admits {
        Some(admits) => cluster["status"]["gateway"]["admits"] = json!(admits),
        None => drop(
            cluster["status"]["gateway"]
                .as_object_mut()
                .unwrap()
                .remove("admits"),
        ),
    }
    cluster
}

fn routing_keys(out: &Output) -> Vec<&str> {
    out.resources
        .keys()
        .filter(|k| k.starts_with("routing-"))
        .map(String::as_str)
        .collect()
}

#[test]
fn nothing_new_is_routed_through_a_gateway_that_admits_anyone_unless_the_cluster_chose_it() {
    // The client policy not held yet (or its state unknown): the gateway would answer any caller of its load
    // balancer. The replica runs, but gets neither routing objects there nor an endpoint.
    for admits in [Some("Anyone"), None] {
        let cluster = admitting(admits);
        let placed = compose_on(seed(), std::slice::from_ref(&cluster));
        assert_eq!(routing_keys(&placed), Vec::<&str>::new(), "{admits:?}");
        let ready = step(&placed, std::slice::from_ref(&cluster), |_| true);
        assert_eq!(routing_keys(&ready), Vec::<&str>::new(), "{admits:?}");
        assert_eq!(endpoints(&ready), Vec::<&str>::new(), "{admits:?}");
        assert_eq!(ready.status["readyReplicas"], 1, "it runs; it is just not routed");
    }
    // Requiring a certificate (the fleet's, or the placeholder nobody holds): routed.
    for admits in ["FleetGateways", "Nobody"] {
        let cluster = admitting(Some(admits));
        let placed = compose_on(seed(), std::slice::from_ref(&cluster));
        assert!(!routing_keys(&placed).is_empty(), "{admits}");
    }
    // The platform team chose to admit anyone before a fleet CA: routed.
    let mut chosen = admitting(Some("Anyone"));
    chosen["spec"]["gateway"] = json!({"beforeFleetClientCA": "AdmitAll"});
    let placed = compose_on(seed(), std::slice::from_ref(&chosen));
    assert!(!routing_keys(&placed).is_empty());
    let ready = step(&placed, std::slice::from_ref(&chosen), |_| true);
    assert_eq!(endpoints(&ready), ["endpoint-0-eks-h200-us-west"]);
}

#[test]
fn what_is_routed_stays_when_the_gateways_admission_reads_anyone_for_a_while() {
    let routed = step(&compose_on(seed(), &[west()]), &[west()], |_| true);
    let published = step(&routed, &[west()], |_| true);
    assert_eq!(endpoints(&published), ["endpoint-0-eks-h200-us-west"]);
    // The cluster's status reads Anyone (its policy Object's observation lost for a reconcile): the replica's
    // routing objects and its endpoint are observed, so they stay, and callers keep their route.
    let kept = step(&published, &[admitting(Some("Anyone"))], |_| true);
    assert_eq!(routing_keys(&kept), routing_keys(&published));
    assert_eq!(endpoints(&kept), ["endpoint-0-eks-h200-us-west"]);
}
