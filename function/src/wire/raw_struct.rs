//! The prost `Message` impl that keeps a `google.protobuf.Struct` encoded.

use ::bytes::{Buf, BufMut};
use prost::{
    DecodeError as ProstDecodeError, Message,
    encoding::{
        DecodeContext, WireType, bytes, decode_varint, encode_key, encode_varint, fixed32, fixed64,
        skip_field,
    },
};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{decode, encode};

/// A `google.protobuf.Struct` held as its encoded fields.
///
/// Equality is byte equality, which is what "returned unchanged" means on the wire.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RawStruct {
    bytes: Vec<u8>,
}

impl RawStruct {
    /// Encodes a JSON object. Numbers become doubles, as they do in Crossplane's own conversion.
    pub fn from_map(map: &Map<String, Value>) -> Self {
        Self {
            bytes: encode::struct_bytes(map),
        }
    }

    /// [`RawStruct::from_map`] consuming `map`, freeing each part as it is encoded.
    pub fn from_owned(map: Map<String, Value>) -> Self {
        Self {
            bytes: encode::struct_bytes_owned(map),
        }
    }

    /// Encodes a compact tree's fields, consuming them (see [`super::tree`]).
    pub fn from_tree(fields: super::tree::Fields) -> Self {
        Self {
            bytes: encode::tree_bytes(fields),
        }
    }

    /// Encodes a JSON value that must be an object; anything else has no `Struct` form.
    pub fn from_value(value: &Value) -> Option<Self> {
        value.as_object().map(Self::from_map)
    }

    /// Decodes the typed view `T`, reading only the fields `T` declares. Errors name the field path.
    pub fn parse<'de, T: Deserialize<'de>>(&'de self) -> Result<T, decode::DecodeError> {
        decode::from_struct_bytes(&self.bytes)
    }

    /// Decodes the whole object as JSON. Integral numbers come back as integers.
    pub fn to_json(&self) -> Result<Value, decode::DecodeError> {
        self.parse()
    }

    /// The value at the JSON `pointer`, decoding only it and the entries on the way to it.
    pub fn pointer(&self, pointer: &str) -> Result<Option<Value>, decode::DecodeError> {
        decode::pointer(&self.bytes, pointer)
    }

    /// The encoded fields of the `Struct` message (without its own tag and length).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl std::fmt::Debug for RawStruct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_json() {
            Ok(json) => write!(f, "RawStruct({json})"),
            Err(e) => write!(f, "RawStruct(<{} bytes, undecodable: {e}>)", self.bytes.len()),
        }
    }
}

impl Message for RawStruct {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.bytes);
    }

    /// Appends one field as it arrived. A `Struct` has a single repeated field, so this runs once per
    /// top-level key: a handful of copies per object, however deep it is.
    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), ProstDecodeError> {
        match wire_type {
            WireType::Varint => {
                let value = decode_varint(buf)?;
                encode_key(tag, wire_type, &mut self.bytes);
                encode_varint(value, &mut self.bytes);
            }
            WireType::SixtyFourBit => {
                let mut value = 0u64;
                fixed64::merge(wire_type, &mut value, buf, ctx)?;
                fixed64::encode(tag, &value, &mut self.bytes);
            }
            WireType::ThirtyTwoBit => {
                let mut value = 0u32;
                fixed32::merge(wire_type, &mut value, buf, ctx)?;
                fixed32::encode(tag, &value, &mut self.bytes);
            }
            WireType::LengthDelimited => {
                let mut payload = Vec::new();
                bytes::merge(wire_type, &mut payload, buf, ctx)?;
                bytes::encode(tag, &payload, &mut self.bytes);
            }
            // Groups have no place in a Struct; drop them as prost drops unknown fields.
            WireType::StartGroup | WireType::EndGroup => skip_field(wire_type, tag, buf, ctx)?,
        }
        Ok(())
    }

    fn encoded_len(&self) -> usize {
        self.bytes.len()
    }

    fn clear(&mut self) {
        self.bytes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "InferenceCluster",
            "metadata": {"name": "eks-h200", "labels": {"a": "b"}},
            "spec": {"nodePools": [{"name": "gpu", "nodeCount": 2, "ratio": 0.5}], "flag": true, "none": null,
                     "empty": {}, "list": []}
        })
    }

    #[test]
    fn json_survives_a_round_trip_through_struct_bytes() {
        let raw = RawStruct::from_value(&sample()).unwrap();
        assert_eq!(raw.to_json().unwrap(), sample());
    }

    #[test]
    fn bytes_match_prost_types_struct_encoding_of_the_same_object() {
        // prost_types is the reference encoder here: its Struct must decode our bytes to the same tree, and our
        // decoder must read its bytes.
        let raw = RawStruct::from_value(&sample()).unwrap();
        let theirs = prost_types::Struct::decode(raw.as_bytes()).unwrap();
        let reencoded = theirs.encode_to_vec();
        let back = RawStruct::decode(&mut reencoded.as_slice()).unwrap();
        assert_eq!(back.to_json().unwrap(), sample());
        assert_eq!(
            theirs.fields["kind"].kind,
            Some(prost_types::value::Kind::StringValue("InferenceCluster".into()))
        );
    }

    #[test]
    fn merge_keeps_fields_byte_for_byte_inside_an_enclosing_message() {
        let raw = RawStruct::from_value(&sample()).unwrap();
        let mut framed = Vec::new();
        prost::encoding::message::encode(1, &raw, &mut framed);
        let mut decoded = RawStruct::default();
        let mut buf = &framed[..];
        let (tag, wire_type) = prost::encoding::decode_key(&mut buf).unwrap();
        assert_eq!((tag, wire_type), (1, WireType::LengthDelimited));
        prost::encoding::message::merge(wire_type, &mut decoded, &mut buf, DecodeContext::default()).unwrap();
        assert_eq!(decoded, raw);
    }

    #[test]
    fn truncated_bytes_are_an_error_not_a_panic() {
        let raw = RawStruct::from_value(&sample()).unwrap();
        let cut = &raw.as_bytes()[..raw.as_bytes().len() / 2];
        let broken = RawStruct { bytes: cut.to_vec() };
        assert!(broken.to_json().is_err());
    }
}
