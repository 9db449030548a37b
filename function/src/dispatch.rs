//! The RunFunction body: choose the composer for the observed composite, run it, and write its output into a
//! response that starts from the request. Domain errors become FATAL results; the gRPC call itself succeeds.

use std::panic::{AssertUnwindSafe, catch_unwind};

use prost::Message;

use crate::{
    api::{ObjectMeta, TypeMeta},
    compose::{self, ComposeFn, Output},
    limits::{self, Deadline},
    proto::v1::{
        Capability, Ready, Requirements, ResponseMeta, RunFunctionRequest, RunFunctionResponse, Status,
    },
    sdk::{request, response},
};

pub use crate::limits::MAX_RESPONSE_BYTES;

/// Runs one request through the composer for its composite kind, on a thread of its own with the default
/// deadline. Never panics: a composer that panics fails this request with a FATAL result and leaves the process
/// serving.
pub fn run_function(req: RunFunctionRequest) -> RunFunctionResponse {
    run_function_until(req, Deadline::default())
}

/// [`run_function`] under `deadline`; the server cancels it when the caller goes away.
pub fn run_function_until(req: RunFunctionRequest, deadline: Deadline) -> RunFunctionResponse {
    let tag = req.meta.as_ref().map(|meta| meta.tag.clone()).unwrap_or_default();
    limits::run_bounded(deadline, move || run_with(compose::COMPOSERS, req)).unwrap_or_else(|| {
        let mut rsp = RunFunctionResponse {
            meta: Some(ResponseMeta { tag, ttl: None }),
            ..Default::default()
        };
        response::fatal(&mut rsp, "internal error: cannot start a thread for the call");
        rsp
    })
}

/// [`run_function_until`] on the calling thread, which must have [`limits::CALL_STACK_BYTES`] of stack: the
/// server's compose pool calls this, so no call pays for a thread of its own.
pub fn run_function_here(req: RunFunctionRequest, deadline: Deadline) -> RunFunctionResponse {
    limits::run_here(deadline, move || run_with(compose::COMPOSERS, req))
}

/// [`run_function`] with its table of composers given (tests inject composers that misbehave).
pub fn run_with(composers: &[(&str, ComposeFn)], req: RunFunctionRequest) -> RunFunctionResponse {
    let caller = Caller::of(&req);
    let outcome = compose_request(composers, &req).and_then(|out| caller.can_answer(out));
    let mut rsp = response::to(req, response::DEFAULT_TTL);
    match outcome.and_then(|out| apply(&mut rsp, out, caller)) {
        Ok(()) => limit_size(rsp, caller),
        Err(message) => {
            let message = limits::bound_message(message);
            // Not `message`: that is the event's own key in JSON logs, and a second one would shadow it.
            tracing::warn!(reason = %message, "composition failed");
            response::fatal(&mut rsp, message);
            limit_size(rsp, caller)
        }
    }
}

fn compose_request(composers: &[(&str, ComposeFn)], req: &RunFunctionRequest) -> Result<Output, String> {
    let Some(xr) = request::observed_composite(req) else {
        return Err("request has no observed composite resource (observed.composite.resource)".into());
    };
    let type_meta: TypeMeta = xr
        .parse()
        .map_err(|e| format!("cannot read the observed composite: {e}"))?;
    let compose = compose::composer_in(composers, &type_meta)?;
    let meta: ObjectMeta = xr
        .parse::<MetadataOnly>()
        .map(|m| m.metadata)
        .map_err(|e| format!("cannot read {} metadata: {e}", type_meta.kind))?;
    let subject = format!("{} {}", type_meta.kind, qualified_name(&meta));
    crate::validate::composite_on_the_wire(&type_meta, xr)
        .map_err(|e| format!("{subject}: {}", e.chain()))?;
    tracing::debug!(%subject, "composing");
    match catch_unwind(AssertUnwindSafe(|| compose(req, xr))) {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e)) => Err(format!("{subject}: {}", e.chain())),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            tracing::error!(%subject, panic = %what, "composer panicked");
            Err(format!(
                "{subject}: internal error while composing (please report this bug): {what}"
            ))
        }
    }
}

/// What the caller can do, from `RequestMeta.capabilities` (Crossplane v2.2 and later). An older caller
/// advertises nothing and is assumed able to do what every Crossplane the packages allow can do.
#[derive(Clone, Copy)]
struct Caller {
    lacks_required_resources: bool,
    lacks_conditions: bool,
}

impl Caller {
    fn of(req: &RunFunctionRequest) -> Self {
        Self {
            lacks_required_resources: request::lacks_capability(req, Capability::RequiredResources),
            lacks_conditions: request::lacks_capability(req, Capability::Conditions),
        }
    }

    /// A composite that needs required resources cannot be composed by a caller that will never fetch them.
    /// Answering with what could be composed without them would be an incomplete (often empty) desired state,
    /// and Crossplane deletes every composed resource a desired state leaves out: fail instead, which keeps
    /// what exists.
    fn can_answer(self, out: Output) -> Result<Output, String> {
        if !self.lacks_required_resources || out.requirements.is_empty() {
            return Ok(out);
        }
        let wanted: Vec<String> = out
            .requirements
            .iter()
            .map(|(name, selector)| format!("{name} ({} {})", selector.api_version, selector.kind))
            .collect();
        Err(format!(
            "this composite needs required resources ({}), but the calling Crossplane does not advertise the \
             required-resources capability, so it would never send them; run the function from a Crossplane that \
             supports required resources (v2.0 or later)",
            wanted.join(", ")
        ))
    }
}

#[derive(serde::Deserialize)]
struct MetadataOnly {
    #[serde(default)]
    metadata: ObjectMeta,
}

fn qualified_name(meta: &ObjectMeta) -> String {
    match meta.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{ns}/{}", meta.name),
        None => meta.name.clone(),
    }
}

/// Writes a composer's output into the response. Conditions go only to a caller that can set them.
fn apply(rsp: &mut RunFunctionResponse, out: Output, caller: Caller) -> Result<(), String> {
    // Each object is consumed as it is encoded: every part is freed right after it is written, while it is
    // still in the cache.
    for (key, composed) in out.resources {
        limits::check_deadline().map_err(|e| e.reason)?;
        let ready = if composed.ready {
            Ready::True
        } else {
            Ready::Unspecified
        };
        response::set_desired_composed(rsp, key, composed.object.into_raw(), ready);
    }
    let ready = match out.ready {
        Some(true) => Ready::True,
        Some(false) => Ready::False,
        None => Ready::Unspecified,
    };
    if !out.status.is_empty() || ready != Ready::Unspecified {
        response::set_desired_composite_status(rsp, out.status, ready)
            .map_err(|e| format!("cannot read the desired composite from earlier steps: {e}"))?;
    }
    let conditions = if caller.lacks_conditions {
        Vec::new()
    } else {
        out.conditions
    };
    for condition in conditions {
        response::set_condition(
            rsp,
            condition.type_,
            condition.status,
            condition.reason,
            condition.message,
        );
    }
    for warning in out.warnings {
        response::warning(rsp, warning);
    }
    if let (Some(ttl), Some(meta)) = (out.ttl, rsp.meta.as_mut()) {
        meta.ttl = Some(response::duration(ttl));
    }
    if !out.requirements.is_empty() {
        rsp.requirements = Some(Requirements {
            resources: out.requirements,
            ..Default::default()
        });
    }
    Ok(())
}

/// Replaces a response Crossplane could not receive with a FATAL result that says why, keeping any FATAL result
/// it already had (their messages are bounded). Nothing is lost: on a FATAL result Crossplane applies nothing
/// and keeps what already exists.
fn limit_size(rsp: RunFunctionResponse, caller: Caller) -> RunFunctionResponse {
    let size = rsp.encoded_len();
    if size <= MAX_RESPONSE_BYTES {
        return rsp;
    }
    let fatal = crate::proto::v1::Severity::Fatal as i32;
    let mut small = RunFunctionResponse {
        meta: rsp.meta,
        results: rsp
            .results
            .into_iter()
            .filter(|r| r.severity == fatal)
            .take(1)
            .collect(),
        ..Default::default()
    };
    if !small.results.is_empty() {
        return small;
    }
    response::fatal(
        &mut small,
        format!(
            "the composed response is {size} bytes, over Crossplane's {MAX_RESPONSE_BYTES}-byte limit for a function \
             response; split the composite (fewer replicas or clusters per ModelDeployment)"
        ),
    );
    if !caller.lacks_conditions {
        response::set_condition(
            &mut small,
            "ResponseTooLarge",
            Status::ConditionTrue,
            "ResponseTooLarge",
            None,
        );
    }
    small
}
