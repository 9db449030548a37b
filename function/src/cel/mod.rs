//! DRA CEL selectors under a budget, the way Kubernetes bounds them: a size limit and a nesting limit checked
//! before parsing, a depth limit after, and a cost estimated from the expression and the bounds DRA puts on
//! device data, refused above DRA's per-selector limit. An accepted selector's evaluation is thereby bounded, and
//! it runs on the call's own large stack ([`crate::limits::run_bounded`]).
//!
//! References: `resource.k8s.io`'s `CELSelectorExpressionMaxLength` (10 KiB) and `CELSelectorExpressionMaxCost`
//! (1,000,000); cel-go's parser recursion limit (250); DRA's device limits (attribute string values of at most
//! 64 bytes, at most 32 attributes and capacities per device).

use std::{
    collections::HashMap,
    sync::{
        Arc, LazyLock, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

pub use crate::limits::cut;
use kube_cel::{
    KubeCelExt,
    cel::{
        Context, ExecutionError, Program, Value,
        common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators},
    },
};

/// Longest selector, in bytes (DRA's `CELSelectorExpressionMaxLength`).
pub const MAX_EXPRESSION_BYTES: usize = 10 * 1024;
/// Deepest bracket nesting, checked on the text before it is parsed.
pub const MAX_NESTING: usize = 64;
/// Deepest expression tree (cel-go's default parser recursion limit).
pub const MAX_DEPTH: usize = 250;
/// Highest estimated cost of one evaluation (DRA's `CELSelectorExpressionMaxCost`).
pub const MAX_COST: u64 = 1_000_000;
/// Longest string in a device's CEL value (DRA's `DeviceAttributeMaxValueLength`; names are shorter).
pub const MAX_DEVICE_STRING: usize = 64;
/// Most attributes plus capacities of one device (DRA's `ResourceSliceMaxAttributesAndCapacitiesPerDevice`).
pub const MAX_DEVICE_ENTRIES: usize = 32;

/// A size no estimate trusts: anything derived from it is over budget as soon as it is iterated.
const UNBOUNDED: u64 = 1 << 40;
/// Kubernetes charges traversing a string or list a tenth of a unit per element.
const TRAVERSAL_DIVISOR: u64 = 10;

/// A selector that passed every bound, ready to evaluate.
#[derive(Debug)]
pub struct Selector {
    program: Program,
    /// The estimated worst-case cost of one evaluation.
    pub cost: u64,
    /// Unique to this compilation for the life of the process (never reused, even once the selector is dropped),
    /// so a verdict remembered under it belongs to this program.
    pub id: u64,
}

/// Why a device does not match, or why evaluating failed outright.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// The selector returned false, or named an attribute or capacity the device lacks (how a DeviceClass
    /// restricted to the devices that have them would see it).
    No(String),
    /// A runtime error DRA aborts allocation on: a wrong type, a bad argument, a non-bool result.
    Error(String),
}

/// Most selectors [`compile`] keeps compiled, and the longest it keeps: a control plane's deployments share a
/// handful of selectors, and parsing and estimating one costs more than evaluating it on a pool's devices.
const CACHED_SELECTORS: usize = 512;
const CACHED_SELECTOR_BYTES: usize = 1024;

/// Checks `source` against every bound and compiles it, or returns it as compiled before. The error completes
/// the phrase "the CEL selector ...": which bound failed and by how much.
pub fn compile(source: &str) -> Result<Arc<Selector>, String> {
    static COMPILED: LazyLock<Mutex<HashMap<String, Arc<Selector>>>> = LazyLock::new(Mutex::default);
    let cached = source.len() <= CACHED_SELECTOR_BYTES;
    if cached && let Some(selector) = COMPILED.lock().ok().and_then(|c| c.get(source).cloned()) {
        return Ok(selector);
    }
    let selector = Arc::new(compile_uncached(source)?);
    if cached && let Ok(mut compiled) = COMPILED.lock() {
        // Starting over when full keeps the bound without bookkeeping; refills cost one compile each.
        if compiled.len() >= CACHED_SELECTORS {
            compiled.clear();
        }
        compiled.insert(source.to_owned(), Arc::clone(&selector));
    }
    Ok(selector)
}

/// CEL's and Kubernetes' functions, registered once per process: registering them costs more than composing a
/// small composite. Each request evaluates in a scope of its own over these ([`Context::new_inner_scope`]).
pub fn functions() -> &'static Context<'static> {
    static FUNCTIONS: LazyLock<Context<'static>> = LazyLock::new(|| Context::default().with_all());
    &FUNCTIONS
}

fn compile_uncached(source: &str) -> Result<Selector, String> {
    if source.len() > MAX_EXPRESSION_BYTES {
        return Err(format!(
            "is {} bytes; the limit is {MAX_EXPRESSION_BYTES}",
            source.len()
        ));
    }
    let nesting = bracket_nesting(source);
    if nesting > MAX_NESTING {
        return Err(format!(
            "nests brackets {nesting} deep; the limit is {MAX_NESTING}"
        ));
    }
    // cel's parser can trip over its own recursion counter on malformed input (an arithmetic overflow in debug
    // builds): treat that as the parse error it is.
    let parsed = std::panic::catch_unwind(|| Program::compile(source))
        .map_err(|_| "does not compile: the parser gave up on it".to_owned())?;
    let program = parsed.map_err(|e| {
        let message = e.to_string();
        format!("does not compile: {}", cut(&message, 512))
    })?;
    let depth = depth(program.expression());
    if depth > MAX_DEPTH {
        return Err(format!("nests {depth} deep; the limit is {MAX_DEPTH}"));
    }
    let estimate = Estimator::default().estimate(program.expression())?;
    if estimate.cost > MAX_COST {
        return Err(format!(
            "is estimated to cost {} per evaluation; the limit is {MAX_COST} (iterate over fewer or smaller lists)",
            estimate.cost
        ));
    }
    static COMPILATIONS: AtomicU64 = AtomicU64::new(0);
    Ok(Selector {
        program,
        cost: estimate.cost,
        id: COMPILATIONS.fetch_add(1, Ordering::Relaxed),
    })
}

impl Selector {
    /// Runs the selector against the `device` already in `context`.
    pub fn matches(&self, context: &Context<'static>) -> Result<(), Mismatch> {
        match self.program.execute(context) {
            Ok(Value::Bool(true)) => Ok(()),
            Ok(Value::Bool(false)) => Err(Mismatch::No("is false".into())),
            Ok(other) => Err(Mismatch::Error(format!(
                "returned {}, not a bool",
                cut(&format!("{other:?}"), 128)
            ))),
            Err(ExecutionError::NoSuchKey(key)) => Err(Mismatch::No(format!(
                "names {} the device lacks",
                cut(&format!("{key:?}"), 128)
            ))),
            Err(e) => Err(Mismatch::Error(cut(&e.to_string(), 512))),
        }
    }
}

/// The deepest bracket nesting outside string literals. A lexical scan, so it runs before the parser could
/// recurse on anything.
fn bracket_nesting(source: &str) -> usize {
    let bytes = source.as_bytes();
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            quote @ (b'"' | b'\'') => {
                let triple = bytes.get(i..i + 3) == Some(&[quote, quote, quote][..]);
                let raw = i > 0 && matches!(bytes[i - 1], b'r' | b'R');
                i += if triple { 3 } else { 1 };
                while i < bytes.len() {
                    if bytes[i] == b'\\' && !raw {
                        i += 2;
                        continue;
                    }
                    let closes = if triple {
                        bytes.get(i..i + 3) == Some(&[quote, quote, quote][..])
                    } else {
                        bytes[i] == quote
                    };
                    if closes {
                        i += if triple { 2 } else { 0 };
                        break;
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    deepest
}

fn children(expr: &IdedExpr) -> Vec<&IdedExpr> {
    match &expr.expr {
        Expr::Call(call) => call.target.iter().map(|t| &**t).chain(&call.args).collect(),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => entries(&map.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Select(select) => vec![&select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

fn entries(entries: &[kube_cel::cel::common::ast::IdedEntryExpr]) -> Vec<&IdedExpr> {
    entries
        .iter()
        .flat_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })
        .collect()
}

/// Tree depth without recursion, so any parsed tree can be measured.
fn depth(root: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((expr, d)) = stack.pop() {
        deepest = deepest.max(d);
        stack.extend(children(expr).into_iter().map(|child| (child, d + 1)));
    }
    deepest
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Scalar,
    Text,
    List,
    Map,
    /// Device data or anything else whose type is only known at run time.
    Any,
}

/// An upper bound on what evaluating an expression costs and produces.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    cost: u64,
    /// Length of the value: characters of a string, elements of a list, entries of a map.
    size: u64,
    /// Bound on the size of anything inside it.
    elem: u64,
    shape: Shape,
}

impl Estimate {
    fn scalar(cost: u64) -> Self {
        Self {
            cost,
            size: 1,
            elem: 0,
            shape: Shape::Scalar,
        }
    }

    fn traversed(&self) -> u64 {
        self.size.saturating_mul(self.elem.max(1)) / TRAVERSAL_DIVISOR
    }
}

/// Identifiers in scope: comprehension variables, innermost last.
#[derive(Default)]
struct Estimator {
    scope: Vec<(String, Estimate)>,
}

/// Prefixes of the namespaced functions kube-cel provides (`lists.range`, `strings.quote`, ...).
const NAMESPACES: &[&str] = &["lists", "sets", "strings", "math", "format", "optional", "base64"];

const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
];

impl Estimator {
    /// Recursion is bounded: [`compile`] checks the depth first.
    fn estimate(&mut self, expr: &IdedExpr) -> Result<Estimate, String> {
        Ok(match &expr.expr {
            Expr::Literal(LiteralValue::String(s)) => Estimate {
                cost: 1,
                size: len(s.len()),
                elem: 0,
                shape: Shape::Text,
            },
            Expr::Literal(LiteralValue::Bytes(b)) => Estimate {
                cost: 1,
                size: len(b.len()),
                elem: 0,
                shape: Shape::Text,
            },
            Expr::Literal(_) => Estimate::scalar(1),
            Expr::Ident(name) => self.ident(name)?,
            Expr::Select(select) => {
                let operand = self.estimate(&select.operand)?;
                if select.test {
                    Estimate::scalar(operand.cost.saturating_add(1))
                } else {
                    Estimate {
                        cost: operand.cost.saturating_add(1),
                        size: operand.elem,
                        elem: operand.elem,
                        shape: Shape::Any,
                    }
                }
            }
            Expr::List(list) => {
                let mut out = Estimate {
                    cost: len(list.elements.len()).saturating_add(1),
                    size: len(list.elements.len()),
                    elem: 0,
                    shape: Shape::List,
                };
                for element in &list.elements {
                    let e = self.estimate(element)?;
                    out.cost = out.cost.saturating_add(e.cost);
                    out.elem = out.elem.max(e.size).max(e.elem);
                }
                out
            }
            Expr::Map(map) => {
                let mut out = Estimate {
                    cost: len(map.entries.len()).saturating_add(1),
                    size: len(map.entries.len()),
                    elem: 0,
                    shape: Shape::Map,
                };
                for child in entries(&map.entries) {
                    let e = self.estimate(child)?;
                    out.cost = out.cost.saturating_add(e.cost);
                    out.elem = out.elem.max(e.size).max(e.elem);
                }
                out
            }
            Expr::Struct(s) => {
                return Err(format!(
                    "builds a message {}, but selectors have no message types",
                    cut(&s.type_name, 64)
                ));
            }
            Expr::Unspecified => return Err("is incomplete".into()),
            Expr::Call(call) => {
                // `lists.range(n)` parses as a call of `range` on an identifier `lists`: a namespaced function.
                let namespaced = match call.target.as_deref().map(|t| &t.expr) {
                    Some(Expr::Ident(ns)) if NAMESPACES.contains(&ns.as_str()) && !self.in_scope(ns) => {
                        Some(format!("{ns}.{}", call.func_name))
                    }
                    _ => None,
                };
                let target = match (&call.target, &namespaced) {
                    (Some(t), None) => Some(self.estimate(t)?),
                    _ => None,
                };
                let mut args = Vec::with_capacity(call.args.len());
                for arg in &call.args {
                    args.push(self.estimate(arg)?);
                }
                let literal_int = call.args.first().and_then(|a| match &a.expr {
                    Expr::Literal(LiteralValue::Int(i)) => u64::try_from(**i).ok(),
                    _ => None,
                });
                let name = namespaced.as_deref().unwrap_or(&call.func_name);
                call_estimate(name, target, &args, literal_int)
            }
            Expr::Comprehension(c) => {
                let range = self.estimate(&c.iter_range)?;
                let init = self.estimate(&c.accu_init)?;
                let item = Estimate {
                    cost: 1,
                    size: range.elem,
                    elem: range.elem,
                    shape: Shape::Any,
                };
                let mut vars = vec![(c.iter_var.clone(), item)];
                if let Some(second) = &c.iter_var2 {
                    vars.push((second.clone(), item));
                }
                // First pass with the accumulator as initialised, to learn how much one step grows it; then
                // again with it grown by that much for every element.
                let (_, step) = self.body(&vars, (&c.accu_var, init), c)?;
                let grown = if step.shape == Shape::Scalar {
                    init
                } else {
                    let growth = step.size.saturating_sub(init.size).max(1);
                    Estimate {
                        cost: 1,
                        size: init.size.saturating_add(range.size.saturating_mul(growth)),
                        elem: init.elem.max(step.elem),
                        shape: step.shape,
                    }
                };
                let (cond, step) = self.body(&vars, (&c.accu_var, grown), c)?;
                self.scope.push((c.accu_var.clone(), grown));
                let result = self.estimate(&c.result);
                self.scope.pop();
                let result = result?;
                let per_item = cond.cost.saturating_add(step.cost);
                Estimate {
                    cost: range
                        .cost
                        .saturating_add(init.cost)
                        .saturating_add(range.size.saturating_mul(per_item))
                        .saturating_add(result.cost),
                    ..result
                }
            }
        })
    }

    /// Estimates a comprehension's condition and step with its variables in scope.
    fn body(
        &mut self,
        vars: &[(String, Estimate)],
        accu: (&str, Estimate),
        c: &kube_cel::cel::common::ast::ComprehensionExpr,
    ) -> Result<(Estimate, Estimate), String> {
        let depth = self.scope.len();
        self.scope.extend(vars.iter().cloned());
        self.scope.push((accu.0.to_owned(), accu.1));
        let cond = self.estimate(&c.loop_cond);
        let step = self.estimate(&c.loop_step);
        self.scope.truncate(depth);
        Ok((cond?, step?))
    }

    fn in_scope(&self, name: &str) -> bool {
        self.scope.iter().any(|(n, _)| n == name)
    }

    fn ident(&self, name: &str) -> Result<Estimate, String> {
        if let Some((_, e)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return Ok(Estimate { cost: 1, ..*e });
        }
        match name {
            "device" => Ok(Estimate {
                cost: 1,
                size: 3,
                elem: len(MAX_DEVICE_STRING.max(MAX_DEVICE_ENTRIES)),
                shape: Shape::Map,
            }),
            _ if TYPE_NAMES.contains(&name) => Ok(Estimate::scalar(1)),
            _ => Err(format!(
                "names {:?}, but a selector sees only `device`",
                cut(name, 64)
            )),
        }
    }
}

fn len(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(UNBOUNDED)
}

/// Cost and result of one call, given its operands'.
fn call_estimate(
    name: &str,
    target: Option<Estimate>,
    args: &[Estimate],
    literal_int: Option<u64>,
) -> Estimate {
    let operands: Vec<Estimate> = target.into_iter().chain(args.iter().copied()).collect();
    let inputs = operands.iter().fold(1u64, |sum, e| sum.saturating_add(e.cost));
    let traversal = operands
        .iter()
        .fold(0u64, |sum, e| sum.saturating_add(e.traversed()));
    let first = operands.first().copied().unwrap_or(Estimate::scalar(0));
    let total_size = operands.iter().fold(0u64, |sum, e| sum.saturating_add(e.size));
    let widest = operands.iter().map(|e| e.size).max().unwrap_or(0);
    let inner = operands.iter().map(|e| e.elem).max().unwrap_or(0);
    let with = |extra: u64, size: u64, elem: u64, shape: Shape| Estimate {
        cost: inputs.saturating_add(extra),
        size,
        elem,
        shape,
    };
    match name {
        operators::LOGICAL_AND
        | operators::LOGICAL_OR
        | operators::LOGICAL_NOT
        | operators::NOT_STRICTLY_FALSE
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS
        | operators::SUBSTRACT
        | operators::MULTIPLY
        | operators::DIVIDE
        | operators::MODULO
        | operators::NEGATE
        | "size"
        | "has" => with(0, 1, 0, Shape::Scalar),
        operators::EQUALS
        | operators::NOT_EQUALS
        | operators::IN
        | "contains"
        | "startsWith"
        | "endsWith"
        | "indexOf"
        | "lastIndexOf"
        | "compareTo"
        | "isGreaterThan"
        | "isLessThan"
        | "isQuantity"
        | "isSemver"
        | "quantity"
        | "semver"
        | "sets.contains"
        | "sets.equivalent"
        | "sets.intersects" => with(traversal, 1, 0, Shape::Scalar),
        operators::CONDITIONAL => {
            let branches = &operands[1.min(operands.len())..];
            let size = branches.iter().map(|e| e.size).max().unwrap_or(1);
            let shape = match branches {
                [a, b] if a.shape == b.shape => a.shape,
                _ => Shape::Any,
            };
            with(0, size, inner, shape)
        }
        operators::ADD => {
            let shape = if operands.iter().all(|e| e.shape == Shape::Scalar) {
                Shape::Scalar
            } else {
                operands
                    .iter()
                    .map(|e| e.shape)
                    .find(|s| *s != Shape::Scalar)
                    .unwrap_or(Shape::Any)
            };
            match shape {
                Shape::Scalar => with(0, 1, 0, Shape::Scalar),
                _ => with(total_size / TRAVERSAL_DIVISOR, total_size, inner, shape),
            }
        }
        operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT => {
            with(0, first.elem, first.elem, Shape::Any)
        }
        "matches" | "find" | "findAll" => {
            // A regular expression is compiled per call and runs in time linear in text × pattern.
            let pattern = operands.get(1).map_or(1, |p| p.size.max(1));
            let work = first.size.max(1).saturating_mul(pattern) / TRAVERSAL_DIVISOR;
            with(work.saturating_add(pattern), first.size, first.size, Shape::Any)
        }
        "split" => with(traversal, first.size.saturating_add(1), first.size, Shape::List),
        "replace" => {
            let replacement = operands.get(2).map_or(0, |r| r.size);
            let size = first
                .size
                .saturating_mul(replacement.max(1))
                .saturating_add(first.size);
            with(size / TRAVERSAL_DIVISOR, size, 0, Shape::Text)
        }
        "join" => {
            let size = first.size.saturating_mul(first.elem.saturating_add(widest));
            with(size / TRAVERSAL_DIVISOR, size, 0, Shape::Text)
        }
        "strings.quote" | "format" | "string" => {
            let size = total_size
                .saturating_mul(inner.max(1))
                .saturating_mul(2)
                .saturating_add(32);
            with(size / TRAVERSAL_DIVISOR, size, 0, Shape::Text)
        }
        "lists.range" => {
            let size = literal_int.unwrap_or(UNBOUNDED);
            with(size, size, 1, Shape::List)
        }
        "flatten" => {
            let size = first.size.saturating_mul(first.elem.max(1));
            with(size, size, first.elem, Shape::List)
        }
        "sort" | "distinct" | "isSorted" => {
            // Comparison sorts and pairwise deduplication: charged as quadratic, the worst of them.
            let work = first.size.saturating_mul(first.size) / TRAVERSAL_DIVISOR;
            with(work, first.size, first.elem, first.shape)
        }
        _ => with(traversal, widest, inner, Shape::Any),
    }
}

#[cfg(test)]
mod tests;
