//! RunFunction from a composite as JSON: seeded with every example composite, so mutations are mutations of
//! real composites at the JSON level. The composite goes through both calls of a step, its requirements answered
//! from the examples, as Crossplane would.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use modelplane_fuzz::{answered, first_request, objects};
use serde_json::Value;

fn pool() -> &'static [Value] {
    static POOL: OnceLock<Vec<Value>> = OnceLock::new();
    POOL.get_or_init(objects)
}

fuzz_target!(|data: &[u8]| {
    let Ok(composite) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let first = first_request(&composite);
    let rsp = modelplane_function::run_function(first.clone());
    let _ = modelplane_function::run_function(answered(first, &rsp, pool()));
});
