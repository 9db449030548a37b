//! Writers for a `RunFunctionResponse`.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::{
    proto::v1::{
        Condition, Ready, Resource, ResponseMeta, Result as FnResult, RunFunctionRequest,
        RunFunctionResponse, Severity, State, Status, Target,
    },
    wire::RawStruct,
};

/// How long Crossplane may reuse a response for an identical request; the SDKs' convention.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

/// Starts the response to `req`: its tag, a TTL, and the desired state and context exactly as they arrived, so
/// that what earlier pipeline steps composed survives this step.
pub fn to(req: RunFunctionRequest, ttl: Duration) -> RunFunctionResponse {
    let tag = req.meta.map(|meta| meta.tag).unwrap_or_default();
    RunFunctionResponse {
        meta: Some(ResponseMeta {
            tag,
            ttl: Some(duration(ttl)),
        }),
        desired: Some(req.desired.unwrap_or_default()),
        context: req.context,
        ..Default::default()
    }
}

pub fn duration(ttl: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(ttl.subsec_nanos()).unwrap_or_default(),
    }
}

fn desired(rsp: &mut RunFunctionResponse) -> &mut State {
    rsp.desired.get_or_insert_with(State::default)
}

/// Adds a FATAL result: Crossplane stops the pipeline and applies nothing.
pub fn fatal(rsp: &mut RunFunctionResponse, message: impl Into<String>) -> &mut FnResult {
    result(rsp, Severity::Fatal, message)
}

/// Adds a Warning result, which Crossplane turns into a Warning event on the composite.
pub fn warning(rsp: &mut RunFunctionResponse, message: impl Into<String>) -> &mut FnResult {
    result(rsp, Severity::Warning, message)
}

/// Adds a Normal result, which Crossplane turns into a Normal event on the composite.
pub fn normal(rsp: &mut RunFunctionResponse, message: impl Into<String>) -> &mut FnResult {
    result(rsp, Severity::Normal, message)
}

fn result(rsp: &mut RunFunctionResponse, severity: Severity, message: impl Into<String>) -> &mut FnResult {
    rsp.results.push(FnResult {
        severity: severity as i32,
        message: message.into(),
        reason: None,
        target: Some(Target::Composite as i32),
    });
    let last = rsp.results.len() - 1;
    &mut rsp.results[last]
}

/// Sets a custom condition on the composite. Crossplane ignores its own types (Ready, Synced, ...).
pub fn set_condition(
    rsp: &mut RunFunctionResponse,
    type_: &str,
    status: Status,
    reason: &str,
    message: Option<String>,
) {
    rsp.conditions.push(Condition {
        r#type: type_.to_owned(),
        status: status as i32,
        reason: reason.to_owned(),
        message,
        target: Some(Target::Composite as i32),
    });
}

/// Replaces the desired composed resource `key` with `object`.
pub fn set_desired_composed(
    rsp: &mut RunFunctionResponse,
    key: impl Into<String>,
    object: RawStruct,
    ready: Ready,
) {
    desired(rsp).resources.insert(
        key.into(),
        Resource {
            resource: Some(object),
            connection_details: Default::default(),
            ready: ready as i32,
        },
    );
}

/// Sets the composite's desired status. Crossplane applies only `status` from the desired composite, so the
/// object carries nothing else we own; fields an earlier step put there are kept.
pub fn set_desired_composite_status(
    rsp: &mut RunFunctionResponse,
    status: Map<String, Value>,
    ready: Ready,
) -> Result<(), crate::wire::DecodeError> {
    let composite = desired(rsp).composite.get_or_insert_with(Resource::default);
    let mut object = match &composite.resource {
        Some(raw) if !raw.is_empty() => match raw.to_json()? {
            Value::Object(map) => map,
            _ => Map::new(),
        },
        _ => Map::new(),
    };
    let merged = object
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(existing) = merged {
        existing.extend(status);
    } else {
        *merged = Value::Object(status);
    }
    composite.resource = Some(RawStruct::from_map(&object));
    if ready != Ready::Unspecified {
        composite.ready = ready as i32;
    }
    Ok(())
}
