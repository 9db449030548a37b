//! Bringing an InferenceCluster up the way Crossplane would: call the function, observe everything it composed
//! as Ready (with the IDs its cloud would report, as `render --until-ready` simulates them), call again, until nothing new is composed.

#![allow(dead_code)]

use std::collections::BTreeMap;

use modelplane_function::{
    proto::v1::{Resource, RunFunctionRequest, RunFunctionResponse},
    render::simulate,
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

/// What the resource's provider and Crossplane would report once the composed resource under `key` is Ready: the
/// simulation `render --until-ready` observes with.
pub fn observed_ready(key: &str, object: &Value) -> Value {
    let mut object = object.clone();
    object["metadata"]["annotations"]["crossplane.io/composition-resource-name"] = json!(key);
    simulate::observe(&object)
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
            let ready = observed_ready(&key, &object);
            observed.insert(key, resource(&ready));
        }
    }
    panic!("the stages did not settle");
}
