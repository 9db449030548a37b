//! Validates an object the way the API server would against a CRD-style schema, so an object that passes here
//! would be accepted by `kubectl apply`: defaults first, then the OpenAPI schema (through `jsonschema` after a
//! rewrite of Kubernetes' extensions), then unknown fields (which the server would silently prune, so they are
//! almost always a typo), then the `x-kubernetes-validations` CEL rules through kube-cel.
//!
//! The function checks every composite with [`ObjectSchema::admission`]; the package checker (in `tests/`) uses
//! [`ObjectSchema::validate`], which also reports unknown fields.

use std::{collections::BTreeSet, fmt::Write as _, sync::LazyLock};

use jsonschema::{Draft, Validator};
use serde_json::{Map, Value, json};

use super::{defaults::Defaults, rules::Rules};

/// A field path and what is wrong there.
pub type Finding = (String, String);

/// Which of Crossplane's own fields the composite's `spec` carries besides the XRD's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Crossplane v2 XRs keep them under `spec.crossplane`.
    Modern,
    /// Legacy (Crossplane 1.x style) XRs and claims keep them directly under `spec`.
    Legacy,
    /// A plain CRD (a provider's, Crossplane's own): nothing beyond its schema.
    Plain,
}

/// Fields Crossplane adds to a legacy composite's or claim's `spec` (crossplane-runtime's unstructured
/// composite and claim accessors).
pub const LEGACY_SPEC_FIELDS: &[&str] = &[
    "claimRef",
    "compositeDeletePolicy",
    "compositionRef",
    "compositionRevisionRef",
    "compositionRevisionSelector",
    "compositionSelector",
    "compositionUpdatePolicy",
    "environmentConfigRefs",
    "publishConnectionDetailsTo",
    "resourceRef",
    "resourceRefs",
    "writeConnectionSecretToRef",
];

/// One served version of an XRD (or CRD), ready to validate objects.
pub struct ObjectSchema {
    /// The schema as Crossplane would install it: the XRD's plus type meta, metadata and Crossplane's fields.
    full: Value,
    json: Validator,
    cel: Cel,
    defaults: Defaults,
}

/// The schema's CEL rules: walked by [`Rules`] where it can convert values as the API server does, else by
/// kube-cel's own walker.
enum Cel {
    Pruned(Rules),
    Whole(Box<kube_cel::CompiledSchema>),
}

impl Cel {
    fn compiled(&self) -> &kube_cel::CompiledSchema {
        match self {
            Cel::Pruned(rules) => rules.compiled(),
            Cel::Whole(compiled) => compiled,
        }
    }
}

impl ObjectSchema {
    pub fn new(open_api: &Value, layout: Layout) -> Result<Self, String> {
        let full = with_crossplane_fields(open_api, layout);
        let json = jsonschema::options()
            .with_draft(Draft::Draft4)
            .build(&rewrite(&full))
            .map_err(|e| format!("the schema is not valid JSON Schema after the Kubernetes rewrite: {e}"))?;
        let cel = Rules::new(Box::new(kube_cel::compile_schema(&full))).map_or_else(Cel::Whole, Cel::Pruned);
        Ok(Self {
            defaults: Defaults::new(cel.compiled()),
            cel,
            full,
            json,
        })
    }

    /// The fields of `object` its schema does not declare: the API server drops them, and `kubectl apply`'s strict
    /// field validation (its default) refuses the object naming them.
    pub fn unknown_fields(&self, object: &Value) -> Vec<Finding> {
        let mut out = Vec::new();
        unknown_fields(&self.full, object, "", &mut out);
        out
    }

    /// Every reason the API server would refuse (or silently change) `object`, by field path.
    pub fn validate(&self, object: &Value) -> Vec<Finding> {
        let defaulted = kube_cel::apply_defaults(&self.full, object);
        let mut out = self.structural(&defaulted);
        unknown_fields(&self.full, object, "", &mut out);
        let validator = validator();
        // On create transition rules (oldSelf) are skipped; an unchanged update runs them too.
        let mut seen = BTreeSet::new();
        for old in [None, Some(object)] {
            if let Err(errors) = validator.validate_compiled(self.cel.compiled(), object, old) {
                for e in errors.iter() {
                    if seen.insert(e.to_string()) {
                        out.push((e.field_path.clone(), format!("{} (rule: {})", e.message, e.rule)));
                    }
                }
            }
        }
        out
    }
}

/// kube-cel's validator with Kubernetes' CEL libraries, set up once per process: registering them costs more than
/// checking a small composite.
fn validator() -> &'static kube_cel::Validator {
    static VALIDATOR: LazyLock<kube_cel::Validator> = LazyLock::new(kube_cel::Validator::new);
    &VALIDATOR
}

impl ObjectSchema {
    /// Why the API server would refuse to admit `object` (unknown fields it would only prune are not reasons).
    /// The CEL rules run only on an object the schema accepts, so their cost is bounded by the schema's own
    /// limits (`maxItems`, `maxLength`) as the API server's cost estimates assume.
    pub fn admission(&self, object: Value) -> Vec<Finding> {
        let mut defaulted = object;
        self.defaults.apply(&mut defaulted);
        let out = self.structural(&defaulted);
        if !out.is_empty() {
            return out;
        }
        match &self.cel {
            Cel::Pruned(rules) => rules.check(&defaulted, crate::cel::functions()),
            Cel::Whole(compiled) => match validator().validate_compiled(compiled, &defaulted, None) {
                Ok(()) => Vec::new(),
                Err(errors) => errors
                    .iter()
                    .map(|e| (e.field_path.clone(), format!("{} (rule: {})", e.message, e.rule)))
                    .collect(),
            },
        }
    }

    /// [`Self::admission`]'s defaulting next to kube-cel's.
    #[cfg(test)]
    pub(crate) fn defaulted_both_ways(&self, object: &Value) -> (Value, Value) {
        let mut ours = object.clone();
        self.defaults.apply(&mut ours);
        (ours, kube_cel::apply_defaults(&self.full, object))
    }

    /// The CEL findings of [`Self::admission`] next to kube-cel's own walker's on the same defaulted object, for
    /// tests that hold the two to the same answers.
    #[cfg(test)]
    pub(crate) fn cel_findings_both_ways(&self, object: &Value) -> (Vec<Finding>, Vec<Finding>) {
        let defaulted = kube_cel::apply_defaults(&self.full, object);
        let ours = match &self.cel {
            Cel::Pruned(rules) => rules.check(&defaulted, crate::cel::functions()),
            Cel::Whole(_) => Vec::new(),
        };
        let theirs = match validator().validate_compiled(self.cel.compiled(), &defaulted, None) {
            Ok(()) => Vec::new(),
            Err(errors) => errors
                .iter()
                .map(|e| (e.field_path.clone(), format!("{} (rule: {})", e.message, e.rule)))
                .collect(),
        };
        (ours, theirs)
    }

    fn structural(&self, defaulted: &Value) -> Vec<Finding> {
        let mut out: Vec<Finding> = self
            .json
            .iter_errors(defaulted)
            .map(|e| {
                (
                    pointer_to_path(e.instance_path().as_str()),
                    e.masked().to_string(),
                )
            })
            .collect();
        duplicate_list_items(&self.full, defaulted, &mut String::new(), &mut out);
        out
    }
}

impl Layout {
    /// The `spec` fields Crossplane owns in composites (and claims) of this layout.
    pub fn reserved_spec_fields(self) -> &'static [&'static str] {
        match self {
            Layout::Modern => &["crossplane"],
            Layout::Plain => &[],
            Layout::Legacy => LEGACY_SPEC_FIELDS,
        }
    }
}

fn with_crossplane_fields(open_api: &Value, layout: Layout) -> Value {
    let mut full = open_api.clone();
    let Some(props) = full
        .as_object_mut()
        .map(|root| root.entry("properties").or_insert_with(|| json!({})))
    else {
        return full;
    };
    let Some(props) = props.as_object_mut() else {
        return full;
    };
    props
        .entry("apiVersion")
        .or_insert_with(|| json!({"type": "string"}));
    props.entry("kind").or_insert_with(|| json!({"type": "string"}));
    props
        .entry("metadata")
        .or_insert_with(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let spec_props = props
        .get_mut("spec")
        .and_then(|spec| spec.as_object_mut())
        .map(|spec| spec.entry("properties").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut);
    if let Some(spec_props) = spec_props {
        for field in layout.reserved_spec_fields() {
            spec_props
                .entry(*field)
                .or_insert_with(|| json!({"x-kubernetes-preserve-unknown-fields": true}));
        }
    }
    full
}

/// Rewrites Kubernetes' OpenAPI v3.0 dialect into JSON Schema draft 4: `nullable` becomes a `null` type and
/// `x-kubernetes-int-or-string` an `anyOf` of integer and string. Other extensions are left for jsonschema to
/// ignore (unknown keywords are annotations).
pub fn rewrite(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out: Map<String, Value> = map
                .iter()
                .map(|(k, v)| (k.clone(), rewrite_child(k, v)))
                .collect();
            if out.remove("nullable") == Some(Value::Bool(true)) {
                if let Some(Value::String(ty)) = out.get("type").cloned() {
                    out.insert("type".into(), json!([ty, "null"]));
                }
                if let Some(Value::Array(values)) = out.get_mut("enum") {
                    values.push(Value::Null);
                }
            }
            if out.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
                let int_or_string = json!([{"type": "integer"}, {"type": "string"}]);
                match out.remove("anyOf") {
                    None => {}
                    Some(existing) if existing == int_or_string => {}
                    Some(other) => push_all_of(&mut out, json!({"anyOf": other})),
                }
                out.insert("anyOf".into(), int_or_string);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn rewrite_child(key: &str, value: &Value) -> Value {
    match (key, value) {
        // Property names and enum/default/example values are data, not schemas.
        ("properties", Value::Object(props)) => {
            Value::Object(props.iter().map(|(k, v)| (k.clone(), rewrite(v))).collect())
        }
        ("items" | "additionalProperties" | "not", v) => rewrite(v),
        ("allOf" | "anyOf" | "oneOf", Value::Array(list)) => Value::Array(list.iter().map(rewrite).collect()),
        (_, v) => v.clone(),
    }
}

fn push_all_of(map: &mut Map<String, Value>, schema: Value) {
    match map.entry("allOf").or_insert_with(|| json!([])) {
        Value::Array(list) => list.push(schema),
        other => *other = json!([other.clone(), schema]),
    }
}

/// Fields the schema does not declare. The API server prunes them without a word, so the object that lands is
/// not the one written.
fn unknown_fields(schema: &Value, value: &Value, path: &str, out: &mut Vec<Finding>) {
    let preserves = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let embedded = schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
    match value {
        Value::Object(fields) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (name, child) in fields {
                let at = join(path, name);
                if let Some(child_schema) = props.and_then(|p| p.get(name)) {
                    unknown_fields(child_schema, child, &at, out);
                } else if let Some(child_schema) = additional {
                    unknown_fields(child_schema, child, &at, out);
                } else if !preserves
                    && props.is_some()
                    && !(embedded && matches!(name.as_str(), "apiVersion" | "kind" | "metadata"))
                {
                    out.push((
                        at,
                        "unknown field: the schema does not declare it, so the API server would drop it"
                            .into(),
                    ));
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    unknown_fields(item_schema, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Items a `map` or `set` list holds twice (`x-kubernetes-list-type`), which the API server refuses as duplicate
/// values: a map list's items must differ in their `x-kubernetes-list-map-keys`, a set's items altogether.
/// `path` is where `value` is, grown and cut back in place as the walk descends: it visits every node of the
/// object, and a path string of its own per node cost more than the check.
fn duplicate_list_items(schema: &Value, value: &Value, path: &mut String, out: &mut Vec<Finding>) {
    let here = path.len();
    match value {
        Value::Object(fields) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (name, child) in fields {
                if let Some(child_schema) = props.and_then(|p| p.get(name)).or(additional) {
                    if here > 0 {
                        path.push('.');
                    }
                    path.push_str(name);
                    duplicate_list_items(child_schema, child, path, out);
                    path.truncate(here);
                }
            }
        }
        Value::Array(items) => {
            let keys: Option<Vec<&str>> = match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("map") => Some(
                    schema
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect(),
                ),
                Some("set") => Some(Vec::new()),
                _ => None,
            };
            if let Some(keys) = keys {
                let mut seen = BTreeSet::new();
                for (i, item) in items.iter().enumerate() {
                    let identity = if keys.is_empty() {
                        item.to_string()
                    } else {
                        let key: Map<String, Value> = keys
                            .iter()
                            .map(|k| ((*k).to_owned(), item.get(*k).cloned().unwrap_or(Value::Null)))
                            .collect();
                        Value::Object(key).to_string()
                    };
                    if !seen.insert(identity.clone()) {
                        out.push((
                            format!("{path}[{i}]"),
                            format!(
                                "duplicate value: an earlier item is also {}",
                                crate::limits::cut(&identity, 256)
                            ),
                        ));
                    }
                }
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    let _ = write!(path, "[{i}]");
                    duplicate_list_items(item_schema, item, path, out);
                    path.truncate(here);
                }
            }
        }
        _ => {}
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// `/spec/nodePools/0/name` → `spec.nodePools[0].name`.
pub fn pointer_to_path(pointer: &str) -> String {
    let mut path = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            path.push_str(&format!("[{segment}]"));
        } else {
            path = join(&path, &segment);
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["region"], "properties": {
            "region": {"type": "string", "pattern": "^[a-z]+-[a-z]+-[0-9]$"},
            "stack": {"type": "string", "enum": ["Standard", "Dynamo"], "default": "Standard",
                      "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "stack is immutable"}]},
            "port": {"x-kubernetes-int-or-string": true},
            "roleArn": {"type": "string", "nullable": true},
            "scaling": {"type": "object", "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
                        "x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "min must be <= max"}]},
            "pools": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}}}})
    }

    fn validate(spec: Value) -> Vec<Finding> {
        let object = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "Test", "metadata": {"name": "t"},
                            "spec": spec});
        ObjectSchema::new(&schema(), Layout::Modern)
            .unwrap()
            .validate(&object)
    }

    #[test]
    fn a_valid_object_has_no_findings() {
        let found = validate(json!({"region": "us-east-1", "port": 8000, "roleArn": null,
                                    "scaling": {"min": 1, "max": 2}, "pools": [{"name": "gpu"}],
                                    "crossplane": {"compositionRef": {"name": "x"}}}));
        assert_eq!(found, Vec::<Finding>::new());
    }

    #[test]
    fn schema_violations_name_the_field() {
        let found = validate(json!({"region": "moon", "stack": "Fast"}));
        let paths: Vec<&str> = found.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(paths, ["spec.region", "spec.stack"], "{found:?}");
    }

    #[test]
    fn int_or_string_rejects_other_types() {
        let found = validate(json!({"region": "us-east-1", "port": true}));
        assert_eq!(found[0].0, "spec.port");
    }

    #[test]
    fn unknown_fields_are_reported_even_deep_in_lists() {
        let found = validate(json!({"region": "us-east-1", "pools": [{"name": "gpu", "nodes": 2}]}));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "spec.pools[0].nodes");
        assert!(found[0].1.starts_with("unknown field"));
    }

    #[test]
    fn legacy_fields_are_only_known_in_the_legacy_layout() {
        let object = json!({"apiVersion": "a/v1", "kind": "T", "metadata": {"name": "t"},
                            "spec": {"region": "us-east-1", "claimRef": {"name": "c"}}});
        assert!(
            ObjectSchema::new(&schema(), Layout::Legacy)
                .unwrap()
                .validate(&object)
                .is_empty()
        );
        let modern = ObjectSchema::new(&schema(), Layout::Modern)
            .unwrap()
            .validate(&object);
        assert_eq!(modern[0].0, "spec.claimRef");
    }

    #[test]
    fn cel_rules_run_with_their_messages() {
        let found = validate(json!({"region": "us-east-1", "scaling": {"min": 3, "max": 2}}));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "spec.scaling");
        assert!(found[0].1.contains("min must be <= max"));
    }

    #[test]
    fn pointers_become_dotted_paths() {
        assert_eq!(
            pointer_to_path("/spec/nodePools/0/name"),
            "spec.nodePools[0].name"
        );
        assert_eq!(
            pointer_to_path("/metadata/labels/modelplane.ai~1pool"),
            "metadata.labels.modelplane.ai/pool"
        );
        assert_eq!(pointer_to_path(""), "");
    }
}
