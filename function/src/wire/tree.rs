//! Composed objects as compact trees: the form composers will build instead of `serde_json` values.
//!
//! A `serde_json::Map` is a B-tree whose every node is about 630 bytes and whose every key is a `String` of its
//! own, so building a composed object allocates per key and per map, and walking it to encode it misses the cache
//! on nearly every map (docs/benchmarks.md). Here a map is a `Vec` of its entries in the order they were written,
//! keys written in the source are borrowed `'static` strings, and the encoder sorts a map's entries only when they
//! are out of order. `tree!` builds one with `json!`'s syntax; unlike `json!` it moves what it is given.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

/// A key or string: borrowed when it was written in the source, owned when it was built at run time.
pub type Text = Cow<'static, str>;

/// A JSON value whose maps are [`Fields`].
#[derive(Debug, Clone, PartialEq)]
pub enum Tree {
    Null,
    Bool(bool),
    Number(Number),
    String(Text),
    List(Vec<Tree>),
    Map(Fields),
}

/// A JSON object's entries, in the order they were set; a key set again replaces its value in place.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields(Vec<(Text, Tree)>);

impl Fields {
    pub fn with_capacity(capacity: usize) -> Self {
        Self(Vec::with_capacity(capacity))
    }

    /// Entries as written, a key repeated in them included (the last counts, as for [`Fields::insert`]).
    pub fn from_entries(entries: Vec<(Text, Tree)>) -> Self {
        Self(entries)
    }

    /// Sets `key` to `value`, replacing the value it had. It looks for the key first, so a map of many entries is
    /// built with [`Fields::from_entries`] instead.
    pub fn insert(&mut self, key: impl Into<Text>, value: impl Into<Tree>) {
        let key = key.into();
        let value = value.into();
        match self.0.iter_mut().rev().find(|(k, _)| *k == key) {
            Some((_, existing)) => *existing = value,
            None => self.0.push((key, value)),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Tree> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Tree> {
        self.0.iter_mut().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value at `key`, set to `default()` first when the key is not there (as `Map::entry().or_insert_with`).
    pub fn entry_or_insert_with(
        &mut self,
        key: impl Into<Text>,
        default: impl FnOnce() -> Tree,
    ) -> &mut Tree {
        let key = key.into();
        let at = match self.0.iter().rposition(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                self.0.push((key, default()));
                self.0.len() - 1
            }
        };
        &mut self.0[at].1
    }

    /// The same object as a `serde_json` map (of a repeated key, the value set last).
    pub fn to_json_map(&self) -> Map<String, Value> {
        self.0.iter().map(|(k, v)| (k.to_string(), v.to_json())).collect()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries sorted by key with each key once (its last value), as a `Struct` is written.
    pub(super) fn into_sorted(self) -> Vec<(Text, Tree)> {
        let mut entries = self.0;
        if !entries.is_sorted_by(|a, b| key_order(&a.0, &b.0).is_lt()) {
            // Stable, so that of a repeated key the value set last ends up last, and is kept.
            entries.sort_by(|a, b| key_order(&a.0, &b.0));
            if entries.windows(2).any(|pair| pair[0].0 == pair[1].0) {
                let mut kept: Vec<(Text, Tree)> = Vec::with_capacity(entries.len());
                for entry in entries {
                    match kept.last_mut() {
                        Some(last) if last.0 == entry.0 => *last = entry,
                        _ => kept.push(entry),
                    }
                }
                entries = kept;
            }
        }
        entries
    }
}

/// Keys in byte order, as `str` orders them; keys of one object nearly always differ in their first byte, which
/// is compared here without a call to `memcmp`.
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x.cmp(y),
        _ => a.cmp(b),
    }
}

impl Tree {
    /// The value at `key` of a map; nothing for a missing key or anything but a map.
    pub fn get(&self, key: &str) -> Option<&Tree> {
        match self {
            Tree::Map(fields) => fields.get(key),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Tree::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Tree::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    /// The same value as `serde_json` holds it (what tests and the render output read).
    pub fn to_json(&self) -> Value {
        match self {
            Tree::Null => Value::Null,
            Tree::Bool(b) => Value::Bool(*b),
            Tree::Number(n) => Value::Number(n.clone()),
            Tree::String(s) => Value::String(s.to_string()),
            Tree::List(items) => Value::Array(items.iter().map(Tree::to_json).collect()),
            Tree::Map(fields) => Value::Object(fields.to_json_map()),
        }
    }
}

/// A literal written in a `tree!`: a string stays borrowed, a number or bool becomes one.
pub trait Literal {
    fn tree(self) -> Tree;
}

impl Literal for &'static str {
    fn tree(self) -> Tree {
        Tree::String(Cow::Borrowed(self))
    }
}

impl Literal for bool {
    fn tree(self) -> Tree {
        Tree::Bool(self)
    }
}

impl Literal for f64 {
    fn tree(self) -> Tree {
        Tree::from(self)
    }
}

macro_rules! integers {
    ($($t:ty)*) => {$(
        impl From<$t> for Tree {
            fn from(n: $t) -> Tree {
                Tree::Number(n.into())
            }
        }
        impl Literal for $t {
            fn tree(self) -> Tree {
                Tree::from(self)
            }
        }
    )*};
}
integers!(u8 u16 u32 u64 usize i8 i16 i32 i64 isize);

impl From<f64> for Tree {
    /// JSON has no NaN or infinity: those become null, as `serde_json` makes them.
    fn from(n: f64) -> Tree {
        Number::from_f64(n).map_or(Tree::Null, Tree::Number)
    }
}

impl From<bool> for Tree {
    fn from(b: bool) -> Tree {
        Tree::Bool(b)
    }
}

/// A string built at run time or borrowed from a request: copied, since a tree outlives neither.
impl From<&str> for Tree {
    fn from(s: &str) -> Tree {
        Tree::String(Cow::Owned(s.to_owned()))
    }
}

impl From<&String> for Tree {
    fn from(s: &String) -> Tree {
        Tree::from(s.as_str())
    }
}

impl From<String> for Tree {
    fn from(s: String) -> Tree {
        Tree::String(Cow::Owned(s))
    }
}

impl From<Text> for Tree {
    fn from(s: Text) -> Tree {
        Tree::String(s)
    }
}

impl From<Fields> for Tree {
    fn from(fields: Fields) -> Tree {
        Tree::Map(fields)
    }
}

impl<T: Into<Tree>> From<Vec<T>> for Tree {
    fn from(items: Vec<T>) -> Tree {
        Tree::List(items.into_iter().map(Into::into).collect())
    }
}

/// A constant list of strings written in the source, borrowed.
impl<const N: usize> From<[&'static str; N]> for Tree {
    fn from(items: [&'static str; N]) -> Tree {
        Tree::List(items.into_iter().map(Literal::tree).collect())
    }
}

impl From<&[&'static str]> for Tree {
    fn from(items: &[&'static str]) -> Tree {
        Tree::List(items.iter().map(|item| Literal::tree(*item)).collect())
    }
}

impl<T: Into<Tree>> From<Option<T>> for Tree {
    fn from(value: Option<T>) -> Tree {
        value.map_or(Tree::Null, Into::into)
    }
}

/// A map built at run time (labels, tags), its entries in key order.
impl<K: Into<Text>, V: Into<Tree>> From<std::collections::BTreeMap<K, V>> for Tree {
    fn from(map: std::collections::BTreeMap<K, V>) -> Tree {
        Tree::Map(Fields(
            map.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
        ))
    }
}

/// What a request or a typed view holds as JSON (a user's containers, tolerations), moved in.
impl From<Value> for Tree {
    fn from(value: Value) -> Tree {
        match value {
            Value::Null => Tree::Null,
            Value::Bool(b) => Tree::Bool(b),
            Value::Number(n) => Tree::Number(n),
            Value::String(s) => Tree::String(Cow::Owned(s)),
            Value::Array(items) => Tree::List(items.into_iter().map(Tree::from).collect()),
            Value::Object(map) => Tree::Map(Fields(
                map.into_iter()
                    .map(|(k, v)| (Cow::Owned(k), Tree::from(v)))
                    .collect(),
            )),
        }
    }
}

/// What a request holds as JSON, copied straight into a tree (no `Value` copy on the way).
impl From<&Value> for Tree {
    fn from(value: &Value) -> Tree {
        match value {
            Value::Null => Tree::Null,
            Value::Bool(b) => Tree::Bool(*b),
            Value::Number(n) => Tree::Number(n.clone()),
            Value::String(s) => Tree::from(s.as_str()),
            Value::Array(items) => Tree::List(items.iter().map(Tree::from).collect()),
            Value::Object(map) => Tree::Map(Fields::from(map)),
        }
    }
}

/// A JSON object built elsewhere (a typed resource serialized), moved in.
impl From<Map<String, Value>> for Fields {
    fn from(map: Map<String, Value>) -> Fields {
        Fields(
            map.into_iter()
                .map(|(k, v)| (Cow::Owned(k), Tree::from(v)))
                .collect(),
        )
    }
}

impl From<&Map<String, Value>> for Fields {
    fn from(map: &Map<String, Value>) -> Fields {
        Fields(
            map.iter()
                .map(|(k, v)| (Cow::Owned(k.clone()), Tree::from(v)))
                .collect(),
        )
    }
}

/// Builds a [`Tree`] with `serde_json::json!`'s syntax: keys are literals, constants, paths to constants or any
/// expression that makes a [`Text`]; values are nested objects and lists, `null`, literals or any expression that
/// makes a `Tree`. Unlike `json!`, it moves each value it is given: pass a variable used again by reference.
macro_rules! tree {
    (null) => { $crate::wire::tree::Tree::Null };
    ([]) => { $crate::wire::tree::Tree::List(Vec::new()) };
    ([ $($tt:tt)+ ]) => { $crate::wire::tree::Tree::List($crate::wire::tree::tree!(@list [] $($tt)+)) };
    ({}) => { $crate::wire::tree::Tree::Map($crate::wire::tree::Fields::default()) };
    ({ $($tt:tt)+ }) => { $crate::wire::tree::Tree::Map($crate::wire::tree::fields!({ $($tt)+ })) };
    ($value:literal) => { $crate::wire::tree::Literal::tree($value) };
    ($value:expr) => { $crate::wire::tree::Tree::from($value) };

    // A list's items, one at a time: a nested group, `null`, or an expression up to the next comma.
    (@list [$($out:expr,)*]) => { vec![$($out,)*] };
    (@list [$($out:expr,)*] null $(, $($rest:tt)*)?) => {
        $crate::wire::tree::tree!(@list [$($out,)* $crate::wire::tree::Tree::Null,] $($($rest)*)?)
    };
    (@list [$($out:expr,)*] [$($item:tt)*] $(, $($rest:tt)*)?) => {
        $crate::wire::tree::tree!(@list [$($out,)* $crate::wire::tree::tree!([$($item)*]),] $($($rest)*)?)
    };
    (@list [$($out:expr,)*] {$($item:tt)*} $(, $($rest:tt)*)?) => {
        $crate::wire::tree::tree!(@list [$($out,)* $crate::wire::tree::tree!({$($item)*}),] $($($rest)*)?)
    };
    (@list [$($out:expr,)*] $item:expr $(, $($rest:tt)*)?) => {
        $crate::wire::tree::tree!(@list [$($out,)* $crate::wire::tree::tree!($item),] $($($rest)*)?)
    };

    // A map's entries: the key's tokens up to a lone `:`, then its value as a list item is read.
    (@map [$($out:expr,)*] []) => { vec![$($out,)*] };
    (@map [$($out:expr,)*] [$($key:tt)+] : null $(, $($rest:tt)*)?) => {
        $crate::wire::tree::tree!(@map [$($out,)* ($crate::wire::tree::tree!(@key $($key)+), $crate::wire::tree::Tree::Null),] [] $($($rest)*)?)
    };
    (@map [$($out:expr,)*] [$($key:tt)+] : [$($value:tt)*] $(, $($rest:tt)*)?) => {
        $crate::wire::tree::tree!(@map [$($out,)* ($crate::wire::tree::tree!(@key $($key)+), $crate::wire::tree::tree!([$($value)*])),] [] $($($rest)*)?)
    };
    (@map [$($out:expr,)*] [$($key:tt)+] : {$($value:tt)*} $(, $($rest:tt)*)?) => {
        $crate::wire::tree::tree!(@map [$($out,)* ($crate::wire::tree::tree!(@key $($key)+), $crate::wire::tree::tree!({$($value)*})),] [] $($($rest)*)?)
    };
    (@map [$($out:expr,)*] [$($key:tt)+] : $value:expr $(, $($rest:tt)*)?) => {
        $crate::wire::tree::tree!(@map [$($out,)* ($crate::wire::tree::tree!(@key $($key)+), $crate::wire::tree::tree!($value)),] [] $($($rest)*)?)
    };
    (@map [$($out:expr,)*] [$($key:tt)*] $next:tt $($rest:tt)*) => {
        $crate::wire::tree::tree!(@map [$($out,)*] [$($key)* $next] $($rest)*)
    };

    (@key $key:literal) => { $crate::wire::tree::Text::Borrowed($key) };
    (@key $($key:tt)+) => { $crate::wire::tree::Text::from($($key)+) };
}
pub(crate) use tree;

/// [`tree!`] for an object, as its [`Fields`]: what a composer that adds to the object, or hands it over as a
/// composed resource, builds.
macro_rules! fields {
    ({}) => { $crate::wire::tree::Fields::default() };
    ({ $($tt:tt)+ }) => { $crate::wire::tree::Fields::from_entries($crate::wire::tree::tree!(@map [] [] $($tt)+)) };
}
pub(crate) use fields;

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
