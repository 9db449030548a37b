//! RunFunction from a composite as JSON: seeded with every example composite, so mutations are mutations of
//! real composites at the JSON level. The composite goes through a whole step, its requirements answered from the
//! examples as Crossplane (and `render`) answers them, with the same request builder the tests and benches use.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use modelplane_function::render::RequestBuilder;
use modelplane_fuzz::objects;
use serde_json::Value;

fn pool() -> &'static [Value] {
    static POOL: OnceLock<Vec<Value>> = OnceLock::new();
    POOL.get_or_init(objects)
}

fuzz_target!(|data: &[u8]| {
    let Ok(composite) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    // answered_from calls the function until its requirements settle; the last call is the one that composes.
    let settled = RequestBuilder::new(&composite).answered_from(pool()).build();
    let _ = modelplane_function::run_function(settled);
});
