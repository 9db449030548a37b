//! Is an `openAPIV3Schema` one the API server accepts for a CRD (and so for an XRD, which Crossplane turns into
//! one)? Kubernetes requires a *structural* schema: a type on every node, value validations only inside the
//! logical junctors, no JSON-Schema features it cannot prune by, and CEL rules that compile.
//!
//! Findings are `(field path, message)` pairs; the path is the schema's own path, e.g.
//! `spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.stack`.

use serde_json::{Map, Value};

/// Every keyword of Kubernetes' `JSONSchemaProps` that a CRD may use. Anything else is a typo or a JSON-Schema
/// feature Kubernetes does not support (`$ref`, `patternProperties`, ...), and the API server rejects it.
const KNOWN_KEYWORDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "default",
    "example",
    "externalDocs",
    "enum",
    "nullable",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "multipleOf",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "properties",
    "additionalProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

/// Inside `allOf`/`anyOf`/`oneOf`/`not` a structural schema may only restrict values, never shape them.
const SHAPING_KEYWORDS: &[&str] = &[
    "type",
    "additionalProperties",
    "default",
    "nullable",
    "description",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

const TYPES: &[&str] = &["object", "array", "string", "integer", "number", "boolean"];
const JUNCTORS: &[&str] = &["allOf", "anyOf", "oneOf"];
const RULE_KEYS: &[&str] = &[
    "rule",
    "message",
    "messageExpression",
    "reason",
    "fieldPath",
    "optionalOldSelf",
];
const RULE_REASONS: &[&str] = &[
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

pub type Finding = (String, String);

/// Checks a whole schema rooted at `path`: structure first, then every CEL rule's compilation.
pub fn check(schema: &Value, path: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    node(schema, path, false, &mut findings);
    cel_rules(schema, path, &mut findings);
    findings
}

fn node(schema: &Value, path: &str, in_junctor: bool, out: &mut Vec<Finding>) {
    let Some(map) = schema.as_object() else {
        out.push((path.into(), "a schema must be an object".into()));
        return;
    };
    for key in map.keys() {
        if !KNOWN_KEYWORDS.contains(&key.as_str()) {
            out.push((
                format!("{path}.{key}"),
                "not a keyword Kubernetes schemas support".into(),
            ));
        } else if in_junctor && SHAPING_KEYWORDS.contains(&key.as_str()) {
            out.push((
                format!("{path}.{key}"),
                "only value validations are allowed inside allOf/anyOf/oneOf/not".into(),
            ));
        }
    }
    let flag = |key: &str| map.get(key).and_then(Value::as_bool).unwrap_or(false);
    let int_or_string = flag("x-kubernetes-int-or-string");
    let preserves = flag("x-kubernetes-preserve-unknown-fields");
    let ty = map.get("type").and_then(Value::as_str);
    match (ty, map.get("type")) {
        (Some(t), _) if !TYPES.contains(&t) => {
            out.push((format!("{path}.type"), format!("unknown type {t:?}")))
        }
        (Some(_), _) if int_or_string => out.push((
            format!("{path}.type"),
            "x-kubernetes-int-or-string nodes must not declare a type".into(),
        )),
        (None, Some(other)) => out.push((format!("{path}.type"), format!("must be a string, not {other}"))),
        (None, None) if !in_junctor && !int_or_string && !preserves => {
            out.push((path.into(), "structural schemas need a type on every node".into()))
        }
        _ => {}
    }
    if map.get("uniqueItems") == Some(&Value::Bool(true)) {
        out.push((
            format!("{path}.uniqueItems"),
            "uniqueItems: true is not allowed; use x-kubernetes-list-type: set".into(),
        ));
    }
    if map.get("additionalProperties") == Some(&Value::Bool(false)) {
        out.push((
            format!("{path}.additionalProperties"),
            "additionalProperties: false is not allowed; unknown fields are pruned".into(),
        ));
    }
    if map.contains_key("properties") && map.contains_key("additionalProperties") {
        out.push((
            path.into(),
            "properties and additionalProperties are mutually exclusive".into(),
        ));
    }
    if ty == Some("array") && !map.contains_key("items") {
        out.push((path.into(), "an array needs items".into()));
    }
    required(map, path, out);
    list_type(map, path, out);
    rules_shape(map, path, out);
    children(map, path, in_junctor, out);
}

fn children(map: &Map<String, Value>, path: &str, in_junctor: bool, out: &mut Vec<Finding>) {
    if let Some(properties) = map.get("properties") {
        match properties.as_object() {
            Some(props) => props
                .iter()
                .for_each(|(name, child)| node(child, &format!("{path}.properties.{name}"), in_junctor, out)),
            None => out.push((format!("{path}.properties"), "must be an object".into())),
        }
    }
    if let Some(items) = map.get("items") {
        node(items, &format!("{path}.items"), in_junctor, out);
    }
    if let Some(additional) = map.get("additionalProperties").filter(|v| v.is_object()) {
        node(
            additional,
            &format!("{path}.additionalProperties"),
            in_junctor,
            out,
        );
    }
    for junctor in JUNCTORS {
        if let Some(branches) = map.get(*junctor) {
            match branches.as_array() {
                Some(list) if is_int_or_string_pattern(map, list) => {}
                Some(list) => list
                    .iter()
                    .enumerate()
                    .for_each(|(i, b)| node(b, &format!("{path}.{junctor}[{i}]"), true, out)),
                None => out.push((format!("{path}.{junctor}"), "must be a list".into())),
            }
        }
    }
    if let Some(not) = map.get("not") {
        node(not, &format!("{path}.not"), true, out);
    }
}

/// Generators spell int-or-string as `anyOf: [{type: integer}, {type: string}]` next to the extension, the one
/// place Kubernetes allows a type inside a junctor.
fn is_int_or_string_pattern(map: &Map<String, Value>, branches: &[Value]) -> bool {
    map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        && branches.len() == 2
        && branches[0] == serde_json::json!({"type": "integer"})
        && branches[1] == serde_json::json!({"type": "string"})
}

/// A `required` entry that names no property makes every object invalid, which is never what was meant.
fn required(map: &Map<String, Value>, path: &str, out: &mut Vec<Finding>) {
    let (Some(required), Some(props)) = (
        map.get("required"),
        map.get("properties").and_then(Value::as_object),
    ) else {
        return;
    };
    for name in required.as_array().into_iter().flatten() {
        match name.as_str() {
            Some(n) if props.contains_key(n) => {}
            Some(n) => out.push((
                format!("{path}.required"),
                format!("{n:?} is required but not a declared property"),
            )),
            None => out.push((format!("{path}.required"), "entries must be strings".into())),
        }
    }
}

fn list_type(map: &Map<String, Value>, path: &str, out: &mut Vec<Finding>) {
    let Some(list_type) = map.get("x-kubernetes-list-type") else {
        return;
    };
    let at = format!("{path}.x-kubernetes-list-type");
    match list_type.as_str() {
        Some("atomic" | "set") => {}
        Some("map") => {
            let keys: Vec<&str> = map
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|keys| keys.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if keys.is_empty() {
                out.push((at, "a map list needs x-kubernetes-list-map-keys".into()));
                return;
            }
            let item = map.get("items");
            for key in keys {
                let declared = item.and_then(|i| i.get("properties")).and_then(|p| p.get(key));
                let required = item
                    .and_then(|i| i.get("required"))
                    .and_then(Value::as_array)
                    .is_some_and(|r| r.iter().any(|k| k == key));
                let defaulted = declared.is_some_and(|d| d.get("default").is_some());
                if declared.is_none() || !(required || defaulted) {
                    out.push((
                        format!("{path}.x-kubernetes-list-map-keys"),
                        format!("map key {key:?} must be a required (or defaulted) property of the items"),
                    ));
                }
            }
        }
        _ => out.push((at, format!("must be atomic, set or map, not {list_type}"))),
    }
}

fn rules_shape(map: &Map<String, Value>, path: &str, out: &mut Vec<Finding>) {
    let Some(rules) = map.get("x-kubernetes-validations") else {
        return;
    };
    let Some(rules) = rules.as_array() else {
        out.push((
            format!("{path}.x-kubernetes-validations"),
            "must be a list".into(),
        ));
        return;
    };
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        let Some(rule) = rule.as_object() else {
            out.push((at, "must be an object".into()));
            continue;
        };
        if !rule.get("rule").is_some_and(Value::is_string) {
            out.push((
                format!("{at}.rule"),
                "a rule needs its CEL expression as a string".into(),
            ));
        }
        for key in rule.keys().filter(|k| !RULE_KEYS.contains(&k.as_str())) {
            out.push((format!("{at}.{key}"), "not a field of a validation rule".into()));
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str)
            && !RULE_REASONS.contains(&reason)
        {
            out.push((
                format!("{at}.reason"),
                format!("{reason:?} is not one of {}", RULE_REASONS.join(", ")),
            ));
        }
    }
}

/// Compiles every `x-kubernetes-validations` rule with kube-cel, reporting each failure at its rule's path.
fn cel_rules(schema: &Value, path: &str, out: &mut Vec<Finding>) {
    let compiled = kube_cel::compile_schema(schema);
    compiled_errors(&compiled, path, out);
}

fn compiled_errors(node: &kube_cel::CompiledSchema, path: &str, out: &mut Vec<Finding>) {
    for (i, result) in node.validations.iter().enumerate() {
        if let Err(e) = result {
            out.push((format!("{path}.x-kubernetes-validations[{i}]"), e.to_string()));
        }
    }
    let mut properties: Vec<_> = node.properties.iter().collect();
    properties.sort_by(|a, b| a.0.cmp(b.0));
    for (name, child) in properties {
        compiled_errors(child, &format!("{path}.properties.{name}"), out);
    }
    if let Some(items) = &node.items {
        compiled_errors(items, &format!("{path}.items"), out);
    }
    if let Some(additional) = &node.additional_properties {
        compiled_errors(additional, &format!("{path}.additionalProperties"), out);
    }
    for (junctor, branches) in [
        ("allOf", &node.all_of),
        ("anyOf", &node.any_of),
        ("oneOf", &node.one_of),
    ] {
        for (i, branch) in branches.iter().enumerate() {
            compiled_errors(branch, &format!("{path}.{junctor}[{i}]"), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn findings(schema: Value) -> Vec<Finding> {
        check(&schema, "schema")
    }

    fn good() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["stack"],
            "properties": {
                "stack": {"type": "string", "enum": ["Standard", "Dynamo"], "default": "Standard",
                          "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]},
                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "pools": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "size": {"type": "integer", "anyOf": [{"minimum": 1}, {"maximum": -1}]}}}}})
    }

    #[test]
    fn a_structural_schema_with_rules_passes() {
        assert_eq!(findings(good()), Vec::<Finding>::new());
    }

    #[test]
    fn a_node_without_a_type_is_named() {
        let mut schema = good();
        schema["properties"]["spec"]["properties"]["stack"]
            .as_object_mut()
            .unwrap()
            .remove("type");
        assert_eq!(
            findings(schema),
            [(
                "schema.properties.spec.properties.stack".to_owned(),
                "structural schemas need a type on every node".to_owned()
            )]
        );
    }

    #[test]
    fn unsupported_keywords_and_typos_are_rejected() {
        let mut schema = good();
        schema["properties"]["spec"]["properties"]["labels"]["$ref"] = json!("#/definitions/x");
        schema["properties"]["spec"]["requried"] = json!(["stack"]);
        let paths: Vec<String> = findings(schema).into_iter().map(|f| f.0).collect();
        assert_eq!(
            paths,
            [
                "schema.properties.spec.requried",
                "schema.properties.spec.properties.labels.$ref"
            ]
        );
    }

    #[test]
    fn junctors_may_not_shape_values() {
        let mut schema = good();
        schema["properties"]["spec"]["properties"]["size"]["anyOf"][0]["type"] = json!("integer");
        assert_eq!(
            findings(schema)[0].0,
            "schema.properties.spec.properties.size.anyOf[0].type"
        );
    }

    #[test]
    fn a_required_field_that_is_not_declared_is_a_typo() {
        let mut schema = good();
        schema["properties"]["spec"]["required"] = json!(["stacks"]);
        assert!(
            findings(schema)[0]
                .1
                .contains("\"stacks\" is required but not a declared property")
        );
    }

    #[test]
    fn map_lists_need_required_keys() {
        let mut schema = good();
        schema["properties"]["spec"]["properties"]["pools"]["items"]["required"] = json!([]);
        assert_eq!(
            findings(schema)[0].0,
            "schema.properties.spec.properties.pools.x-kubernetes-list-map-keys"
        );
    }

    #[test]
    fn cel_rules_that_do_not_compile_are_named_with_the_compiler_error() {
        let mut schema = good();
        schema["properties"]["spec"]["properties"]["stack"]["x-kubernetes-validations"][0]["rule"] =
            json!("self == ");
        let found = findings(schema);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].0,
            "schema.properties.spec.properties.stack.x-kubernetes-validations[0]"
        );
        assert!(
            found[0].1.contains("failed to compile CEL rule"),
            "{}",
            found[0].1
        );
    }

    #[test]
    fn rule_fields_are_checked() {
        let mut schema = good();
        schema["properties"]["spec"]["properties"]["stack"]["x-kubernetes-validations"][0]["reason"] =
            json!("Immutable");
        assert_eq!(
            findings(schema)[0].0,
            "schema.properties.spec.properties.stack.x-kubernetes-validations[0].reason"
        );
    }
}
