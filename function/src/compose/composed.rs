//! A desired composed object as a composer hands it over: the compact [`Fields`] every composer builds, encoded
//! to the response directly. It also reads as a `serde_json` map, for what looks back at a composed object (a
//! test, the Usages that name it, `render`'s simulated providers); that view is built on the first read, once.

use std::{cell::OnceCell, ops::Deref};

use serde_json::{Map, Value};

use crate::wire::{RawStruct, tree::Fields};

#[derive(Clone)]
pub struct ComposedObject {
    tree: Fields,
    /// The tree read as a map, built on the first read.
    view: OnceCell<Map<String, Value>>,
}

impl ComposedObject {
    /// The object as a map of its own.
    pub fn to_map(&self) -> Map<String, Value> {
        (**self).clone()
    }

    /// The object's `Struct` bytes.
    pub fn into_raw(self) -> RawStruct {
        RawStruct::from_tree(self.tree)
    }
}

impl From<Fields> for ComposedObject {
    fn from(tree: Fields) -> Self {
        Self {
            tree,
            view: OnceCell::new(),
        }
    }
}

/// A read-only view: a composed object is changed by composing it again, never through its map.
impl Deref for ComposedObject {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        self.view.get_or_init(|| self.tree.to_json_map())
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

    /// A tree reads as its map and encodes as that map encodes.
    #[test]
    fn a_tree_reads_as_a_map_and_encodes_as_it() {
        let expected = json!({"kind": "Object", "spec": {"b": 1, "a": [true, null]}});
        let object = ComposedObject::from(sample());
        assert_eq!(Value::Object(object.to_map()), expected);
        assert_eq!(object["spec"]["b"], json!(1));
        let bytes = RawStruct::from_map(expected.as_object().unwrap());
        assert_eq!(object.clone().into_raw().as_bytes(), bytes.as_bytes());
        assert_eq!(ComposedObject::from(sample()), object);
    }
}
