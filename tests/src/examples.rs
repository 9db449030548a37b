//! Objects users apply (`examples/`, the default classes) validated against the definitions that serve them.
//!
//! Examples may bring their own XRDs and Compositions (a platform team's API built on ours): those are checked
//! like ours, except that their Compositions may call any function.

use serde_json::Value;

use crate::{
    manifest::{Manifest, Problem},
    meta::{self, Expect},
    package::{CONFIGURATION_PACKAGE, EXPECTED_KINDS, GROUP},
    xrd::{self, Definition},
};

/// Validates `examples` against `definitions` (the Configuration's XRDs and the providers' CRDs).
pub fn check(examples: &[Manifest], definitions: &[Definition], problems: &mut Vec<Problem>) {
    let own: Vec<Definition> = examples
        .iter()
        .filter(|m| xrd::is_xrd(m) || xrd::is_crd(m))
        .filter_map(|m| xrd::definition(m, problems))
        .collect();
    let all: Vec<&Definition> = definitions.iter().chain(&own).collect();
    for package in examples.iter().filter(|m| m.is(meta::META_V1, "Configuration")) {
        platform_package(package, examples, problems);
    }
    for m in examples {
        if xrd::is_xrd(m) || xrd::is_crd(m) || m.api_version().starts_with("meta.pkg.crossplane.io/") {
            continue;
        }
        if m.kind() == "Composition" {
            problems.extend(xrd::composition(m, &all, None));
            continue;
        }
        let (api_version, kind) = (m.api_version(), m.kind());
        let Some(schema) = all.iter().find_map(|d| d.serves(api_version, kind)) else {
            if m.group() == GROUP && EXPECTED_KINDS.contains(&kind) {
                problems.push(
                    m.problem(
                        "kind",
                        format!("no XRD serves {api_version} {kind} yet; not validated"),
                    )
                    .missing(),
                );
            } else if all.iter().any(|d| d.defines_kind(m.group(), kind)) {
                problems.push(m.problem(
                    "apiVersion",
                    format!("{api_version} is not a served version of {kind}"),
                ));
            }
            continue;
        };
        let Some(schema) = schema else {
            continue; // the definition's own schema is broken and already reported
        };
        if m.name().is_empty() {
            problems.push(m.problem("metadata.name", "required"));
        }
        problems.extend(
            schema
                .validate(&m.value)
                .into_iter()
                .map(|(field, message)| m.problem(field, message)),
        );
    }
}

/// A platform team's package among the examples (its `crossplane.yaml`): valid metadata depending on our
/// Configuration, and every Composition step beside it calling a Function the package depends on, by the name
/// Crossplane gives that dependency.
fn platform_package(package: &Manifest, examples: &[Manifest], problems: &mut Vec<Problem>) {
    let expect = Expect {
        kind: "Configuration",
        capabilities: &[],
        depends_on: &[CONFIGURATION_PACKAGE],
    };
    problems.extend(meta::check(std::slice::from_ref(package), &expect));
    let functions: Vec<String> = package
        .value
        .pointer("/spec/dependsOn")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|dep| match dep.get("kind").and_then(Value::as_str) {
            Some("Function") => dep.get("package").and_then(Value::as_str),
            _ => dep.get("function").and_then(Value::as_str),
        })
        .map(meta::dependency_object_name)
        .collect();
    let folder = package.file.parent();
    for composition in examples
        .iter()
        .filter(|m| m.kind() == "Composition" && m.file.parent() == folder)
    {
        let steps = composition
            .value
            .pointer("/spec/pipeline")
            .and_then(Value::as_array);
        for (i, step) in steps.into_iter().flatten().enumerate() {
            let called = step
                .pointer("/functionRef/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !functions.iter().any(|f| f == called) {
                problems.push(composition.problem(
                    format!("spec.pipeline[{i}].functionRef.name"),
                    format!(
                        "{called:?} is not a Function {} depends on (it depends on: {})",
                        package.file.display(),
                        functions.join(", ")
                    ),
                ));
            }
        }
    }
}
