//! What provider-upjet-nebius reports of a Ready resource, for `render --until-ready`.

use serde_json::{Value, json};

/// `status.atProvider` of a Ready `kind`; metadata the provider sets (an external name) goes on `observed`.
pub fn observation(_kind: &str, _composed: &Value, _observed: &mut Value) -> Value {
    json!({})
}
