//! A JSON pointer walked over `Struct` bytes, as a settled InferenceCluster reads the fields it needs from each
//! observed resource: the input is the pointer, a newline, then the bytes. Whatever the bytes, the walk gives a
//! value, nothing or an error (never a panic), and where the whole object decodes too, the walk finds what
//! `serde_json` finds at that pointer in it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use modelplane_function::wire::RawStruct;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Some(newline) = data.iter().position(|b| *b == b'\n') else {
        return;
    };
    let Ok(pointer) = std::str::from_utf8(&data[..newline]) else {
        return;
    };
    let Ok(raw) = RawStruct::decode(&data[newline + 1..]) else {
        return;
    };
    let walked = raw.pointer(pointer);
    if let (Ok(found), Ok(whole)) = (walked, raw.to_json()) {
        assert_eq!(found.as_ref(), whole.pointer(pointer), "at {pointer:?}");
    }
});
