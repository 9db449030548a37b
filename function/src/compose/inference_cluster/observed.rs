//! What Crossplane observed of the composed resources: whether each exists and is Ready, and the IDs, ARNs and
//! addresses the cloud gave them, which later stages are built from.

use serde_json::Value;

use crate::{compose::remote, proto::v1::RunFunctionRequest, sdk::request};

pub struct Observed<'a> {
    req: &'a RunFunctionRequest,
}

impl<'a> Observed<'a> {
    pub fn new(req: &'a RunFunctionRequest) -> Self {
        Self { req }
    }

    pub fn exists(&self, key: &str) -> bool {
        request::observed_composed(self.req, key).is_some()
    }

    /// Observed with `Ready=True`; only the conditions are read.
    pub fn ready(&self, key: &str) -> bool {
        remote::observed_ready(self.req, key)
    }

    /// A string field of the observed resource under `key`, once it is Ready (a status field of a resource that
    /// is not Ready yet may be half-filled).
    pub fn ready_field(&self, key: &str, pointer: &str) -> Option<Value> {
        self.ready(key).then(|| self.field(key, pointer))?
    }

    /// A field of the resource's own observed spec: what it was last composed with.
    pub fn spec_field(&self, key: &str, pointer: &str) -> Option<Value> {
        self.field(key, pointer)
    }

    /// The non-null field at `pointer`, read without decoding the rest of the resource.
    fn field(&self, key: &str, pointer: &str) -> Option<Value> {
        request::observed_composed(self.req, key)?
            .resource
            .as_ref()?
            .pointer(pointer)
            .ok()
            .flatten()
            .filter(|v| !v.is_null())
    }

    /// Whether any composed resource keyed `<prefix>...` exists: for a cloud's prefix, the activation policy
    /// has then done its work even if it is not observed right now.
    pub fn any_with_prefix(&self, prefix: &str) -> bool {
        self.req
            .observed
            .as_ref()
            .is_some_and(|o| o.resources.keys().any(|k| k.starts_with(prefix)))
    }
}

/// A JSON array of strings as a Vec, when every element is a string.
pub fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}
