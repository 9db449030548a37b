//! Objects users apply (`examples/`, the default classes) validated against the definitions that serve them.
//!
//! Examples may bring their own XRDs and Compositions (a platform team's API built on ours): those are checked
//! like ours, except that their Compositions may call any function.

use crate::{
    manifest::{Manifest, Problem},
    package::{EXPECTED_KINDS, GROUP},
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
    for m in examples {
        if xrd::is_xrd(m) || xrd::is_crd(m) {
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
