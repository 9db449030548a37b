//! The cluster's reachability as reported from its probe: the times an outage starts and ends, and the
//! `Reachable` and `Schedulable` conditions, composed at fixed times.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::reachability::PROBE_KEY;
use crate::{
    compose::{Output, fixtures},
    wire::RawStruct,
};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn cluster(scheduling: Value, status: Value) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "onprem"},
           "spec": {"cluster": {"source": "Existing", "existing": {"secretRef": {"name": "onprem-kubeconfig"}}},
                    "scheduling": scheduling,
                    "nodePools": [{"name": "gpu", "className": "eks-h200-8x", "nodeCount": 4}]},
           "status": status})
}

fn class() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass", "metadata": {"name": "eks-h200-8x"},
           "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                                 "count": 8}]}})
}

/// The probe as provider-kubernetes reports it: `synced` with `message`, or not reconciled yet.
fn probe(out: &Output, synced: Option<(&str, &str)>) -> (String, Value) {
    let mut object = Value::Object(out.resources[PROBE_KEY].object.to_map());
    if let Some((status, message)) = synced {
        object["status"] = json!({"conditions": [
            {"type": "Synced", "status": status, "reason": "ReconcileError", "message": message},
            {"type": "Ready", "status": "True", "reason": "Available"}]});
    }
    (PROBE_KEY.to_owned(), object)
}

fn compose(xr: &Value, observed: &[(String, Value)], now: Timestamp) -> Output {
    let req = fixtures::cluster_request(xr, &[class()], observed).build();
    super::compose_at(&req, &RawStruct::from_value(xr).unwrap(), now).unwrap()
}

/// The status one call reports, and the XR carrying it into the next call.
fn carried(xr: &Value, out: &Output) -> Value {
    let mut next = xr.clone();
    next["status"] = Value::Object(out.status.clone());
    next
}

fn condition<'o>(out: &'o Output, type_: &str) -> (&'o str, &'o str, String) {
    let c = out.conditions.iter().find(|c| c.type_ == type_).unwrap();
    let status = match c.status {
        crate::proto::v1::Status::ConditionTrue => "True",
        crate::proto::v1::Status::ConditionFalse => "False",
        _ => "Unknown",
    };
    (status, c.reason, c.message.clone().unwrap_or_default())
}

#[test]
fn an_outage_is_reported_from_its_start_and_the_return_from_its_own() {
    let xr = cluster(json!({}), json!({}));
    let first = compose(&xr, &[], at(0));
    assert_eq!(
        first.resources[PROBE_KEY].object["spec"]["managementPolicies"],
        json!(["Observe"]),
        "the probe only reads"
    );
    assert!(first.status.get("reachability").is_none(), "nothing looked yet");
    assert_eq!(condition(&first, "Schedulable").1, "Open");

    let xr = carried(&xr, &first);
    let answered = compose(&xr, &[probe(&first, Some(("True", "")))], at(5));
    assert_eq!(answered.status["reachability"], json!({"reachable": true}));
    assert_eq!(condition(&answered, "Reachable").0, "True");

    let xr = carried(&xr, &answered);
    let refused = "cannot get object: dial tcp 10.0.0.1:6443: connect: connection refused";
    let lost = compose(&xr, &[probe(&first, Some(("False", refused)))], at(10));
    assert_eq!(
        lost.status["reachability"],
        json!({"reachable": false, "since": at(10).to_string(), "message": refused})
    );
    let (status, reason, message) = condition(&lost, "Reachable");
    assert_eq!((status, reason), ("False", "Unreachable"));
    assert!(
        message.contains(&at(10).to_string()) && message.contains("connection refused"),
        "{message}"
    );
    let (status, reason, message) = condition(&lost, "Schedulable");
    assert_eq!((status, reason), ("False", "Unreachable"));
    assert!(
        message.contains(&at(310).to_string()),
        "says when replicas leave: {message}"
    );
    assert_eq!(
        lost.ttl,
        Some(std::time::Duration::from_secs(300)),
        "composed again when they do"
    );

    let xr = carried(&xr, &lost);
    let still = compose(&xr, &[probe(&first, Some(("False", refused)))], at(400));
    assert_eq!(
        still.status["reachability"]["since"],
        at(10).to_string(),
        "the outage keeps its start"
    );
    assert_eq!(condition(&still, "Schedulable").1, "Evacuating");

    let xr = carried(&xr, &still);
    let back = compose(&xr, &[probe(&first, Some(("True", "")))], at(500));
    assert_eq!(
        back.status["reachability"],
        json!({"reachable": true, "since": at(500).to_string()})
    );
    let (status, reason, _) = condition(&back, "Schedulable");
    assert_eq!((status, reason), ("False", "Returning"));
    let xr = carried(&xr, &back);
    let settled = compose(&xr, &[probe(&first, Some(("True", "")))], at(800));
    assert_eq!(
        condition(&settled, "Schedulable"),
        ("True", "Open", String::new())
    );
}

#[test]
fn a_cordoned_cluster_says_so_and_an_unanswered_probe_holds_nothing_back() {
    let xr = cluster(json!({"cordoned": true}), json!({}));
    let out = compose(&xr, &[], at(0));
    assert_eq!(condition(&out, "Schedulable").1, "Cordoned");
    let unready: Vec<&String> = out
        .resources
        .iter()
        .filter(|(_, c)| !c.ready)
        .map(|(k, _)| k)
        .collect();
    assert!(!unready.iter().any(|k| *k == PROBE_KEY), "{unready:?}");
}
