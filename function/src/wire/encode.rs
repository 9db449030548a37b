//! Encodes `serde_json` values as `google.protobuf.Struct` wire bytes.
//!
//! Two passes over the tree: the first records the length of every length-delimited part in visiting order,
//! the second writes the bytes, taking those lengths back in the same order. That keeps encoding linear in the
//! size of the object; recomputing nested lengths at every level, as prost's generated `Struct` does, is
//! quadratic in depth.

use prost::encoding::{encode_varint, encoded_len_varint};
use serde_json::{Map, Value};

// Field numbers and wire-type bits of struct.proto, written as the key bytes they encode to.
const STRUCT_FIELDS: u8 = 0x0a; // Struct.fields = 1, length-delimited (one map entry)
const ENTRY_KEY: u8 = 0x0a; // map entry key = 1, length-delimited
const ENTRY_VALUE: u8 = 0x12; // map entry value = 2, length-delimited
const NULL_VALUE: u8 = 0x08; // Value.null_value = 1, varint
const NUMBER_VALUE: u8 = 0x11; // Value.number_value = 2, fixed64
const STRING_VALUE: u8 = 0x1a; // Value.string_value = 3, length-delimited
const BOOL_VALUE: u8 = 0x20; // Value.bool_value = 4, varint
const STRUCT_VALUE: u8 = 0x2a; // Value.struct_value = 5, length-delimited
const LIST_VALUE: u8 = 0x32; // Value.list_value = 6, length-delimited
const LIST_ITEM: u8 = 0x0a; // ListValue.values = 1, length-delimited

/// The encoded fields of a `Struct` holding `map`.
pub fn struct_bytes(map: &Map<String, Value>) -> Vec<u8> {
    let mut lengths = Vec::new();
    let total = struct_len(map, &mut lengths);
    let mut out = Vec::with_capacity(total);
    let mut lengths = lengths.into_iter();
    write_struct(map, &mut lengths, &mut out);
    out
}

fn delimited_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// Length of a Struct's fields. Pushes, in visiting order, each entry's length and then its value's lengths.
fn struct_len(map: &Map<String, Value>, lengths: &mut Vec<usize>) -> usize {
    let mut total = 0;
    for (key, value) in map {
        let slot = lengths.len();
        lengths.push(0);
        let entry = delimited_len(key.len()) + delimited_len(value_len(value, lengths));
        lengths[slot] = entry;
        total += delimited_len(entry);
    }
    total
}

/// Length of a Value message. Pushes the Value's length, then (for containers) the length of the Struct or
/// ListValue inside it, then the lengths of its children.
fn value_len(value: &Value, lengths: &mut Vec<usize>) -> usize {
    let slot = lengths.len();
    lengths.push(0);
    let len = match value {
        Value::Null | Value::Bool(_) => 2,
        Value::Number(_) => 9,
        Value::String(s) => delimited_len(s.len()),
        Value::Object(map) => delimited_len(record(lengths, |lengths| struct_len(map, lengths))),
        Value::Array(items) => delimited_len(record(lengths, |lengths| {
            items
                .iter()
                .map(|item| delimited_len(value_len(item, lengths)))
                .sum()
        })),
    };
    lengths[slot] = len;
    len
}

/// Reserves a slot for a container's inner length, measures the container, and fills the slot.
fn record(lengths: &mut Vec<usize>, measure: impl FnOnce(&mut Vec<usize>) -> usize) -> usize {
    let slot = lengths.len();
    lengths.push(0);
    let len = measure(lengths);
    lengths[slot] = len;
    len
}

/// Pops the next recorded length. The two passes visit the same tree in the same order, so one is always there.
fn next_len(lengths: &mut std::vec::IntoIter<usize>) -> u64 {
    lengths.next().unwrap_or_default() as u64
}

fn write_struct(map: &Map<String, Value>, lengths: &mut std::vec::IntoIter<usize>, out: &mut Vec<u8>) {
    for (key, value) in map {
        out.push(STRUCT_FIELDS);
        encode_varint(next_len(lengths), out);
        out.push(ENTRY_KEY);
        encode_varint(key.len() as u64, out);
        out.extend_from_slice(key.as_bytes());
        out.push(ENTRY_VALUE);
        write_value(value, lengths, out);
    }
}

/// Writes a Value's length prefix and fields.
fn write_value(value: &Value, lengths: &mut std::vec::IntoIter<usize>, out: &mut Vec<u8>) {
    encode_varint(next_len(lengths), out);
    match value {
        Value::Null => out.extend_from_slice(&[NULL_VALUE, 0]),
        Value::Bool(b) => out.extend_from_slice(&[BOOL_VALUE, u8::from(*b)]),
        Value::Number(n) => {
            out.push(NUMBER_VALUE);
            out.extend_from_slice(&n.as_f64().unwrap_or_default().to_le_bytes());
        }
        Value::String(s) => {
            out.push(STRING_VALUE);
            encode_varint(s.len() as u64, out);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Object(map) => {
            out.push(STRUCT_VALUE);
            encode_varint(next_len(lengths), out);
            write_struct(map, lengths, out);
        }
        Value::Array(items) => {
            out.push(LIST_VALUE);
            encode_varint(next_len(lengths), out);
            for item in items {
                out.push(LIST_ITEM);
                write_value(item, lengths, out);
            }
        }
    }
}
