//! What of `self` a rule can read, worked out once from its parsed expression, so that only that part of the
//! object is converted to CEL when the rule runs.
//!
//! The cel crate copies a value deeply wherever a rule selects a field of it, passes it to a function or binds
//! it to a comprehension's variable. A rule on an engine that reads its members' roles would otherwise copy
//! every member's containers, env and args several times over. The analysis is conservative: a value used in
//! any way other than selecting a field, indexing by a constant, counting it (`size`) or iterating over it is
//! needed whole, and an expression it does not know makes whatever it touches needed whole.

use std::collections::BTreeMap;

use kube_cel::cel::{
    IdedExpr,
    common::ast::{ComprehensionExpr, EntryExpr, Expr, LiteralValue, MapExpr, StructExpr, operators},
};

/// The part of a value a rule needs. Lists always keep their length (each item pruned to `items`, or a
/// placeholder no rule reads); maps keep the fields named in `fields`, plus every key when `keys` is set.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Need {
    /// The value as it is, all of it.
    pub whole: bool,
    /// Every key of a map (counted, iterated over or looked up by a computed key).
    pub keys: bool,
    /// By the name CEL spells: escaped for an object's fields, as written for a map's keys.
    pub fields: BTreeMap<String, Need>,
    /// What is needed of every item of a list, or of every value of a map iterated over.
    pub items: Option<Box<Need>>,
}

/// One step from a value to a part of it.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Item,
}

/// Where an expression's value comes from, as far as the analysis can tell.
#[derive(Debug, Clone)]
enum Origin {
    /// Exactly the part of `self` at this path.
    SelfAt(Vec<Step>),
    /// Anything else: a literal, a computed value.
    Other,
}

impl Need {
    /// What `rules` (their expressions, all run with the same `self`) need of it, or `None` if they need it
    /// whole.
    pub fn of<'a>(rules: impl IntoIterator<Item = &'a IdedExpr>) -> Option<Need> {
        let mut need = Need::default();
        for rule in rules {
            let mut scope = vec![("self".to_owned(), Origin::SelfAt(Vec::new()))];
            // What a rule (or its message) evaluates to is read too: `self.enabled` is a whole rule.
            let result = visit(rule, &mut scope, &mut need);
            used(result, &mut need);
        }
        need.normalize();
        (!need.whole).then_some(need)
    }

    /// The need of the value at `path`, created where missing. A whole value's parts are whole, so the walk
    /// stops at the first whole step.
    fn at(&mut self, path: &[Step]) -> Option<&mut Need> {
        let mut here = self;
        for step in path {
            if here.whole {
                return None;
            }
            here = match step {
                Step::Field(name) => here.fields.entry(name.clone()).or_default(),
                Step::Item => here.items.get_or_insert_with(Box::default),
            };
        }
        (!here.whole).then_some(here)
    }

    fn mark_whole(&mut self, path: &[Step]) {
        if let Some(need) = self.at(path) {
            *need = Need {
                whole: true,
                ..Need::default()
            };
        }
    }

    fn merge(&mut self, other: &Need) {
        if self.whole {
            return;
        }
        if other.whole {
            *self = other.clone();
            return;
        }
        self.keys |= other.keys;
        for (name, need) in &other.fields {
            self.fields.entry(name.clone()).or_default().merge(need);
        }
        if let Some(items) = &other.items {
            self.items.get_or_insert_with(Box::default).merge(items);
        }
    }

    /// Folds `items` into every named field (a map iterated over is read through its items too), and collapses
    /// what holds nothing but whole parts into whole.
    fn normalize(&mut self) {
        if self.whole {
            self.keys = false;
            self.fields.clear();
            self.items = None;
            return;
        }
        if let Some(items) = self.items.as_deref_mut() {
            items.normalize();
            // Every item or value whole, and a list keeps all its items: the same as all of it.
            if items.whole {
                *self = Need {
                    whole: true,
                    ..Need::default()
                };
                return;
            }
        }
        if let Some(items) = self.items.clone() {
            for need in self.fields.values_mut() {
                need.merge(&items);
            }
        }
        for need in self.fields.values_mut() {
            need.normalize();
        }
    }

    /// What is needed of the field or key `name` of a map or object, or `None` if nothing is (it is left out).
    pub fn field(&self, name: &str) -> Option<&Need> {
        self.fields.get(name).or(self.items.as_deref())
    }
}

/// Records in `need` what evaluating `expr` reads of `self`, and returns where its value comes from. A value
/// whose origin is returned is not marked: the caller decides how it is used.
fn visit(expr: &IdedExpr, scope: &mut Vec<(String, Origin)>, need: &mut Need) -> Origin {
    match &expr.expr {
        Expr::Ident(name) => scope
            .iter()
            .rev()
            .find(|(bound, _)| bound == name)
            .map_or(Origin::Other, |(_, origin)| origin.clone()),
        Expr::Select(select) => match visit(&select.operand, scope, need) {
            Origin::SelfAt(mut path) => {
                path.push(Step::Field(select.field.clone()));
                if select.test {
                    // `has()` needs the key to be there, not its value: mark the field present, prune its value.
                    need.at(&path);
                    Origin::Other
                } else {
                    Origin::SelfAt(path)
                }
            }
            Origin::Other => Origin::Other,
        },
        Expr::Call(call) => {
            let argument = |i: usize| call.args.get(i);
            match (call.func_name.as_str(), call.target.as_deref(), call.args.len()) {
                (operators::INDEX, None, 2) => {
                    let (Some(operand), Some(index)) = (argument(0), argument(1)) else {
                        return Origin::Other;
                    };
                    let origin = visit(operand, scope, need);
                    let step = match &index.expr {
                        Expr::Literal(LiteralValue::Int(_) | LiteralValue::UInt(_)) => Some(Step::Item),
                        Expr::Literal(LiteralValue::String(key)) => {
                            Some(Step::Field(key.inner().to_string()))
                        }
                        _ => None,
                    };
                    match (origin, step) {
                        (Origin::SelfAt(mut path), Some(step)) => {
                            path.push(step);
                            Origin::SelfAt(path)
                        }
                        (origin, _) => {
                            used(origin, need);
                            used(visit(index, scope, need), need);
                            Origin::Other
                        }
                    }
                }
                ("size", None, 1) | ("size", Some(_), 0) => {
                    let counted = call.target.as_deref().or(argument(0));
                    if let Some(counted) = counted
                        && let Origin::SelfAt(path) = visit(counted, scope, need)
                        && let Some(counted) = need.at(&path)
                    {
                        counted.keys = true;
                    }
                    Origin::Other
                }
                _ => {
                    for part in call.target.as_deref().into_iter().chain(&call.args) {
                        used(visit(part, scope, need), need);
                    }
                    Origin::Other
                }
            }
        }
        Expr::Comprehension(comprehension) => comprehend(comprehension, scope, need),
        Expr::List(list) => {
            for element in &list.elements {
                used(visit(element, scope, need), need);
            }
            Origin::Other
        }
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => {
            for entry in entries {
                match &entry.expr {
                    EntryExpr::MapEntry(e) => {
                        used(visit(&e.key, scope, need), need);
                        used(visit(&e.value, scope, need), need);
                    }
                    EntryExpr::StructField(f) => used(visit(&f.value, scope, need), need),
                }
            }
            Origin::Other
        }
        Expr::Literal(_) | Expr::Unspecified => Origin::Other,
    }
}

/// A macro's loop over a list (its variable is each item) or a map (its variable is each key).
fn comprehend(c: &ComprehensionExpr, scope: &mut Vec<(String, Origin)>, need: &mut Need) -> Origin {
    let range = visit(&c.iter_range, scope, need);
    let item = match (&range, &c.iter_var2) {
        (Origin::SelfAt(path), None) => {
            if let Some(range) = need.at(path) {
                range.keys = true;
            }
            let mut item = path.clone();
            item.push(Step::Item);
            Origin::SelfAt(item)
        }
        // Two variables (index and value, or key and value): not followed, the range is needed whole.
        (origin, _) => {
            used(origin.clone(), need);
            Origin::Other
        }
    };
    used(visit(&c.accu_init, scope, need), need);
    let depth = scope.len();
    scope.push((c.accu_var.clone(), Origin::Other));
    scope.push((c.iter_var.clone(), item));
    if let Some(second) = &c.iter_var2 {
        scope.push((second.clone(), Origin::Other));
    }
    for part in [&c.loop_cond, &c.loop_step] {
        used(visit(part, scope, need), need);
    }
    scope.truncate(depth);
    scope.push((c.accu_var.clone(), Origin::Other));
    used(visit(&c.result, scope, need), need);
    scope.truncate(depth);
    Origin::Other
}

/// A value used as it is (compared, passed to a function, put in a list): all of it is needed.
fn used(origin: Origin, need: &mut Need) {
    if let Origin::SelfAt(path) = origin {
        need.mark_whole(&path);
    }
}

#[cfg(test)]
mod tests {
    use kube_cel::cel::Program;

    use super::*;

    fn need(rules: &[&str]) -> Option<Need> {
        let programs: Vec<Program> = rules.iter().map(|r| Program::compile(r).unwrap()).collect();
        Need::of(programs.iter().map(Program::expression))
    }

    fn fields(need: &Need) -> Vec<&str> {
        need.fields.keys().map(String::as_str).collect()
    }

    #[test]
    fn selecting_fields_needs_only_those_fields() {
        let need = need(&["self.role != 'Worker' || has(self.worker)"]).unwrap();
        assert_eq!(fields(&need), ["role", "worker"]);
        assert!(need.fields["role"].whole);
        assert!(!need.fields["worker"].whole, "has() needs the key, not the value");
    }

    #[test]
    fn a_rule_that_is_a_field_needs_that_field() {
        let need = need(&["self.spec.enabled", "self.name"]).unwrap();
        assert_eq!(fields(&need), ["name", "spec"]);
        assert!(need.fields["name"].whole && need.fields["spec"].fields["enabled"].whole);
    }

    #[test]
    fn a_loop_needs_of_each_item_what_its_body_reads() {
        let need = need(&["self.members.exists(m, has(m.nodeSelector) && size(m.nodeSelector.devices) > 0)"])
            .unwrap();
        let members = &need.fields["members"];
        let item = members.items.as_deref().unwrap();
        assert_eq!(fields(item), ["nodeSelector"]);
        let devices = &item.fields["nodeSelector"].fields["devices"];
        assert!(devices.keys && !devices.whole, "size() counts, it does not read");
    }

    #[test]
    fn a_value_used_as_it_is_is_needed_whole() {
        assert_eq!(need(&["self == oldSelf"]), None);
        assert_eq!(need(&["self.all(k, !k.startsWith('modelplane.ai/'))"]), None);
        let compared = need(&["self.spec.x == 1", "has(self.spec) && self.spec == {}"]).unwrap();
        assert!(compared.fields["spec"].whole);
        let need = need(&["quantity(self.memory).isGreaterThan(quantity('1Gi'))"]).unwrap();
        assert!(need.fields["memory"].whole);
    }

    #[test]
    fn a_computed_index_needs_the_whole_list() {
        let need = need(&["self.items[self.at] == 'x'"]).unwrap();
        assert!(need.fields["items"].whole && need.fields["at"].whole);
        let need = super::tests::need(&["self.items[0].name == 'x'"]).unwrap();
        assert!(need.fields["items"].items.as_deref().unwrap().fields["name"].whole);
    }

    #[test]
    fn a_shadowing_loop_variable_is_not_self() {
        let need = need(&["self.xs.all(self, self > 0) && self.n == 1"]).unwrap();
        assert_eq!(fields(&need), ["n", "xs"]);
        assert!(need.fields["xs"].whole, "every item compared: the whole list");
    }
}
