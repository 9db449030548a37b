//! The conditions a ModelService reports: whether its entries found endpoints, and whether it is routed.

use super::weights;
use crate::compose::conditions::{ConditionType, Reason};
use crate::{api::routing::ModelServiceSpec, compose::Output, proto::v1::Status};

pub fn endpoints(
    out: &mut Output,
    spec: &ModelServiceSpec,
    names: &[String],
    plan: &weights::Plan,
    namespace: &str,
    refused: &[(usize, &str)],
) {
    if !refused.is_empty() {
        // Tenancy first: an entry reaching into a namespace nobody granted is the user's to fix, whatever else
        // resolves.
        let fields: Vec<String> = refused
            .iter()
            .map(|(i, other)| format!("spec.endpoints[{i}].namespace ({other:?})"))
            .collect();
        out.condition(
            ConditionType::EndpointsResolved,
            Status::ConditionFalse,
            Reason::NamespaceNotGranted,
            format!(
                "{}: no InferenceGateway's spec.endpointGrants lets namespace {namespace:?} select there; those \
                 entries match nothing",
                fields.join(", ")
            ),
        );
        return;
    }
    let selectors = || {
        spec.endpoints
            .iter()
            .zip(names)
            .map(|(e, name)| {
                let labels: Vec<String> = e
                    .selector
                    .match_labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                match &e.namespace {
                    Some(other) if other != namespace => format!("{name}: {} in {other}", labels.join(",")),
                    _ => format!("{name}: {} in {namespace}", labels.join(",")),
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let (status, reason, message) = if plan.matched == 0 {
        (
            Status::ConditionFalse,
            Reason::NoEndpoints,
            format!(
                "no ModelEndpoint matches any entry of spec.endpoints ({})",
                selectors()
            ),
        )
    } else if plan.ready == 0 {
        (
            Status::ConditionFalse,
            Reason::NoReadyEndpoints,
            format!(
                "{} ModelEndpoints match spec.endpoints but none is ready",
                plan.matched
            ),
        )
    } else {
        let idle = if plan.idle_entries.is_empty() {
            String::new()
        } else {
            format!(
                "; entries with no ready endpoint: {}",
                plan.idle_entries.join(", ")
            )
        };
        (
            Status::ConditionTrue,
            Reason::Resolved,
            format!(
                "{} of {} matched ModelEndpoints are ready{idle}",
                plan.ready, plan.matched
            ),
        )
    };
    out.condition(ConditionType::EndpointsResolved, status, reason, message);
}

pub fn routing(out: &mut Output, no_gateway: bool, no_backends: bool, waiting: &[String]) {
    let (status, reason, message) = if no_gateway {
        (
            Status::ConditionFalse,
            Reason::NoGateway,
            "no InferenceGateway serves this service (none exists, or no serviceSelector matches its labels)"
                .to_owned(),
        )
    } else if no_backends {
        (
            Status::ConditionFalse,
            Reason::NoBackends,
            "no route is composed until an endpoint is ready; the model is absent from /v1/models meanwhile"
                .to_owned(),
        )
    } else if !waiting.is_empty() {
        (
            Status::ConditionFalse,
            Reason::Waiting,
            format!("waiting for {}", waiting.join("; ")),
        )
    } else {
        (Status::ConditionTrue, Reason::Routed, String::new())
    };
    out.condition(ConditionType::RoutingReady, status, reason, message);
}
