//! RunFunction from raw bytes: seeded with the fully answered requests of every example, so libFuzzer's byte
//! mutations are mutations of real requests at the protobuf level. Any panic, abort or hang is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use modelplane_function::proto::v1::RunFunctionRequest;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = RunFunctionRequest::decode(data) {
        let _ = modelplane_function::run_function(req);
    }
});
