//! Schema `default`s filled into an object in place, as the API server does before it validates: a declared
//! property that is absent gets its default (its own children are not defaulted further), and defaulting goes on
//! into the properties, list items and map values present. Only the schema nodes that have a default somewhere
//! beneath them are visited, so an object is neither copied nor walked where no default can land; kube-cel's
//! `apply_defaults` rebuilds the whole object to the same result.

use kube_cel::CompiledSchema;
use serde_json::Value;

/// Where defaults are, mirroring a [`CompiledSchema`] with only the branches that lead to one.
#[derive(Debug, Default)]
pub struct Defaults {
    /// Declared properties with a default of their own, in name order.
    here: Vec<(String, Value)>,
    /// Declared properties to descend into.
    properties: Vec<(String, Defaults)>,
    items: Option<Box<Defaults>>,
    /// Map values (`additionalProperties`), with the declared names that are not map values.
    additional: Option<(Box<Defaults>, Vec<String>)>,
}

impl Defaults {
    pub fn new(node: &CompiledSchema) -> Self {
        defaults(node).unwrap_or_default()
    }

    pub fn apply(&self, value: &mut Value) {
        match value {
            Value::Object(fields) => {
                for (name, child) in &self.properties {
                    if let Some(child_value) = fields.get_mut(name) {
                        child.apply(child_value);
                    }
                }
                if let Some((child, declared)) = &self.additional {
                    for (name, child_value) in fields.iter_mut() {
                        if !declared.contains(name) {
                            child.apply(child_value);
                        }
                    }
                }
                // After descending: a default just filled in is not itself defaulted further.
                for (name, default) in &self.here {
                    if !fields.contains_key(name) {
                        fields.insert(name.clone(), default.clone());
                    }
                }
            }
            Value::Array(items) => {
                if let Some(child) = &self.items {
                    items.iter_mut().for_each(|item| child.apply(item));
                }
            }
            _ => {}
        }
    }
}

fn defaults(node: &CompiledSchema) -> Option<Defaults> {
    let mut here: Vec<(String, Value)> = node
        .properties
        .iter()
        .filter_map(|(name, child)| Some((name.clone(), child.default.clone()?)))
        .collect();
    here.sort_by(|a, b| a.0.cmp(&b.0));
    let mut properties: Vec<(String, Defaults)> = node
        .properties
        .iter()
        .filter_map(|(name, child)| Some((name.clone(), defaults(child)?)))
        .collect();
    properties.sort_by(|a, b| a.0.cmp(&b.0));
    // Where unknown fields are preserved, map values are not defaulted (kube-cel's walk skips them too).
    let additional = node
        .additional_properties
        .as_deref()
        .filter(|_| !node.preserve_unknown_fields)
        .and_then(defaults)
        .map(|child| (Box::new(child), node.properties.keys().cloned().collect()));
    let found = Defaults {
        here,
        properties,
        items: node.items.as_deref().and_then(defaults).map(Box::new),
        additional,
    };
    let empty = found.here.is_empty()
        && found.properties.is_empty()
        && found.items.is_none()
        && found.additional.is_none();
    (!empty).then_some(found)
}
