//! A serde `Deserializer` that reads `google.protobuf.Struct` / `Value` wire bytes directly.
//!
//! Nothing is copied into an intermediate tree: strings and keys are borrowed from the request buffer where the
//! target type allows it, and a field the target type does not declare is skipped by its length prefix without
//! looking inside. This is what lets the scheduler read a hundred clusters' status from a fleet request without
//! paying for their specs.

use std::borrow::Cow;

use prost::encoding::decode_varint;
use serde::{
    Deserialize,
    de::{
        self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor,
        value::BorrowedStrDeserializer,
    },
    forward_to_deserialize_any,
};

use super::keys::{
    BOOL_VALUE, ENTRY_KEY, ENTRY_VALUE, LIST_VALUE, NULL_VALUE, NUMBER_VALUE, STRING_VALUE, STRUCT_VALUE,
};

/// Why a `Struct` could not be read as the requested type, with the field path where it went wrong
/// (for example `spec.nodePools[1].nodeCount: invalid type: string "two", expected u32`).
#[derive(Debug, thiserror::Error)]
#[error("{}{message}", path_prefix(path))]
pub struct DecodeError {
    pub path: String,
    pub message: String,
}

fn path_prefix(path: &str) -> String {
    if path.is_empty() || path == "." {
        String::new()
    } else {
        format!("{path}: ")
    }
}

/// Deserializes `T` from the encoded fields of a `Struct` message.
pub fn from_struct_bytes<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, DecodeError> {
    // Path tracking copies every key it passes into a String, skipped fields included: on a fleet request that
    // was most of the decode time. Bad input is rare, so decode untracked and, only when that fails, decode again
    // to learn where. The input is the same, so the second pass fails at the same place with the same error.
    T::deserialize(Node::<BYTE_FIELD_NAMES>::Struct(bytes, 0)).or_else(|_| {
        serde_path_to_error::deserialize(Node::<TEXT_FIELD_NAMES>::Struct(bytes, 0)).map_err(|e| {
            DecodeError {
                path: e.path().to_string(),
                message: e.inner().0.clone(),
            }
        })
    })
}

/// The value at `pointer` (a JSON pointer, read as `serde_json::Value::pointer` reads one) in the `Struct` whose
/// fields are `bytes`, or None where nothing is. Only the entries on the way are looked at, and only the value
/// found is decoded: reading one status field of an observed resource does not build the whole object. Of a key
/// written more than once, the last counts, as it does for protobuf and for [`from_struct_bytes`].
pub fn pointer(bytes: &[u8], pointer: &str) -> Result<Option<serde_json::Value>, DecodeError> {
    let plain = |e: Error| DecodeError {
        path: pointer.to_owned(),
        message: e.0,
    };
    let mut node = Node::<TEXT_FIELD_NAMES>::Struct(bytes, 0);
    if !pointer.is_empty() {
        let Some(tokens) = pointer.strip_prefix('/') else {
            return Ok(None);
        };
        for token in tokens.split('/') {
            let token = if token.contains('~') {
                Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
            } else {
                Cow::Borrowed(token)
            };
            let depth = node.children_depth().map_err(plain)?;
            let found = match node.kind().map_err(plain)? {
                Kind::Struct(entries) => last_entry(entries, token.as_bytes()).map_err(plain)?,
                Kind::List(items) => match list_index(&token) {
                    Some(index) => nth_item(items, index).map_err(plain)?,
                    None => None,
                },
                _ => None,
            };
            let Some(value) = found else {
                return Ok(None);
            };
            node = Node::Value(value, depth);
        }
    }
    serde_json::Value::deserialize(node).map(Some).map_err(plain)
}

/// The encoded value of the last entry keyed `key`.
fn last_entry<'de>(entries: &'de [u8], key: &[u8]) -> Result<Option<&'de [u8]>, Error> {
    let mut found = None;
    for field in fields(entries) {
        if let Field::Bytes(1, entry) = field? {
            let (k, value) = entry_parts(entry)?;
            if k == key {
                found = Some(value);
            }
        }
    }
    Ok(found)
}

/// The encoded `index`th item of a list.
fn nth_item(items: &[u8], index: usize) -> Result<Option<&[u8]>, Error> {
    let mut seen = 0;
    for field in fields(items) {
        if let Field::Bytes(1, item) = field? {
            if seen == index {
                return Ok(Some(item));
            }
            seen += 1;
        }
    }
    Ok(None)
}

/// A pointer token as a list index: digits only, without a leading zero (RFC 6901, as serde_json reads it).
fn list_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

/// The error type inside the deserializer; `DecodeError` adds the path on the way out.
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

fn malformed(what: &str) -> Error {
    Error(format!("malformed protobuf: {what}"))
}

/// One field read off the wire: its number and, for length-delimited fields, the payload.
enum Field<'de> {
    Bytes(u32, &'de [u8]),
    Varint(u32, u64),
    Fixed64(u32, [u8; 8]),
    Other,
}

/// Iterates the fields of one encoded message.
struct Fields<'de> {
    rest: &'de [u8],
}

impl<'de> Iterator for Fields<'de> {
    type Item = Result<Field<'de>, Error>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        Some(self.read_field())
    }
}

impl<'de> Fields<'de> {
    // Every field of every entry, value and list item in a Struct passes through here, so the common cases
    // (one-byte keys and lengths) stay inline instead of going through prost's general `decode_key`.
    #[inline]
    fn read_field(&mut self) -> Result<Field<'de>, Error> {
        let key = varint(&mut self.rest, "field key")?;
        let tag = u32::try_from(key >> 3)
            .ok()
            .filter(|tag| *tag != 0)
            .ok_or_else(|| malformed("field key"))?;
        match key & 0b111 {
            LENGTH_DELIMITED => {
                let len = varint(&mut self.rest, "length")?;
                let len = usize::try_from(len).map_err(|_| malformed("length"))?;
                if len > self.rest.len() {
                    return Err(malformed("length past end of message"));
                }
                let (payload, rest) = self.rest.split_at(len);
                self.rest = rest;
                Ok(Field::Bytes(tag, payload))
            }
            VARINT => Ok(Field::Varint(tag, varint(&mut self.rest, "varint")?)),
            FIXED64 => {
                let (word, rest) = self
                    .rest
                    .split_first_chunk::<8>()
                    .ok_or_else(|| malformed("fixed64"))?;
                self.rest = rest;
                Ok(Field::Fixed64(tag, *word))
            }
            FIXED32 => {
                let (_, rest) = self
                    .rest
                    .split_first_chunk::<4>()
                    .ok_or_else(|| malformed("fixed32"))?;
                self.rest = rest;
                Ok(Field::Other)
            }
            _ => Err(malformed("group or unknown wire type")),
        }
    }
}

// Wire types (the low three bits of a field key).
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LENGTH_DELIMITED: u64 = 2;
const FIXED32: u64 = 5;

#[inline(always)]
fn varint(rest: &mut &[u8], what: &str) -> Result<u64, Error> {
    match rest.split_first() {
        Some((&byte, tail)) if byte < 0x80 => {
            *rest = tail;
            Ok(u64::from(byte))
        }
        _ => varint_slow(rest, what),
    }
}

#[cold]
#[inline(never)]
fn varint_slow(rest: &mut &[u8], what: &str) -> Result<u64, Error> {
    decode_varint(rest).map_err(|_| malformed(what))
}

fn fields(bytes: &[u8]) -> Fields<'_> {
    Fields { rest: bytes }
}

/// A length of one or two varint bytes (under 2^14, nearly every length in an object) and what follows it.
#[inline(always)]
fn short_length(bytes: &[u8]) -> Option<(usize, &[u8])> {
    match bytes {
        [b0, rest @ ..] if *b0 < 0x80 => Some((usize::from(*b0), rest)),
        [b0, b1, rest @ ..] if *b1 < 0x80 => Some((usize::from(b0 & 0x7f) | usize::from(*b1) << 7, rest)),
        _ => None,
    }
}

/// The payload of a length-delimited field when it is all that `bytes` (after the field's key) holds.
#[inline(always)]
fn whole_payload(bytes: &[u8]) -> Option<&[u8]> {
    let (len, payload) = short_length(bytes)?;
    (payload.len() == len).then_some(payload)
}

/// A map entry's key and value. The layout every encoder writes, the key then the value and nothing else, is read
/// directly; any other (fields reordered, repeated or unknown, longer lengths) goes through the field loop, which
/// reads it as protobuf does (the last of a repeated field wins, a missing value is an empty one).
#[inline]
fn entry_parts(entry: &[u8]) -> Result<(&[u8], &[u8]), Error> {
    if let [ENTRY_KEY, rest @ ..] = entry
        && let Some((key_len, rest)) = short_length(rest)
        && let Some((key, rest)) = rest.split_at_checked(key_len)
    {
        match rest {
            [] => return Ok((key, &[])),
            [ENTRY_VALUE, rest @ ..] => {
                if let Some(value) = whole_payload(rest) {
                    return Ok((key, value));
                }
            }
            _ => {}
        }
    }
    let (mut key, mut value) = (&[][..], &[][..]);
    for part in fields(entry) {
        match part? {
            Field::Bytes(1, k) => key = k,
            Field::Bytes(2, v) => value = v,
            _ => {}
        }
    }
    Ok((key, value))
}

fn utf8(bytes: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(bytes).map_err(|_| malformed("string is not UTF-8"))
}

/// A decoded `google.protobuf.Value`: scalars are read, containers stay encoded until visited.
enum Kind<'de> {
    Null,
    Number(f64),
    String(&'de str),
    Bool(bool),
    Struct(&'de [u8]),
    List(&'de [u8]),
}

fn read_value(bytes: &[u8]) -> Result<Kind<'_>, Error> {
    // The layout every encoder writes: the kind's one field and nothing else. Anything else (several fields, one
    // repeated, unknown fields, lengths past two bytes) goes through the field loop below, which reads it the
    // same way protobuf does: the last kind written wins.
    match bytes {
        [STRING_VALUE, rest @ ..] | [STRUCT_VALUE, rest @ ..] | [LIST_VALUE, rest @ ..] => {
            if let Some(payload) = whole_payload(rest) {
                return Ok(match bytes[0] {
                    STRING_VALUE => Kind::String(utf8(payload)?),
                    STRUCT_VALUE => Kind::Struct(payload),
                    _ => Kind::List(payload),
                });
            }
        }
        [NUMBER_VALUE, rest @ ..] => {
            if let Ok(word) = <[u8; 8]>::try_from(rest) {
                return Ok(Kind::Number(f64::from_le_bytes(word)));
            }
        }
        [BOOL_VALUE, b] if *b < 0x80 => return Ok(Kind::Bool(*b != 0)),
        [NULL_VALUE, b] if *b < 0x80 => return Ok(Kind::Null),
        _ => {}
    }
    // A Value with no kind set has no JSON form; read it as null rather than failing the whole object.
    let mut kind = Kind::Null;
    for field in fields(bytes) {
        kind = match field? {
            Field::Varint(1, _) => Kind::Null,
            Field::Fixed64(2, word) => Kind::Number(f64::from_le_bytes(word)),
            Field::Bytes(3, s) => Kind::String(utf8(s)?),
            Field::Varint(4, b) => Kind::Bool(b != 0),
            Field::Bytes(5, s) => Kind::Struct(s),
            Field::Bytes(6, l) => Kind::List(l),
            _ => continue,
        };
    }
    Ok(kind)
}

/// How deeply objects and lists may nest. Decoding recurses once per level, and a request only a few KB long
/// can nest thousands of levels: without a bound it would overflow the stack and abort the whole server. Other
/// protobuf runtimes (upb, prost, C++) stop at 100 messages, about 33 JSON levels, so no real object nears this.
pub const MAX_NESTING: usize = 100;

/// How a map key reaches a struct's field matcher: as bytes, or as a string checked to be UTF-8. A key that names
/// a field equals that field's Rust name, so it is valid UTF-8 without a check, and a key that names none is
/// skipped; matching bytes saves the check on every key of a typed view (most of its decoding is keys). Path
/// tracking ([`from_struct_bytes`]'s second pass) records only keys that come as strings, so that pass takes text.
/// Keys of maps (`BTreeMap<String, _>`, JSON objects) are always checked.
const BYTE_FIELD_NAMES: bool = false;
const TEXT_FIELD_NAMES: bool = true;

/// What the deserializer stands on: a `Struct` (the top level of every object) or a `Value`, and how many
/// containers enclose it; `TEXT` is how field names are read ([`BYTE_FIELD_NAMES`]).
#[derive(Clone, Copy)]
enum Node<'de, const TEXT: bool> {
    Struct(&'de [u8], usize),
    Value(&'de [u8], usize),
}

impl<'de, const TEXT: bool> Node<'de, TEXT> {
    fn kind(self) -> Result<Kind<'de>, Error> {
        match self {
            Node::Struct(bytes, _) => Ok(Kind::Struct(bytes)),
            Node::Value(bytes, _) => read_value(bytes),
        }
    }

    /// The depth of this node's children, or an error if they would nest too deeply.
    fn children_depth(self) -> Result<usize, Error> {
        let (Node::Struct(_, depth) | Node::Value(_, depth)) = self;
        if depth >= MAX_NESTING {
            return Err(Error(format!(
                "objects and lists nest deeper than {MAX_NESTING} levels"
            )));
        }
        Ok(depth + 1)
    }
}

/// Integral doubles become integers so that `replicas: 2` reads as an integer field and prints as `2`.
const MAX_EXACT_INTEGER: f64 = 9_007_199_254_740_992.0; // 2^53

impl<'de, const TEXT: bool> de::Deserializer<'de> for Node<'de, TEXT> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.kind()? {
            Kind::Null => visitor.visit_unit(),
            Kind::Number(n) if n.fract() == 0.0 && n.abs() <= MAX_EXACT_INTEGER => {
                visitor.visit_i64(n as i64)
            }
            Kind::Number(n) => visitor.visit_f64(n),
            Kind::String(s) => visitor.visit_borrowed_str(s),
            Kind::Bool(b) => visitor.visit_bool(b),
            Kind::Struct(bytes) => visitor.visit_map(Entries::<TEXT> {
                fields: fields(bytes),
                value: None,
                depth: self.children_depth()?,
            }),
            Kind::List(bytes) => visitor.visit_seq(Items::<TEXT> {
                fields: fields(bytes),
                depth: self.children_depth()?,
            }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.kind()? {
            Kind::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.kind()? {
            Kind::String(s) => visitor.visit_enum(BorrowedStrDeserializer::new(s)),
            Kind::Struct(bytes) => {
                visitor.visit_enum(de::value::MapAccessDeserializer::new(Entries::<TEXT> {
                    fields: fields(bytes),
                    value: None,
                    depth: self.children_depth()?,
                }))
            }
            _ => Err(de::Error::custom(
                "expected a string naming one of the allowed values",
            )),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // The field is already delimited; not looking inside is the point.
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit unit_struct
        seq tuple tuple_struct map struct identifier
    }
}

/// The entries of a `Struct`: `map<string, Value>`, each entry a message `{1: key, 2: value}`.
struct Entries<'de, const TEXT: bool> {
    fields: Fields<'de>,
    value: Option<&'de [u8]>,
    depth: usize,
}

impl<'de, const TEXT: bool> MapAccess<'de> for Entries<'de, TEXT> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        for field in self.fields.by_ref() {
            let Field::Bytes(1, entry) = field? else { continue };
            let (key, value) = entry_parts(entry)?;
            self.value = Some(value);
            return seed.deserialize(Key::<TEXT>(key)).map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let value = self
            .value
            .take()
            .ok_or_else(|| Error("value requested before key".into()))?;
        seed.deserialize(Node::<TEXT>::Value(value, self.depth))
    }
}

/// A map entry's key, read as a struct's field name or as a string ([`BYTE_FIELD_NAMES`]).
struct Key<'de, const TEXT: bool>(&'de [u8]);

impl<'de, const TEXT: bool> de::Deserializer<'de> for Key<'de, TEXT> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(utf8(self.0)?)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if TEXT {
            self.deserialize_any(visitor)
        } else {
            visitor.visit_borrowed_bytes(self.0)
        }
    }

    /// A map keyed by an enum names a variant in each key.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_enum(BorrowedStrDeserializer::new(utf8(self.0)?))
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct ignored_any
    }
}

/// The items of a `ListValue`: `repeated Value values = 1`.
struct Items<'de, const TEXT: bool> {
    fields: Fields<'de>,
    depth: usize,
}

impl<'de, const TEXT: bool> SeqAccess<'de> for Items<'de, TEXT> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        for field in self.fields.by_ref() {
            if let Field::Bytes(1, item) = field? {
                return seed.deserialize(Node::<TEXT>::Value(item, self.depth)).map(Some);
            }
        }
        Ok(None)
    }
}

impl<'de, const TEXT: bool> IntoDeserializer<'de, Error> for Node<'de, TEXT> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
