//! A desired composed object as a composer hands it over: a compact [`Tree`](crate::wire::tree::Tree) on the hot paths, a `serde_json` map
//! elsewhere. Either reads as a map; a tree is turned into one only when something reads it that way (a test, a
//! composer looking back at what it composed), once, and the response is encoded from the tree directly.

use std::{
    cell::OnceCell,
    ops::{Deref, DerefMut},
};

use serde_json::{Map, Value};

use crate::wire::{RawStruct, tree::Fields};

pub struct ComposedObject {
    /// The tree as composed, until the object is changed through its map.
    tree: Option<Fields>,
    /// The tree read as a map, built on the first read.
    view: OnceCell<Map<String, Value>>,
    /// The object as a map: composed as one, or the tree's once changed through its map.
    map: Option<Map<String, Value>>,
}

impl ComposedObject {
    /// The object as a map of its own.
    pub fn to_map(&self) -> Map<String, Value> {
        (**self).clone()
    }

    /// The object's `Struct` bytes, from the tree when it is still the object as composed.
    pub fn into_raw(self) -> RawStruct {
        match (self.tree, self.map) {
            (Some(tree), _) => RawStruct::from_tree(tree),
            (None, map) => RawStruct::from_owned(map.unwrap_or_default()),
        }
    }
}

impl From<Map<String, Value>> for ComposedObject {
    fn from(map: Map<String, Value>) -> Self {
        Self {
            tree: None,
            view: OnceCell::new(),
            map: Some(map),
        }
    }
}

/// A composer's `json!` object; anything but an object is a bug, kept visible rather than dropped.
impl From<Value> for ComposedObject {
    fn from(value: Value) -> Self {
        match value {
            Value::Object(map) => Self::from(map),
            other => Self::from(Map::from_iter([("invalid".to_owned(), other)])),
        }
    }
}

impl From<Fields> for ComposedObject {
    fn from(tree: Fields) -> Self {
        Self {
            tree: Some(tree),
            view: OnceCell::new(),
            map: None,
        }
    }
}

impl Deref for ComposedObject {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        match (&self.map, &self.tree) {
            (Some(map), _) => map,
            (None, tree) => self
                .view
                .get_or_init(|| tree.as_ref().map(Fields::to_json_map).unwrap_or_default()),
        }
    }
}

impl DerefMut for ComposedObject {
    /// A change through the map makes the map the object: the tree is dropped.
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        if let Some(tree) = self.tree.take() {
            let map = self.view.take().unwrap_or_else(|| tree.to_json_map());
            self.map = Some(map);
        }
        self.map.get_or_insert_with(Map::new)
    }
}

impl Clone for ComposedObject {
    fn clone(&self) -> Self {
        Self {
            tree: self.tree.clone(),
            view: self.view.clone(),
            map: self.map.clone(),
        }
    }
}

impl PartialEq for ComposedObject {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for ComposedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl serde::Serialize for ComposedObject {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::wire::tree::fields;

    fn sample() -> Fields {
        fields!({"kind": "Object", "spec": {"b": 1, "a": [true, null]}})
    }

    /// A tree reads as its map, encodes as that map encodes, and once changed through the map is that map.
    #[test]
    fn a_tree_reads_as_a_map_and_a_change_makes_the_map_the_object() {
        let expected = json!({"kind": "Object", "spec": {"b": 1, "a": [true, null]}});
        let object = ComposedObject::from(sample());
        assert_eq!(Value::Object(object.to_map()), expected);
        assert_eq!(object["spec"]["b"], json!(1));
        let bytes = RawStruct::from_map(expected.as_object().unwrap());
        assert_eq!(object.clone().into_raw().as_bytes(), bytes.as_bytes());

        let mut changed = ComposedObject::from(sample());
        changed.insert("kind".into(), json!("Changed"));
        assert_eq!(changed["kind"], json!("Changed"));
        let mut want = expected.clone();
        want["kind"] = json!("Changed");
        assert_eq!(
            changed.into_raw().as_bytes(),
            RawStruct::from_map(want.as_object().unwrap()).as_bytes()
        );
        assert_eq!(ComposedObject::from(sample()), object);
    }
}
