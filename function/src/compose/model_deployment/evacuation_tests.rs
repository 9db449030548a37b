//! Replicas on a cluster that is lost, cordoned or just back (docs/scheduling.md, "Losing a cluster"): traffic
//! leaves a lost cluster at once, its replicas leave once its grace period is over (make before break, never
//! without somewhere to go), a cordoned cluster drains, and a returning one takes nothing new for a while.
//! Outages are dated well clear of the grace period's end, so the test's own clock never decides an outcome.

use serde_json::{Value, json};

use super::{
    routing_tests::{EAST, EAST_ENDPOINT, WEST, WEST_ENDPOINT, east, endpoints, step, step_served, west},
    tests::seed,
    *,
};
use crate::compose::fixtures::{request, run, with_observed, with_required};

/// `cluster` unreachable for `seconds` so far (the default grace period is 300 s).
fn lost_for(mut cluster: Value, seconds: i64) -> Value {
    let since = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(seconds);
    cluster["status"]["reachability"] =
        json!({"reachable": false, "since": since.to_string(), "message": "connection refused"});
    cluster
}

fn cordoned(mut cluster: Value) -> Value {
    cluster["spec"]["scheduling"] = json!({"cordoned": true});
    cluster
}

/// `cluster` reachable again for `seconds`.
fn back_for(mut cluster: Value, seconds: i64) -> Value {
    let since = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(seconds);
    cluster["status"]["reachability"] = json!({"reachable": true, "since": since.to_string()});
    cluster
}

fn condition<'o>(out: &'o Output, type_: &str) -> (&'o str, String) {
    let c = out.conditions.iter().find(|c| c.type_ == type_).unwrap();
    (c.reason, c.message.clone().unwrap_or_default())
}

/// The replica serving on us-west with its endpoint Ready.
fn serving_on_west() -> Output {
    let placed = tests::compose_on(seed(), &[west()]);
    let routed = step(&placed, &[west()], |_| true);
    step(&routed, &[west()], |_| true)
}

fn has_workload_on(out: &Output, cluster: &str) -> bool {
    out.resources
        .keys()
        .any(|k| k.starts_with("replica-0-") && k.contains(cluster))
}

#[test]
fn a_lost_clusters_replica_leaves_every_route_at_once_and_stays_placed_through_the_grace_period() {
    let serving = serving_on_west();
    assert_eq!(condition(&serving, "ClustersAvailable").0, "ClustersAvailable");
    let fleet = [lost_for(west(), 10), east()];
    let lost = step(&serving, &fleet, |_| true);
    assert_eq!(
        endpoints(&lost),
        Vec::<&str>::new(),
        "no caller is sent to the lost cluster"
    );
    assert_eq!(
        lost.status["replicas"][0]["cluster"], WEST,
        "not moved within the grace period"
    );
    assert_eq!(lost.status["readyReplicas"], 0);
    assert!(has_workload_on(&lost, WEST));
    assert!(!has_workload_on(&lost, EAST));
    let (reason, message) = condition(&lost, "ClustersAvailable");
    assert_eq!(reason, "ClusterUnreachable");
    assert!(
        message.starts_with("replica 0 on eks-h200-us-west: eks-h200-us-west is unreachable since"),
        "{message}"
    );
    let ttl = lost.ttl.unwrap();
    assert!(
        ttl <= WAITING_TTL,
        "composed again soon, and by the grace period's end: {ttl:?}"
    );
}

#[test]
fn past_its_grace_period_a_lost_clusters_replica_is_placed_elsewhere_and_its_old_placement_never_routed() {
    let serving = serving_on_west();
    let fleet = [lost_for(west(), 1000), east()];
    let moving = step(&serving, &fleet, |_| true);
    assert_eq!(moving.status["replicas"][0]["cluster"], EAST);
    assert_eq!(moving.status["replicas"][0]["movingFrom"]["cluster"], WEST);
    assert!(
        has_workload_on(&moving, WEST),
        "kept until its successor serves: {:?}",
        moving.resources.keys()
    );
    assert_eq!(
        endpoints(&moving),
        Vec::<&str>::new(),
        "the lost placement's endpoint is gone"
    );
    assert_eq!(condition(&moving, "ClustersAvailable").0, "Evacuating");

    // us-east serves: its endpoint appears; the lost placement is never routed again.
    let on_east = step_served(&moving, &fleet, |_| true, &[]);
    assert_eq!(endpoints(&on_east), ["endpoint-0-eks-h200-us-east"]);
    let handed = step_served(&on_east, &fleet, |_| true, &[EAST_ENDPOINT]);
    assert_eq!(endpoints(&handed), ["endpoint-0-eks-h200-us-east"]);
    // No service routes the lost endpoint: the old workload is let go, for its cluster to delete on return.
    assert!(!has_workload_on(&handed, WEST), "{:?}", handed.resources.keys());
    assert_eq!(condition(&handed, "ClustersAvailable").0, "ClustersAvailable");

    // us-west comes back: nothing moves back on its own.
    let returned = [back_for(west(), 10), east()];
    let after = step_served(&handed, &returned, |_| true, &[EAST_ENDPOINT]);
    assert_eq!(after.status["replicas"][0]["cluster"], EAST);
    assert!(!has_workload_on(&after, WEST));
}

#[test]
fn with_nowhere_to_go_a_lost_clusters_replica_is_kept_but_not_routed() {
    let serving = serving_on_west();
    let stranded = step(&serving, &[lost_for(west(), 1000)], |_| true);
    assert!(
        has_workload_on(&stranded, WEST),
        "{:?}",
        stranded.resources.keys()
    );
    assert_eq!(endpoints(&stranded), Vec::<&str>::new());
    assert!(stranded.status["replicas"][0].get("cluster").is_none());
    assert_eq!(condition(&stranded, "Scheduled").0, "NoMatchingCluster");
    let (_, message) = condition(&stranded, "ClustersAvailable");
    assert!(
        message.contains("stays on eks-h200-us-west: no other cluster fits"),
        "{message}"
    );
    // Still nowhere to go on the next call: kept all the same.
    let again = step(&stranded, &[lost_for(west(), 1010)], |_| true);
    assert!(has_workload_on(&again, WEST));
}

#[test]
fn a_cordoned_cluster_drains_make_before_break_and_keeps_serving_with_nowhere_to_go() {
    let serving = serving_on_west();
    let fleet = [cordoned(west()), east()];
    let moving = step(&serving, &fleet, |_| true);
    assert_eq!(moving.status["replicas"][0]["cluster"], EAST);
    assert_eq!(
        endpoints(&moving),
        ["endpoint-0-eks-h200-us-west"],
        "serves until its successor does"
    );
    assert_eq!(condition(&moving, "ClustersAvailable").0, "Draining");
    let loading = step_served(&moving, &fleet, |k| !k.contains(EAST), &[WEST_ENDPOINT]);
    assert_eq!(endpoints(&loading), ["endpoint-0-eks-h200-us-west"]);

    let alone = step(&serving, &[cordoned(west())], |_| true);
    assert_eq!(
        endpoints(&alone),
        ["endpoint-0-eks-h200-us-west"],
        "nowhere to go: it keeps serving"
    );
}

#[test]
fn a_returning_cluster_keeps_its_replicas_but_takes_no_new_one_until_a_grace_period_has_passed() {
    let serving = serving_on_west();
    let returning = [back_for(west(), 10)];
    let kept = step(&serving, &returning, |_| true);
    assert_eq!(kept.status["replicas"][0]["cluster"], WEST);
    assert_eq!(endpoints(&kept), ["endpoint-0-eks-h200-us-west"]);

    let mut two = seed();
    two["spec"]["replicas"] = json!(2);
    let mut big = back_for(west(), 10);
    big["status"]["pools"][0]["nodeCount"] = json!(4);
    let out = run(
        compose,
        &super::engine_tests::next_request(&two, &[big.clone()], &serving, |_| true),
    )
    .unwrap();
    assert_eq!(out.status["replicas"][0]["cluster"], WEST);
    let rejection = &out.status["replicas"][1]["rejections"][0]["reason"];
    assert!(
        rejection
            .as_str()
            .unwrap()
            .starts_with("reachable again; takes new replicas from"),
        "{rejection}"
    );
    big["status"]["reachability"]["since"] =
        json!((jiff::Timestamp::now() - jiff::SignedDuration::from_secs(1000)).to_string());
    let out = run(
        compose,
        &super::engine_tests::next_request(&two, &[big], &serving, |_| true),
    )
    .unwrap();
    assert_eq!(out.status["replicas"][1]["cluster"], WEST, "open again");
}

#[test]
fn a_cluster_whose_status_lags_is_not_evacuated_once_the_deployments_own_objects_there_answered() {
    // The cluster's status says lost for longer than its grace period, but the deployment's Objects there were
    // synced since: the outage ended and the cluster's composite has not been reconciled yet.
    let serving = serving_on_west();
    let fleet = [lost_for(west(), 1000), east()];
    let answered = (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(10)).to_string();
    let mut req = with_required(request(seed()), CLUSTERS, &fleet);
    req = with_required(req, CACHE, &[tests::cache(&fleet, "Ready")]);
    for (key, composed) in &serving.resources {
        let mut object = Value::Object(composed.object.to_map());
        object["status"] = json!({"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "Synced", "status": "True", "lastTransitionTime": answered},
        ]});
        req = with_observed(req, key, &object);
    }
    let out = run(compose, &req).unwrap();
    assert_eq!(out.status["replicas"][0]["cluster"], WEST, "not evacuated");
    assert!(out.status["replicas"][0].get("movingFrom").is_none());
    assert!(!has_workload_on(&out, EAST));
    assert_eq!(
        endpoints(&out),
        ["endpoint-0-eks-h200-us-west"],
        "still routed: the cluster answers"
    );
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("eks-h200-us-west") && w.contains(&answered)),
        "{:?}",
        out.warnings
    );

    // Synced before the outage began says nothing about now: evacuated as before.
    let lost = step(&serving, &fleet, |_| true);
    assert_eq!(lost.status["replicas"][0]["cluster"], EAST);
}
