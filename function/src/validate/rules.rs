//! An XRD's `x-kubernetes-validations` rules run over an object the way the API server runs them on create, but
//! visiting only the schema nodes that have rules or lead to one, and converting to CEL only the value a rule
//! reads (its `self`). kube-cel's own walker converts the whole sub-object to CEL at every schema node it passes,
//! rules or not, which made checking a composite cost more than composing it.
//!
//! The rules, their compiled programs and the per-node schema facts conversion needs (formats, maps, embedded
//! resources) are kube-cel's [`CompiledSchema`]; what this adds is the pruning and a converter that follows the
//! same rules as the API server's (field names escaped unless they are map keys). A schema that uses a string
//! format CEL types differently (`date-time`, `duration`, `byte`) or embedded resources is not walked here:
//! [`Rules::new`] hands it back and the caller keeps kube-cel's walker for it.

use std::{collections::HashMap, sync::Arc};

use kube_cel::{
    CompilationError, CompilationResult, CompiledSchema, SchemaFormat,
    cel::{
        Context, ExecutionError, Value,
        objects::{Key, Map},
    },
};
use serde_json::Value as Json;

use super::{reads::Need, schema::Finding};

/// Which schema nodes hold rules, or lie on the way to one. Mirrors a [`CompiledSchema`], keeping only the
/// branches that lead to rules.
#[derive(Debug, Default)]
struct Route {
    /// This node has rules (or rules that failed to compile, reported as the API server would refuse them).
    here: bool,
    /// What those rules read of the node's value; `None` when they need all of it.
    reads: Option<Need>,
    /// Properties to descend into, in name order so findings come out in a stable order.
    properties: Vec<(String, Route)>,
    items: Option<Box<Route>>,
    additional: Option<Box<Route>>,
    /// `allOf`, `oneOf` and `anyOf` branches (in that order, by index) to descend into.
    branches: Vec<(usize, Route)>,
}

/// The rules of one schema and where they are.
pub struct Rules {
    compiled: Box<CompiledSchema>,
    route: Route,
}

impl Rules {
    /// Hands `compiled` back if the schema has a node this walker does not convert as the API server would
    /// (see the module docs); use kube-cel's walker for such a schema.
    pub fn new(compiled: Box<CompiledSchema>) -> Result<Self, Box<CompiledSchema>> {
        if !convertible(&compiled) {
            return Err(compiled);
        }
        let route = route(&compiled).unwrap_or_default();
        Ok(Self { compiled, route })
    }

    pub fn compiled(&self) -> &CompiledSchema {
        &self.compiled
    }

    /// Every rule `object` (already defaulted) breaks, with the field path and message kube-cel would give.
    pub fn check(&self, object: &Json, functions: &Context<'static>) -> Vec<Finding> {
        let mut out = Vec::new();
        walk(&self.compiled, &self.route, object, "", functions, &mut out);
        out
    }
}

fn convertible(node: &CompiledSchema) -> bool {
    matches!(node.format, SchemaFormat::None | SchemaFormat::IntOrString)
        && !node.embedded_resource
        && node.properties.values().all(convertible)
        && node.items.as_deref().is_none_or(convertible)
        && node.additional_properties.as_deref().is_none_or(convertible)
        && branches(node).all(convertible)
}

fn branches(node: &CompiledSchema) -> impl Iterator<Item = &CompiledSchema> {
    node.all_of.iter().chain(&node.one_of).chain(&node.any_of)
}

/// The route to every rule under `node`, or `None` if there is none.
fn route(node: &CompiledSchema) -> Option<Route> {
    let mut properties: Vec<(String, Route)> = node
        .properties
        .iter()
        .filter_map(|(name, child)| Some((name.clone(), route(child)?)))
        .collect();
    properties.sort_by(|a, b| a.0.cmp(&b.0));
    let found = Route {
        here: !node.validations.is_empty(),
        reads: reads(node),
        properties,
        items: node.items.as_deref().and_then(route).map(Box::new),
        // kube-cel does not walk additionalProperties where unknown fields are preserved; neither does this.
        additional: node
            .additional_properties
            .as_deref()
            .filter(|_| !node.preserve_unknown_fields)
            .and_then(route)
            .map(Box::new),
        branches: branches(node)
            .enumerate()
            .filter_map(|(i, branch)| Some((i, route(branch)?)))
            .collect(),
    };
    let empty = !found.here
        && found.properties.is_empty()
        && found.items.is_none()
        && found.additional.is_none()
        && found.branches.is_empty();
    (!empty).then_some(found)
}

/// What the rules of `node` that run on create read of its value.
fn reads(node: &CompiledSchema) -> Option<Need> {
    let runs = node
        .validations
        .iter()
        .filter_map(|compiled| compiled.as_ref().ok())
        .filter(|rule| runs(rule));
    Need::of(runs.flat_map(|rule| {
        std::iter::once(rule.program.expression())
            .chain(rule.message_program.as_ref().map(|p| p.expression()))
    }))
}

/// Whether `rule` runs on create: a transition rule only when `optionalOldSelf` lets it run with `oldSelf` null.
fn runs(rule: &CompilationResult) -> bool {
    !rule.is_transition_rule || rule.rule.optional_old_self == Some(true)
}

fn walk(
    node: &CompiledSchema,
    route: &Route,
    value: &Json,
    path: &str,
    functions: &Context<'static>,
    out: &mut Vec<Finding>,
) {
    if route.here {
        evaluate(node, route.reads.as_ref(), value, path, functions, out);
    }
    if let Json::Object(fields) = value {
        for (name, child_route) in &route.properties {
            if let (Some(child), Some(child_value)) = (node.properties.get(name), fields.get(name)) {
                walk(child, child_route, child_value, &join(path, name), functions, out);
            }
        }
        if let (Some(child), Some(child_route)) = (node.additional_properties.as_deref(), &route.additional) {
            for (name, child_value) in fields {
                if !node.properties.contains_key(name) {
                    walk(child, child_route, child_value, &join(path, name), functions, out);
                }
            }
        }
    }
    if let (Json::Array(items), Some(child), Some(child_route)) = (value, node.items.as_deref(), &route.items)
    {
        for (i, item) in items.iter().enumerate() {
            walk(child, child_route, item, &format!("{path}[{i}]"), functions, out);
        }
    }
    for (i, branch_route) in &route.branches {
        if let Some(branch) = branches(node).nth(*i) {
            walk(branch, branch_route, value, path, functions, out);
        }
    }
}

/// Runs the rules of one node on `value`, as on create: no `oldSelf`, so transition rules are skipped unless
/// `optionalOldSelf` asks for them with `oldSelf` null.
fn evaluate(
    node: &CompiledSchema,
    reads: Option<&Need>,
    value: &Json,
    path: &str,
    functions: &Context<'static>,
    out: &mut Vec<Finding>,
) {
    let mut scope = functions.new_inner_scope();
    scope.add_variable_from_value("self", to_cel(value, Some(node), reads));
    for compiled in &node.validations {
        match compiled {
            Ok(rule) => {
                if !runs(rule) {
                    continue;
                }
                let null_old;
                let context = if rule.is_transition_rule {
                    null_old = {
                        let mut inner = scope.new_inner_scope();
                        inner.add_variable_from_value("oldSelf", Value::Null);
                        inner
                    };
                    &null_old
                } else {
                    &scope
                };
                if let Some(message) = broken(rule, context) {
                    let at = match rule.rule.field_path.as_deref() {
                        Some(field) if field.starts_with('.') => format!("{path}{field}"),
                        Some(field) => join(path, field),
                        None => path.to_owned(),
                    };
                    out.push((at, format!("{message} (rule: {})", rule.rule.rule)));
                }
            }
            Err(e) => out.push((path.to_owned(), not_compiled(e))),
        }
    }
}

/// Why `rule` refuses the value in `context`, or `None` if it accepts it.
fn broken(rule: &CompilationResult, context: &Context<'_>) -> Option<String> {
    match rule.program.execute(context) {
        Ok(Value::Bool(true)) => None,
        Ok(Value::Bool(false)) => Some(
            rule.message_program
                .as_ref()
                .and_then(|program| match program.execute(context) {
                    Ok(Value::String(message)) => Some((*message).clone()),
                    _ => None,
                })
                .or_else(|| rule.rule.message.clone())
                .unwrap_or_else(|| format!("failed rule: {}", rule.rule.rule)),
        ),
        Ok(_) => Some(format!("rule \"{}\" did not evaluate to bool", rule.rule.rule)),
        Err(ExecutionError::UndeclaredReference(name)) => Some(format!(
            "rule references '{name}', which this kube-cel build does not support (an unsupported CEL macro, or \
             a feature disabled at compile time); it cannot be evaluated client-side"
        )),
        Err(e) => Some(format!("rule evaluation error: {e}")),
    }
}

/// A rule of the embedded XRD that does not compile fails closed, as the API server would refuse the XRD.
fn not_compiled(error: &CompilationError) -> String {
    format!("{error} (the XRD's rule cannot run)")
}

/// `value` as the API server hands it to a rule: numbers as int, uint or double, field names escaped (map keys,
/// which are data, are not), following the schema where it says more (`node`, `None` below what it declares).
/// Only what `reads` names is converted (all of it when `None`): fields no rule reads are left out, and list
/// items no rule reads become nulls, so lists keep their length.
fn to_cel(value: &Json, node: Option<&CompiledSchema>, reads: Option<&Need>) -> Value {
    let reads = reads.filter(|need| !need.whole);
    match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::UInt(u),
            (None, None) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::String(Arc::new(s.clone())),
        Json::Array(items) => {
            let item_node = node.and_then(|n| n.items.as_deref());
            let item_reads = reads.map(|need| need.items.as_deref());
            Value::List(Arc::new(
                items
                    .iter()
                    .map(|item| match item_reads {
                        None => to_cel(item, item_node, None),
                        Some(Some(need)) => to_cel(item, item_node, Some(need)),
                        Some(None) => Value::Null,
                    })
                    .collect(),
            ))
        }
        Json::Object(fields) => {
            let is_map = node.is_some_and(|n| n.is_map);
            let mut map = HashMap::with_capacity(fields.len());
            for (name, child) in fields {
                let child_node =
                    node.and_then(|n| n.properties.get(name).or(n.additional_properties.as_deref()));
                let key = if is_map { name.clone() } else { escape(name) };
                let converted = match reads {
                    None => to_cel(child, child_node, None),
                    Some(need) => match need.field(&key) {
                        Some(child_reads) => to_cel(child, child_node, Some(child_reads)),
                        None if need.keys => Value::Null,
                        None => continue,
                    },
                };
                map.insert(Key::String(Arc::new(key)), converted);
            }
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}

/// CEL's reserved words, which a field name may not be as it is (Kubernetes' `apiserver/schema/cel/model`).
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A field name as a CEL rule spells it: a reserved word becomes `__word__`; `_`, `.`, `-` and `/` become `__`,
/// `__dot__`, `__dash__` and `__slash__`.
fn escape(name: &str) -> String {
    if RESERVED.contains(&name) {
        return format!("__{name}__");
    }
    if !name.contains(['_', '.', '-', '/']) {
        return name.to_owned();
    }
    let mut escaped = String::with_capacity(name.len() * 2);
    for c in name.chars() {
        match c {
            '_' => escaped.push_str("__"),
            '.' => escaped.push_str("__dot__"),
            '-' => escaped.push_str("__dash__"),
            '/' => escaped.push_str("__slash__"),
            other => escaped.push(other),
        }
    }
    escaped
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}
