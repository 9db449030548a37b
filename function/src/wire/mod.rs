//! `google.protobuf.Struct` without prost's tree.
//!
//! Crossplane sends every object (the composite, composed resources, required resources) as a protobuf
//! `Struct`. prost's generated `Struct` is a tree of boxed maps that costs ~10 ms to decode and re-encode on a
//! fleet-sized request, most of it for fields no composer reads. Instead the generated messages hold a
//! [`RawStruct`]: the encoded bytes, kept as they arrived. Composers decode exactly the typed view they need
//! with [`RawStruct::parse`] (a serde `Deserializer` that skips unread fields without parsing them), and the
//! response is built by encoding `serde_json` values straight to wire bytes. Objects we pass through, such as
//! desired resources from earlier pipeline steps, go back out byte for byte.

pub mod content_hash;
mod decode;
mod encode;
mod keys;
mod raw_struct;
pub mod tree;

pub use decode::DecodeError;
pub use raw_struct::RawStruct;
