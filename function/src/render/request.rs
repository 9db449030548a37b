//! Requests as Crossplane sends them, built one way for tests, benchmarks and fuzzing: the first call of a step
//! for a composite, with what is observed and required added by hand, or with the function's requirements
//! answered from a set of objects the way `render` (and Crossplane's requirements loop) answers them.

use serde_json::Value;

use super::{MAX_CALLS, answer, bare_request, resource};
use crate::proto::v1::{Capability, Resources, RunFunctionRequest, Severity};

/// Builds a [`RunFunctionRequest`].
#[derive(Debug, Clone)]
pub struct RequestBuilder {
    req: RunFunctionRequest,
}

impl RequestBuilder {
    /// The first call of a step for `composite`: observed, nothing desired, an empty context, every capability
    /// (see [`super::CAPABILITIES`]) and an empty tag.
    pub fn new(composite: &Value) -> Self {
        Self {
            req: bare_request(composite),
        }
    }

    pub fn tag(mut self, tag: &str) -> Self {
        if let Some(meta) = self.req.meta.as_mut() {
            meta.tag = tag.to_owned();
        }
        self
    }

    /// What the caller advertises instead of every capability (an older Crossplane advertises none).
    pub fn capabilities(mut self, capabilities: &[Capability]) -> Self {
        if let Some(meta) = self.req.meta.as_mut() {
            meta.capabilities = capabilities.iter().map(|c| *c as i32).collect();
        }
        self
    }

    /// A composed resource observed under composition resource name `key`.
    pub fn observed(mut self, key: &str, object: &Value) -> Self {
        if let Some(observed) = self.req.observed.as_mut() {
            observed.resources.insert(key.to_owned(), resource(object));
        }
        self
    }

    /// A composed resource an earlier step of the pipeline desired, under `key`.
    pub fn desired(mut self, key: &str, object: &Value) -> Self {
        if let Some(desired) = self.req.desired.as_mut() {
            desired.resources.insert(key.to_owned(), resource(object));
        }
        self
    }

    /// Requirement `name` answered with `objects`, in this order.
    pub fn required(mut self, name: &str, objects: &[Value]) -> Self {
        let items = objects.iter().map(resource).collect();
        self.req
            .required_resources
            .insert(name.to_owned(), Resources { items });
        self
    }

    /// Calls the function until its requirements settle, answering each from `objects` as Crossplane would
    /// (the objects a requirement selects, ordered by namespace and name), and keeps the last request: the one
    /// that composes. Stops early on a FATAL result.
    pub fn answered_from(mut self, objects: &[Value]) -> Self {
        for _ in 0..MAX_CALLS {
            let rsp = crate::run_function(self.req.clone());
            // A FATAL response asks for nothing: answering it would drop the answers that led to the FATAL.
            if rsp.results.iter().any(|r| r.severity == Severity::Fatal as i32) {
                break;
            }
            let before = self.req.required_resources.clone();
            answer(&mut self.req, &rsp, objects);
            if self.req.required_resources == before {
                break;
            }
        }
        self
    }

    pub fn build(self) -> RunFunctionRequest {
        self.req
    }
}
