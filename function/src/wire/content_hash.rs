//! A keyed hash of what a `google.protobuf.Struct` says, not of how it was written: map entries count in any order.
//!
//! Crossplane is written in Go, whose protobuf encoder writes map entries (every `Struct` field) in Go's randomized
//! map order, so the same composite arrives as different bytes from one call to the next. A cache keyed on the
//! bytes would then miss on almost every call. Here each `Struct`'s entries are fed to the hasher in key order,
//! while lists keep theirs, so one streaming pass of a keyed hasher covers the whole object. Every struct and list
//! is written with its count first and every key with its length, so two different objects never write the same
//! stream. Only the fields
//! `keep` selects at the top level count, so a cache can ignore what its answer does not depend on (a composite's
//! `status`).
//!
//! The walk reads the bytes once and gives up (`None`) on anything that is not a well-formed `Struct`, on a
//! `Struct` that repeats a key (which of the values counts would depend on the order), and on nesting deeper than
//! [`MAX_DEPTH`]; a caller then does without the cache.

use std::hash::{BuildHasher, Hasher};

use prost::encoding::{WireType, decode_key, decode_varint};

/// Deepest nesting of structs and lists walked.
pub const MAX_DEPTH: usize = 64;

/// What counts of one top-level field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    Skip,
    Whole,
    /// Only these fields of the field's own struct (whole); anything else of it is left out.
    Only(&'static [&'static str]),
}

/// Two independently keyed hashes of the fields of the `Struct` in `bytes` that `keep` selects, by their key.
pub fn struct_hash<S: BuildHasher>(
    bytes: &[u8],
    hashers: &(S, S),
    keep: impl Fn(&[u8]) -> Keep,
) -> Option<(u64, u64)> {
    // The walk makes thousands of writes of a few bytes each, and a keyed hasher pays a fixed cost per write.
    // Collected first, the stream is hashed in one write per hasher (20k instructions less for a gang composite).
    let mut stream = Stream(Vec::with_capacity(bytes.len()));
    write_struct(bytes, &mut stream, 0, &|key| keep(key))?;
    let hash = |keyed: &S| {
        let mut hasher = keyed.build_hasher();
        hasher.write(&stream.0);
        hasher.finish()
    };
    Some((hash(&hashers.0), hash(&hashers.1)))
}

/// The bytes written, to be hashed at once.
struct Stream(Vec<u8>);

impl Hasher for Stream {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        // Never read: the stream is hashed by the keyed hashers once it is complete.
        0
    }
}

/// Most entries one `Struct` may have before the walk gives up rather than sort them.
const MAX_ENTRIES: usize = 4096;

fn write_struct(
    bytes: &[u8],
    state: &mut impl Hasher,
    depth: usize,
    keep: &dyn Fn(&[u8]) -> Keep,
) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut entries: Vec<(&[u8], &[u8], Keep)> = Vec::new();
    let mut buf = bytes;
    while !buf.is_empty() {
        let (key, value) = map_entry(field(&mut buf, 1, WireType::LengthDelimited)?)?;
        match keep(key) {
            Keep::Skip => {}
            kept => entries.push((key, value, kept)),
        }
        if entries.len() > MAX_ENTRIES {
            return None;
        }
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    if entries.windows(2).any(|pair| pair[0].0 == pair[1].0) {
        return None;
    }
    state.write_usize(entries.len());
    for (key, value, kept) in entries {
        state.write_usize(key.len());
        state.write(key);
        match kept {
            Keep::Only(names) => write_value(value, state, depth + 1, Some(names))?,
            _ => write_value(value, state, depth + 1, None)?,
        }
    }
    Some(())
}

/// A `Value`: its kind and content. `only` narrows a struct value to those fields. A scalar is written as its own
/// bytes (kind and content, one write): protobuf writes a scalar one way, and one written another way only misses.
fn write_value(
    bytes: &[u8],
    state: &mut impl Hasher,
    depth: usize,
    only: Option<&'static [&'static str]>,
) -> Option<()> {
    let mut buf = bytes;
    if buf.is_empty() {
        // A Value with no kind set reads as null.
        state.write_u8(0);
        return Some(());
    }
    let (tag, wire_type) = decode_key(&mut buf).ok()?;
    match (tag, wire_type) {
        (1 | 4, WireType::Varint) => {
            decode_varint(&mut buf).ok()?;
        }
        (2, WireType::SixtyFourBit) => {
            buf = buf.get(8..)?;
        }
        (3, WireType::LengthDelimited) => {
            length_delimited(&mut buf)?;
        }
        (5, WireType::LengthDelimited) => {
            let inner = length_delimited(&mut buf)?;
            state.write_u8(b'S');
            match only {
                Some(names) => write_struct(inner, state, depth, &|key| {
                    if names.iter().any(|n| n.as_bytes() == key) {
                        Keep::Whole
                    } else {
                        Keep::Skip
                    }
                })?,
                None => write_struct(inner, state, depth, &|_| Keep::Whole)?,
            }
        }
        (6, WireType::LengthDelimited) => {
            state.write_u8(b'L');
            write_list(length_delimited(&mut buf)?, state, depth)?;
        }
        _ => return None,
    }
    // A Value sets one kind; a second would make which one counts depend on the encoder.
    if !buf.is_empty() {
        return None;
    }
    if !matches!(tag, 5 | 6) {
        state.write(bytes);
    }
    Some(())
}

/// A `ListValue`: how many values, then each in order (the count first, so the stream reads one way only).
fn write_list(bytes: &[u8], state: &mut impl Hasher, depth: usize) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut buf = bytes;
    let mut count = 0usize;
    while !buf.is_empty() {
        field(&mut buf, 1, WireType::LengthDelimited)?;
        count += 1;
    }
    state.write_usize(count);
    let mut buf = bytes;
    while !buf.is_empty() {
        write_value(
            field(&mut buf, 1, WireType::LengthDelimited)?,
            state,
            depth + 1,
            None,
        )?;
    }
    Some(())
}

/// A map entry's key (field 1) and value bytes (field 2), in whichever order they were written; each at most once.
fn map_entry(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut buf = bytes;
    let (mut key, mut value): (Option<&[u8]>, Option<&[u8]>) = (None, None);
    while !buf.is_empty() {
        let (tag, wire_type) = decode_key(&mut buf).ok()?;
        if wire_type != WireType::LengthDelimited {
            return None;
        }
        let slot = match tag {
            1 => &mut key,
            2 => &mut value,
            _ => return None,
        };
        if slot.replace(length_delimited(&mut buf)?).is_some() {
            return None;
        }
    }
    Some((key.unwrap_or_default(), value.unwrap_or_default()))
}

/// The next field of `buf`, which must be field `tag` of `wire_type` (length-delimited: its content).
fn field<'a>(buf: &mut &'a [u8], tag: u32, wire_type: WireType) -> Option<&'a [u8]> {
    let (found, found_type) = decode_key(buf).ok()?;
    if found != tag || found_type != wire_type {
        return None;
    }
    length_delimited(buf)
}

fn length_delimited<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(decode_varint(buf).ok()?).ok()?;
    if len > buf.len() {
        return None;
    }
    let (content, rest) = buf.split_at(len);
    *buf = rest;
    Some(content)
}

#[cfg(test)]
mod tests {
    use std::hash::RandomState;

    use prost::encoding::{encode_key, encode_varint};
    use serde_json::json;

    use super::*;
    use crate::wire::RawStruct;

    fn length_delimited(tag: u32, content: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_key(tag, WireType::LengthDelimited, &mut out);
        encode_varint(content.len() as u64, &mut out);
        out.extend_from_slice(content);
        out
    }

    /// A map entry of a Struct, key written after the value when `value_first`.
    fn entry(key: &str, value: &[u8], value_first: bool) -> Vec<u8> {
        let (k, v) = (length_delimited(1, key.as_bytes()), length_delimited(2, value));
        let parts = if value_first {
            [v, k].concat()
        } else {
            [k, v].concat()
        };
        length_delimited(1, &parts)
    }

    fn text(s: &str) -> Vec<u8> {
        length_delimited(3, s.as_bytes())
    }

    fn object(entries: &[Vec<u8>]) -> Vec<u8> {
        length_delimited(5, &entries.concat())
    }

    fn list(values: &[Vec<u8>]) -> Vec<u8> {
        let items: Vec<Vec<u8>> = values.iter().map(|v| length_delimited(1, v)).collect();
        length_delimited(6, &items.concat())
    }

    /// A composite as our own encoder writes it (keys sorted).
    fn sorted(value: serde_json::Value) -> Vec<u8> {
        RawStruct::from_value(&value).unwrap().as_bytes().to_vec()
    }

    fn all(_: &[u8]) -> Keep {
        Keep::Whole
    }

    #[test]
    fn map_entries_count_in_any_order_and_lists_in_theirs() {
        let hasher = (RandomState::new(), RandomState::new());
        let ours = sorted(
            json!({"kind": "K", "metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": ["p", "q"]}}),
        );
        // The same object as Go may write it: top-level, nested and entry fields in other orders.
        let labels = object(&[entry("b", &text("2"), true), entry("a", &text("1"), false)]);
        let go = [
            entry(
                "spec",
                &object(&[entry("x", &list(&[text("p"), text("q")]), false)]),
                false,
            ),
            entry("metadata", &object(&[entry("labels", &labels, true)]), false),
            entry("kind", &text("K"), true),
        ]
        .concat();
        assert_eq!(struct_hash(&ours, &hasher, all), struct_hash(&go, &hasher, all));
        assert!(struct_hash(&ours, &hasher, all).is_some());

        let swapped = sorted(
            json!({"kind": "K", "metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": ["q", "p"]}}),
        );
        assert_ne!(
            struct_hash(&ours, &hasher, all),
            struct_hash(&swapped, &hasher, all)
        );
    }

    #[test]
    fn only_what_is_kept_counts() {
        let hasher = (RandomState::new(), RandomState::new());
        let keep = |key: &[u8]| match key {
            b"status" => Keep::Skip,
            b"metadata" => Keep::Only(&["name", "labels"]),
            _ => Keep::Whole,
        };
        let base = json!({"kind": "K", "metadata": {"name": "a", "labels": {"x": "1"}, "resourceVersion": "1"},
                          "spec": {"n": 1}, "status": {"ready": false}});
        let key = |value: serde_json::Value| struct_hash(&sorted(value), &hasher, keep);
        let mut same = base.clone();
        same["status"]["ready"] = json!(true);
        same["metadata"]["resourceVersion"] = json!("2");
        same["metadata"]["uid"] = json!("u");
        assert_eq!(key(base.clone()), key(same));
        for (pointer, value) in [
            ("/spec/n", json!(2)),
            ("/metadata/name", json!("b")),
            ("/metadata/labels/x", json!("2")),
            ("/kind", json!("L")),
        ] {
            let mut changed = base.clone();
            *changed.pointer_mut(pointer).unwrap() = value;
            assert_ne!(key(base.clone()), key(changed), "{pointer}");
        }
        // A type change is a change, though the JSON text of both could read alike.
        let mut typed = base.clone();
        typed["spec"]["n"] = json!("1");
        assert_ne!(key(base), key(typed));
    }

    #[test]
    fn a_repeated_key_has_no_hash_as_its_meaning_depends_on_the_order() {
        let hasher = (RandomState::new(), RandomState::new());
        let first = [entry("a", &text("1"), false), entry("a", &text("2"), false)].concat();
        let second = [entry("a", &text("2"), false), entry("a", &text("1"), false)].concat();
        assert_eq!(struct_hash(&first, &hasher, all), None);
        assert_eq!(struct_hash(&second, &hasher, all), None);
    }

    #[test]
    fn anything_but_a_well_formed_struct_has_no_hash() {
        let hasher = (RandomState::new(), RandomState::new());
        let truncated = &sorted(json!({"spec": {"a": "b"}}))[..5];
        let mut deep = text("x");
        for _ in 0..=MAX_DEPTH {
            deep = object(&[entry("a", &deep, false)]);
        }
        let deep_struct = entry("a", &deep, false);
        for bytes in [truncated, b"\xff\xff".as_slice(), &[0x08, 0x01], &deep_struct] {
            assert_eq!(struct_hash(bytes, &hasher, all), None, "{bytes:?}");
        }
        assert!(
            struct_hash(&[], &hasher, all).is_some(),
            "an empty Struct is a Struct"
        );
    }
}
