//! A DRA selector as text, checked against the bounds and, when accepted, evaluated against an H200 as the
//! examples' clusters publish it, on a call's thread as the function runs it.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use modelplane_function::{
    api::inference_class::Device,
    cel,
    limits::{Deadline, run_bounded},
    schedule::devices::context_for,
};

fn device() -> &'static Option<Device> {
    static DEVICE: OnceLock<Option<Device>> = OnceLock::new();
    DEVICE.get_or_init(|| {
        let gpu = serde_json::json!({"name": "gpu", "claim": "DRA", "driver": "gpu.nvidia.com",
            "deviceClassName": "gpu.nvidia.com", "count": 8,
            "attributes": {"productName": {"string": "NVIDIA H200"}, "cudaComputeCapability": {"version": "9.0.0"}},
            "capacity": {"memory": {"value": "141Gi"}}});
        serde_json::from_value(gpu).ok()
    })
}

fuzz_target!(|data: &[u8]| {
    let (Ok(source), Some(device)) = (std::str::from_utf8(data), device()) else {
        return;
    };
    let (source, device) = (source.to_owned(), device.clone());
    let _ = run_bounded(Deadline::default(), move || {
        let selector = cel::compile(&source).ok()?;
        let context = context_for(&device).ok()?;
        Some(selector.matches(&context).is_ok())
    });
});
