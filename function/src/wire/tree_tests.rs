#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;
use crate::wire::RawStruct;

const POOL_LABEL: &str = "modelplane.ai/pool";
mod ledger {
    pub const CLUSTER_LABEL: &str = "modelplane.ai/cluster";
}

fn fields(doc: Tree) -> Fields {
    match doc {
        Tree::Map(fields) => fields,
        other => panic!("not a map: {other:?}"),
    }
}

/// Everything a composer writes in `json!` builds the same object in `tree!`: literal, constant and path keys,
/// nested objects and lists, empty ones, `null`, bools, numbers, and expressions of every shape as values.
#[test]
fn doc_builds_what_json_builds() {
    let name = String::from("coder");
    let namespace: &str = "team-a";
    let port = 8000u32;
    let missing: Option<&str> = None;
    let built = vec![tree!({"a": 1}), tree!("x")];
    let ours = tree!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": &name, "namespace": namespace, "labels": {POOL_LABEL: &name, ledger::CLUSTER_LABEL: "c1"}},
        "spec": {
            "ports": [{"name": "http", "port": port, "targetPort": port + 1, "protocol": "TCP"}],
            "selector": {"app": format!("{name}-{}", 1)},
            "empty": {}, "none": null, "list": [], "flags": [true, false, null],
            "nested": [[1, 2.5, -3], [{"deep": [namespace]}]],
            "missing": missing, "built": built,
            (format!("{name}-key")): "runtime key",
        },
    });
    let theirs = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": {POOL_LABEL: name, ledger::CLUSTER_LABEL: "c1"}},
        "spec": {
            "ports": [{"name": "http", "port": port, "targetPort": port + 1, "protocol": "TCP"}],
            "selector": {"app": format!("{name}-{}", 1)},
            "empty": {}, "none": null, "list": [], "flags": [true, false, null],
            "nested": [[1, 2.5, -3], [{"deep": [namespace]}]],
            "missing": null, "built": [{"a": 1}, "x"],
            "coder-key": "runtime key",
        },
    });
    assert_eq!(ours.to_json(), theirs);
    // Literals stay borrowed; what was built at run time is owned.
    let Tree::Map(fields) = &ours else { panic!() };
    assert!(matches!(
        fields.get("kind"),
        Some(Tree::String(Cow::Borrowed("Service")))
    ));
}

/// A compact tree encodes to the bytes its `serde_json` twin encodes to, whatever order its keys were written in
/// and however often one was set: each map goes out sorted, each key once with the value set last.
#[test]
fn encodes_as_its_json_twin_encodes() {
    let mut spec = Fields::default();
    spec.insert("zeta", 1);
    spec.insert("alpha", tree!([{"b": 2, "a": 1}, "s", null]));
    spec.insert("mid", tree!({"y": true, "x": {"q": "r", "p": []}}));
    spec.insert("zeta", "replaced");
    let repeated = Fields::from_entries(vec![
        (Text::Borrowed("k"), tree!(1)),
        (Text::Borrowed("a"), tree!(2)),
        (Text::Borrowed("k"), tree!(3)),
    ]);
    let long = "x".repeat(300);
    let object = tree!({
        "spec": Tree::Map(spec),
        "repeated": Tree::Map(repeated),
        "long": {"s": &long, "list": [&long, &long]},
        "apiVersion": "v1",
    });
    let json = object.to_json();
    assert_eq!(json["spec"]["zeta"], json!("replaced"));
    assert_eq!(json["repeated"], json!({"k": 3, "a": 2}));
    let theirs = RawStruct::from_map(json.as_object().unwrap());
    let ours = RawStruct::from_tree(fields(object));
    assert_eq!(ours.as_bytes(), theirs.as_bytes());
}

#[test]
fn fields_set_get_and_replace_in_place() {
    let mut fields = Fields::default();
    assert!(fields.is_empty());
    fields.insert("a", 1);
    fields.insert(String::from("b"), "two");
    fields.insert("a", tree!({"n": null}));
    assert_eq!(fields.len(), 2);
    assert_eq!(fields.get("a").unwrap().to_json(), json!({"n": null}));
    *fields.get_mut("b").unwrap() = tree!(false);
    assert_eq!(Tree::Map(fields).to_json(), json!({"a": {"n": null}, "b": false}));
    assert_eq!(Tree::from(f64::NAN), Tree::Null);
    assert_eq!(
        Tree::from(json!({"v": [1, "s"]})).to_json(),
        json!({"v": [1, "s"]})
    );
}

/// What the engine container is put together with: a value set only where the key is missing, reads of a map's
/// scalars, a borrowed request value copied whole, and a constant list kept borrowed.
#[test]
fn entries_reads_and_borrowed_conversions() {
    let mut fields = Fields::default();
    fields.insert("kept", "theirs");
    *fields.entry_or_insert_with("kept", || tree!("ours")) = tree!("changed");
    if let Tree::List(list) = fields.entry_or_insert_with("added", || tree!([])) {
        list.push(tree!(7));
    }
    let tree = Tree::Map(fields);
    assert_eq!(tree.to_json(), json!({"kept": "changed", "added": [7]}));
    assert_eq!(tree.get("kept").and_then(Tree::as_str), Some("changed"));
    assert_eq!(tree.get("missing"), None);
    assert_eq!(tree!("s").get("kept"), None);
    assert_eq!(tree!(8000).as_u64(), Some(8000));
    assert_eq!(tree!(-1).as_u64(), None);
    let request = json!({"env": [{"name": "A", "value": "1"}], "n": 2.5, "on": true, "none": null});
    assert_eq!(Tree::from(&request).to_json(), request);
    const VERBS: [&str; 2] = ["get", "list"];
    assert!(matches!(
        Tree::from(VERBS),
        Tree::List(items) if items == [Tree::String(Cow::Borrowed("get")), Tree::String(Cow::Borrowed("list"))]
    ));
}

/// Keys are ordered by their bytes, as `serde_json` orders a map's keys, non-ASCII and common prefixes included.
#[test]
fn keys_go_out_in_the_order_serde_json_keeps() {
    let keys = ["é", "b", "ab", "a", "", "a\u{0}", "Z", "éa", "~"];
    let mut fields = Fields::default();
    for (i, key) in keys.iter().enumerate() {
        fields.insert(*key, i);
    }
    let object = Tree::Map(fields);
    let theirs = RawStruct::from_map(object.to_json().as_object().unwrap());
    assert_eq!(
        RawStruct::from_tree(self::fields(object)).as_bytes(),
        theirs.as_bytes()
    );
}
