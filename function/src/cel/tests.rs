use std::collections::HashMap;

use super::*;
use crate::limits::{Deadline, run_bounded};

fn refused(source: &str) -> String {
    let source = source.to_owned();
    run_bounded(Deadline::default(), move || compile(&source).map(|s| s.cost))
        .unwrap()
        .unwrap_err()
}

fn cost(source: &str) -> u64 {
    let source = source.to_owned();
    run_bounded(Deadline::default(), move || compile(&source).map(|s| s.cost))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A list literal of `n` small ints: the cheapest way to buy iterations with expression bytes.
fn list(n: usize) -> String {
    format!("[{}]", vec!["1"; n].join(","))
}

#[test]
fn selectors_over_the_size_limit_are_refused_unparsed() {
    let long = format!("device.driver == '{}'", "x".repeat(MAX_EXPRESSION_BYTES));
    assert_eq!(refused(&long), "is 10259 bytes; the limit is 10240");
}

#[test]
fn deep_brackets_are_refused_before_parsing() {
    let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
    assert_eq!(refused(&deep), "nests brackets 5000 deep; the limit is 64");
    // Brackets inside strings are text.
    assert!(cost(&format!("device.driver == '{}'", "[".repeat(500))) < 1_000);
}

#[test]
fn long_chains_are_refused_by_depth_after_parsing() {
    let chain = format!("device{} == 1", ".a".repeat(3000));
    assert_eq!(refused(&chain), "nests 3002 deep; the limit is 250");
    let sum = format!("{} == 1", vec!["1"; 2000].join(" + "));
    assert!(refused(&sum).starts_with("nests "), "{}", refused(&sum));
    let ternary = format!("{}true", "true ? true : ".repeat(500));
    assert!(
        refused(&ternary).starts_with("does not compile"),
        "{}",
        refused(&ternary)
    );
    // Runs of negations fold while parsing, so they cost nothing.
    assert!(cost(&format!("{}1 == 1", "-".repeat(3000))) < 10);
}

#[test]
fn nested_loops_over_the_cost_limit_are_refused() {
    // The issue's 10^10 iterations in 424 characters.
    let l = list(100);
    let nested = format!("{l}.all(a, {l}.all(b, {l}.all(c, {l}.all(d, {l}.all(e, a == e)))))");
    assert!(refused(&nested).starts_with("is estimated to cost"));
    let ranges = "lists.range(100000).all(a, lists.range(100000).all(b, a == b))";
    assert!(refused(ranges).starts_with("is estimated to cost"));
    assert!(
        refused("lists.range(size(device.driver) * 1000000000).size() > 0")
            .starts_with("is estimated to cost")
    );
    // Quadratic growth through a map's accumulator.
    let grow = format!("{}.map(x, {}).size() > 0", list(2000), list(2000));
    assert!(refused(&grow).starts_with("is estimated to cost"));
}

#[test]
fn ordinary_selectors_cost_little() {
    for source in [
        r#"device.driver == "gpu.nvidia.com""#,
        r#"device.attributes["gpu.nvidia.com"].productName.lowerAscii().contains("h200")"#,
        r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0"#,
        r#"device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))"#,
        r#"device.attributes["gpu.nvidia.com"].all(k, k.size() < 64)"#,
        r#"["a", "b"].exists(x, x == device.driver)"#,
    ] {
        assert!(cost(source) < 1_000, "{source}: {}", cost(source));
    }
}

#[test]
fn names_a_selector_cannot_see_are_refused() {
    assert_eq!(
        refused("gpu.memory > 1"),
        "names \"gpu\", but a selector sees only `device`"
    );
    assert!(refused("Foo{a: 1} == device").starts_with("builds a message"));
    assert!(refused("device.driver == ").starts_with("does not compile"));
}

#[test]
fn parse_errors_are_cut_short() {
    let broken = format!("{}1 +", "(".repeat(60));
    assert!(refused(&broken).len() < 600);
}

fn device_context() -> Context<'static> {
    let mut context = Context::default();
    let attributes = HashMap::from([("model".to_owned(), Value::from("h200".to_owned()))]);
    let device = HashMap::from([
        ("driver".to_owned(), Value::from("gpu.nvidia.com".to_owned())),
        (
            "attributes".to_owned(),
            Value::from(HashMap::from([(
                "gpu.nvidia.com".to_owned(),
                Value::from(attributes),
            )])),
        ),
    ]);
    context.add_variable_from_value("device", Value::from(device));
    context
}

fn evaluate(source: &str) -> Result<(), Mismatch> {
    compile(source).unwrap().matches(&device_context())
}

#[test]
fn runtime_errors_are_errors_and_missing_attributes_are_misses() {
    assert_eq!(evaluate(r#"device.driver == "gpu.nvidia.com""#), Ok(()));
    assert_eq!(
        evaluate(r#"device.driver == "x""#),
        Err(Mismatch::No("is false".into()))
    );
    assert!(matches!(
        evaluate(r#"device.attributes["gpu.nvidia.com"].nvlink"#),
        Err(Mismatch::No(why)) if why.contains("nvlink")
    ));
    assert!(matches!(evaluate("device.driver"), Err(Mismatch::Error(why)) if why.contains("not a bool")));
    assert!(matches!(
        evaluate("device.driver + 1 == 2"),
        Err(Mismatch::Error(_))
    ));
    assert!(matches!(
        evaluate(r#"quantity("eight").isInteger()"#),
        Err(Mismatch::Error(_))
    ));
}

#[test]
fn the_worst_accepted_shapes_parse_evaluate_and_drop_on_the_call_stack() {
    // Maximal expressions at the depth and nesting limits, run the way a call runs them.
    let chain = format!("device{} == 1", ".a".repeat(MAX_DEPTH - 3));
    let brackets = format!(
        "{}{}{} == [1]",
        "[".repeat(MAX_NESTING),
        "1",
        "]".repeat(MAX_NESTING)
    );
    for source in [chain, brackets] {
        let outcome = run_bounded(Deadline::default(), move || {
            compile(&source).map(|s| s.matches(&device_context()).is_ok())
        });
        assert!(outcome.is_some());
    }
}
