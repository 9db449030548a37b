use super::*;
use crate::wire::RawStruct;
use serde_json::json;
use std::collections::BTreeMap;

#[derive(Deserialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Pool<'a> {
    name: &'a str,
    node_count: u32,
    #[serde(default)]
    zones: Vec<String>,
    mode: Option<Mode>,
}

#[derive(Deserialize, Debug, PartialEq)]
enum Mode {
    Fast,
    Slow,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Spec<'a> {
    #[serde(borrow)]
    node_pools: Vec<Pool<'a>>,
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize, Debug)]
struct Object<'a> {
    #[serde(borrow)]
    spec: Spec<'a>,
}

#[test]
fn typed_view_reads_declared_fields_and_skips_the_rest() {
    let raw = RawStruct::from_value(&json!({
        "kind": "X", "status": {"huge": [1, 2, 3]},
        "spec": {"labels": {"a": "b"}, "nodePools": [{"name": "gpu", "nodeCount": 2, "mode": "Fast", "x": {}}]}
    }))
    .unwrap();
    let object: Object = raw.parse().unwrap();
    assert_eq!(
        object.spec.node_pools,
        vec![Pool {
            name: "gpu",
            node_count: 2,
            zones: vec![],
            mode: Some(Mode::Fast)
        }]
    );
    assert_eq!(object.spec.labels["a"], "b");
}

#[test]
fn errors_name_the_field_path() {
    let raw = RawStruct::from_value(&json!({
        "spec": {"labels": {}, "nodePools": [{"name": "a", "nodeCount": 1}, {"name": "b", "nodeCount": "two"}]}
    }))
    .unwrap();
    let err = raw.parse::<Object>().unwrap_err();
    assert_eq!(err.path, "spec.nodePools[1].nodeCount");
    assert!(
        err.to_string()
            .starts_with("spec.nodePools[1].nodeCount: invalid type: string \"two\""),
        "{err}"
    );
}

#[test]
fn unknown_enum_values_name_the_field_and_the_allowed_values() {
    let raw = RawStruct::from_value(&json!({
        "spec": {"labels": {}, "nodePools": [{"name": "a", "nodeCount": 1, "mode": "Medium"}]}
    }))
    .unwrap();
    let err = raw.parse::<Object>().unwrap_err();
    assert_eq!(err.path, "spec.nodePools[0].mode");
    assert!(
        err.message.contains("Fast") && err.message.contains("Slow"),
        "{err}"
    );
}

#[test]
fn nesting_beyond_the_limit_is_an_error_not_a_stack_overflow() {
    let nested = |levels: usize| {
        let mut value = json!("leaf");
        for _ in 0..levels {
            value = json!({ "a": value });
        }
        RawStruct::from_value(&json!({ "a": value })).unwrap()
    };
    assert!(nested(MAX_NESTING - 1).to_json().is_ok());
    let err = nested(MAX_NESTING).to_json().unwrap_err();
    assert!(err.message.contains("deeper than 100 levels"), "{err}");
    assert!(err.path.starts_with("a.a.a."), "{err}");
}

#[test]
fn lengths_past_one_varint_byte_decode_like_short_ones() {
    let long = "x".repeat(300);
    let items: Vec<u32> = (0..200).collect();
    let value = json!({"long": long, "items": items, "nested": {"long": long}});
    let raw = RawStruct::from_value(&value).unwrap();
    assert_eq!(raw.to_json().unwrap(), value);
    for len in [127, 128, 16_383, 16_384, 1 << 21] {
        let value = json!({"k".repeat(len): "v".repeat(len), "o": {"s": "y".repeat(len)}});
        assert_eq!(RawStruct::from_value(&value).unwrap().to_json().unwrap(), value);
    }
}

/// A `Struct` of one entry whose parts are `entry`, as a sender may lay them out.
fn one_entry(entry: &[u8]) -> Vec<u8> {
    [&[0x0a, entry.len() as u8][..], entry].concat()
}

#[test]
fn entries_and_values_in_any_valid_layout_read_as_protobuf_reads_them() {
    let string = |s: &str| [&[0x1a, s.len() as u8][..], s.as_bytes()].concat();
    let value = |v: &[u8]| [&[0x12, v.len() as u8][..], v].concat();
    let key = |k: &str| [&[0x0a, k.len() as u8][..], k.as_bytes()].concat();
    let read = |entry: Vec<u8>| from_struct_bytes::<serde_json::Value>(&one_entry(&entry)).unwrap();
    // As every encoder writes it.
    assert_eq!(read([key("a"), value(&string("x"))].concat()), json!({"a": "x"}));
    // Value before key; a repeated value (the last wins); an unknown field; no value at all.
    assert_eq!(read([value(&string("x")), key("a")].concat()), json!({"a": "x"}));
    assert_eq!(
        read([key("a"), value(&string("x")), value(&string("y"))].concat()),
        json!({"a": "y"})
    );
    assert_eq!(
        read([key("a"), value(&string("x")), vec![0x18, 0x01]].concat()),
        json!({"a": "x"})
    );
    assert_eq!(read(key("a")), json!({"a": null}));
    // A length written in two varint bytes though one would do is still that length.
    assert_eq!(
        read([key("a"), vec![0x12, 0x83, 0x00, 0x1a, 0x01, b'x']].concat()),
        json!({"a": "x"})
    );
    // A Value holding two kinds is the last of them; a bool or null with a long varint is still one.
    let two_kinds = [string("x"), vec![0x20, 0x01]].concat();
    assert_eq!(read([key("a"), value(&two_kinds)].concat()), json!({"a": true}));
    assert_eq!(
        read([key("a"), value(&[0x20, 0x81, 0x00])].concat()),
        json!({"a": true})
    );
    assert_eq!(
        read([key("a"), value(&[0x08, 0x80, 0x00])].concat()),
        json!({"a": null})
    );
    // A truncated number is malformed however it is reached.
    let err = from_struct_bytes::<serde_json::Value>(&one_entry(&[key("a"), value(&[0x11, 1, 2])].concat()));
    assert_eq!(err.unwrap_err().message, "malformed protobuf: fixed64");
}

#[test]
fn a_field_numbered_zero_is_malformed_not_skipped() {
    // Key byte 0x02: field 0, length-delimited. No valid message has it; prost rejects it too.
    let err = from_struct_bytes::<serde_json::Value>(&[0x02, 0x00]).unwrap_err();
    assert_eq!(err.message, "malformed protobuf: field key");
}

#[test]
fn numbers_keep_integer_and_fraction_forms() {
    let raw = RawStruct::from_value(&json!({"a": 3, "b": 0.25, "c": -7, "d": 1e300})).unwrap();
    assert_eq!(
        raw.to_json().unwrap(),
        json!({"a": 3, "b": 0.25, "c": -7, "d": 1e300})
    );
}

/// Struct bytes of `{"kind": "X", <key>: "x"}`, written by hand so `key` can be any bytes.
fn with_key(key: &[u8]) -> Vec<u8> {
    let entry = |key: &[u8], value: &[u8]| {
        let value = [&[0x1a, value.len() as u8][..], value].concat(); // Value.string_value
        let inner = [
            &[0x0a, key.len() as u8][..],
            key,
            &[0x12, value.len() as u8],
            &value,
        ]
        .concat();
        [&[0x0a, inner.len() as u8][..], &inner].concat()
    };
    [entry(b"kind", b"X"), entry(key, b"x")].concat()
}

#[derive(Deserialize, Debug)]
struct Kind {
    kind: String,
}

#[test]
fn field_names_match_as_bytes_and_map_keys_must_be_utf8() {
    // A key that names no field is skipped, whatever its bytes; one that names a field is that field.
    let bytes = with_key(&[0xff, 0xfe]);
    assert_eq!(from_struct_bytes::<Kind>(&bytes).unwrap().kind, "X");
    #[derive(Deserialize, Debug)]
    struct Other {
        x: String,
    }
    assert_eq!(from_struct_bytes::<Other>(&with_key(b"x")).unwrap().x, "x");
    // A map keeps its keys, so each must be a string.
    let err = from_struct_bytes::<BTreeMap<String, String>>(&bytes).unwrap_err();
    assert_eq!(err.message, "malformed protobuf: string is not UTF-8");
    assert!(from_struct_bytes::<serde_json::Value>(&bytes).is_err());
    // A flattened remainder holds the keys its struct did not name, checked as strings.
    #[derive(Deserialize, Debug)]
    struct Rest {
        kind: String,
        #[serde(flatten)]
        rest: BTreeMap<String, String>,
    }
    let rest = from_struct_bytes::<Rest>(&with_key(b"extra")).unwrap();
    assert_eq!((rest.kind.as_str(), rest.rest["extra"].as_str()), ("X", "x"));
    assert!(from_struct_bytes::<Rest>(&bytes).is_err());
    // A map keyed by an enum reads each key as a variant's name.
    #[derive(Deserialize, Debug, PartialEq, Eq, PartialOrd, Ord)]
    #[serde(rename_all = "lowercase")]
    enum Name {
        Kind,
        X,
    }
    let by_name = from_struct_bytes::<BTreeMap<Name, String>>(&with_key(b"x")).unwrap();
    assert_eq!(
        by_name,
        BTreeMap::from([(Name::Kind, "X".into()), (Name::X, "x".into())])
    );
}

/// A pointer into the wire bytes finds what `serde_json`'s pointer finds in the decoded object, wherever it
/// leads: through objects and lists, to containers and scalars, past the end, through a scalar, with escaped
/// keys and with tokens that are not list indexes.
#[test]
fn pointers_read_from_the_bytes_what_they_read_from_the_object() {
    let object = json!({
        "status": {"atProvider": {"arn": "arn:aws:iam::1:role/x", "subnets": ["a", "b", {"id": 3}]}},
        "spec": {"forProvider": {"count": 2, "ratio": 0.5, "on": true, "none": null, "empty": {}}},
        "a/b": {"m~n": "escaped"},
        "": {"": "empty keys"},
        "list": [[0, 1], [2, [3, 4]]],
    });
    let raw = RawStruct::from_value(&object).unwrap();
    let pointers = [
        "",
        "/",
        "/status",
        "/status/atProvider/arn",
        "/status/atProvider/subnets",
        "/status/atProvider/subnets/0",
        "/status/atProvider/subnets/2/id",
        "/status/atProvider/subnets/3",
        "/status/atProvider/subnets/01",
        "/status/atProvider/subnets/+1",
        "/status/atProvider/subnets/-",
        "/status/atProvider/arn/0",
        "/spec/forProvider/count",
        "/spec/forProvider/ratio",
        "/spec/forProvider/on",
        "/spec/forProvider/none",
        "/spec/forProvider/empty",
        "/spec/forProvider/missing",
        "/a~1b/m~0n",
        "/a/b",
        "//",
        "/list/1/1/0",
        "no-leading-slash",
    ];
    for pointer in pointers {
        assert_eq!(
            raw.pointer(pointer).unwrap(),
            object.pointer(pointer).cloned(),
            "{pointer}"
        );
    }
}

#[test]
fn a_pointer_reads_the_last_of_a_repeated_key() {
    let entry = |k: &str, v: &str| {
        let value = [&[0x1a, v.len() as u8][..], v.as_bytes()].concat();
        [
            &[0x0a, k.len() as u8][..],
            k.as_bytes(),
            &[0x12, value.len() as u8],
            &value,
        ]
        .concat()
    };
    let bytes = [one_entry(&entry("a", "x")), one_entry(&entry("a", "y"))].concat();
    assert_eq!(pointer(&bytes, "/a").unwrap(), Some(json!("y")));
    assert_eq!(
        from_struct_bytes::<serde_json::Value>(&bytes).unwrap(),
        json!({"a": "y"})
    );
}

/// Hostile bytes under a pointer: every truncation and every flipped byte of a real object reads as a value,
/// nothing or an error, never a panic; and a pointer as deep as the nesting bound stops at it.
#[test]
fn a_pointer_over_damaged_or_deep_bytes_errs_without_panicking() {
    let object = json!({
        "status": {"atProvider": {"ids": ["a", "b"], "arn": "x"}, "conditions": [{"type": "Ready"}]},
        "spec": {"n": 1.5, "on": true},
    });
    let bytes = RawStruct::from_value(&object).unwrap().as_bytes().to_vec();
    let pointers = [
        "/status/atProvider/ids/1",
        "/status/conditions/0/type",
        "/spec",
        "",
    ];
    for end in 0..bytes.len() {
        for p in pointers {
            let _ = pointer(&bytes[..end], p);
        }
    }
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0xff;
        for p in pointers {
            let _ = pointer(&damaged, p);
        }
    }
    let mut deep = json!("leaf");
    for _ in 0..MAX_NESTING + 5 {
        deep = json!({ "a": deep });
    }
    let raw = RawStruct::from_value(&deep).unwrap();
    let path = "/a".repeat(MAX_NESTING + 5);
    let err = raw.pointer(&path).unwrap_err();
    assert!(err.message.contains("deeper than 100 levels"), "{err}");
    assert_eq!(raw.pointer(&"/a".repeat(10)).unwrap_err().message, err.message);
}
