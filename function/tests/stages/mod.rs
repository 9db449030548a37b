//! Bringing an InferenceCluster up the way Crossplane would: call the function, observe everything it composed
//! as Ready (with the IDs and ARNs AWS would report), call again, until nothing new is composed.

#![allow(dead_code)]

use std::collections::BTreeMap;

use modelplane_function::{
    proto::v1::{Resource, RunFunctionRequest, RunFunctionResponse},
    run_function,
    wire::RawStruct,
};
use serde_json::{Value, json};

pub fn resource(v: &Value) -> Resource {
    Resource {
        resource: RawStruct::from_value(v),
        ..Default::default()
    }
}

/// What AWS and Crossplane would report once a composed resource is Ready.
pub fn observed_ready(object: &Value) -> Value {
    // An upjet provider's resources (the clouds beyond EKS) are observed as `render --until-ready` observes them,
    // with the IDs and external names their composers read.
    let group = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .split('/')
        .next()
        .unwrap_or_default();
    if group.ends_with(".m.upbound.io") {
        return modelplane_function::render::simulate::observe(object);
    }
    let mut observed = object.clone();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let at_provider = match object["kind"].as_str().unwrap_or_default() {
        "Network" => {
            let zones = object["spec"]["forProvider"]["zones"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let subnets: Vec<Value> = zones
                .iter()
                .enumerate()
                .map(|(i, zone)| json!({"zone": zone, "id": format!("subnet-0{i}"), "cidrBlock": format!("10.0.{i}.0/24")}))
                .collect();
            json!({"vpcId": "vpc-0a", "privateSubnets": subnets})
        }
        "Role" => json!({"arn": format!("arn:aws:iam::123456789012:role/{name}")}),
        "FileSystem" => json!({"fileSystemId": "fs-0123abcd"}),
        _ => json!({}),
    };
    observed["status"] = json!({"atProvider": at_provider,
                                "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]});
    observed
}

/// Runs `req` (its observed composite and required resources as given) stage after stage; every response, the
/// last one once nothing new is composed.
pub fn every_stage(req: &RunFunctionRequest) -> Vec<RunFunctionResponse> {
    let mut req = req.clone();
    let mut responses: Vec<RunFunctionResponse> = Vec::new();
    for _ in 0..10 {
        let rsp = run_function(req.clone());
        let composed: BTreeMap<String, Value> = rsp
            .desired
            .as_ref()
            .map(|d| {
                d.resources
                    .iter()
                    .filter_map(|(k, r)| Some((k.clone(), r.resource.as_ref()?.to_json().ok()?)))
                    .collect()
            })
            .unwrap_or_default();
        let settled = responses
            .last()
            .and_then(|r| r.desired.as_ref())
            .is_some_and(|d| d.resources.len() == composed.len());
        responses.push(rsp);
        if settled {
            return responses;
        }
        let observed = &mut req.observed.get_or_insert_with(Default::default).resources;
        observed.clear();
        for (key, object) in composed {
            observed.insert(key, resource(&observed_ready(&object)));
        }
    }
    panic!("the stages did not settle");
}
