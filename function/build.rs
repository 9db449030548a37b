//! Compiles the RunFunction contract in `proto/` with protox (pure Rust, so a fresh machine needs no `protoc`).
//!
//! Two choices here matter at run time:
//! - `google.protobuf.Struct` maps to our `wire::RawStruct`, which keeps the encoded bytes instead of building
//!   prost's tree of boxed values. Fleet-sized requests are mostly Struct bytes; decoding them only where a
//!   composer reads them is what keeps a 300 KB request in single-digit milliseconds.
//! - Every map is a `BTreeMap`, so the same request always encodes to the same response bytes.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["fn/v1/run_function.proto", "fn/v1beta1/run_function.proto"];
    let proto_root = "../proto";
    for file in files {
        println!("cargo:rerun-if-changed={proto_root}/{file}");
    }
    let descriptors = protox::compile(files, [proto_root])?;
    tonic_prost_build::configure()
        .btree_map(".")
        .extern_path(".google.protobuf.Struct", "crate::wire::RawStruct")
        .compile_fds(descriptors)?;
    Ok(())
}
