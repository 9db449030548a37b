//! Every package's version ranges, checked against what the admitted releases accept (see
//! [`crate::dependencies`]) and against what the packages themselves need.

use std::{collections::BTreeMap, path::Path};

use serde_json::Value;

use crate::{
    composed,
    dependencies::{self, CROSSPLANE, Declared, Dependency, Vendored},
    manifest::{Manifest, Problem},
    meta,
    package::Repo,
    semver::{Constraint, Version},
    vendored::VENDORED_DIR,
};

/// The oldest Crossplane our function works with: it asks for required resources in `Requirements.resources`,
/// which Crossplane reads from v2.0 (1.17–1.20 read only the deprecated `extra_resources`).
pub const FUNCTION_NEEDS_CROSSPLANE: Version = Version(2, 0, 0);

/// One range a package declares, and whose it is.
struct Range<'a> {
    declared: Declared<'a>,
    /// Crossplane or a dependency whose CRDs we vendor; None for our own packages.
    vendored: Option<&'static Dependency>,
    /// The package reference (empty for Crossplane itself), for messages.
    package: &'a str,
}

fn ranges(meta: &Manifest) -> Vec<Range<'_>> {
    let mut out = Vec::new();
    let crossplane = meta.str_at(&["spec", "crossplane", "version"]);
    if !crossplane.is_empty() {
        out.push(Range {
            declared: Declared {
                meta,
                field: "spec.crossplane.version".into(),
                constraint: crossplane,
            },
            vendored: Some(&CROSSPLANE),
            package: "",
        });
    }
    let deps = meta.value.pointer("/spec/dependsOn").and_then(Value::as_array);
    for (i, dep) in deps.into_iter().flatten().enumerate() {
        let text = |key: &str| dep.get(key).and_then(Value::as_str).unwrap_or_default();
        let package = ["package", "provider", "function", "configuration"]
            .into_iter()
            .map(text)
            .find(|p| !p.is_empty())
            .unwrap_or_default();
        let (Some(constraint), false) = (dep.get("version").and_then(Value::as_str), package.is_empty())
        else {
            continue; // malformed entries are reported by meta::check
        };
        out.push(Range {
            declared: Declared {
                meta,
                field: format!("spec.dependsOn[{i}].version"),
                constraint,
            },
            vendored: dependencies::ALL
                .iter()
                .copied()
                .find(|d| d.package == Some(package)),
            package,
        });
    }
    out
}

/// Problems with every package's ranges; see [`crate::package::check`].
pub fn check(root: &Path, repo: &Repo) -> Vec<Problem> {
    let composites: Vec<&Manifest> = repo
        .examples
        .iter()
        .filter(|m| composed::is_our_composite(m))
        .collect();
    let (rendered, mut problems) = composed::render_all(root, &composites);
    // What the dependencies must accept: our XRDs, Compositions and policies, the objects users apply that a
    // dependency serves (a platform team's XRD and Composition), and everything the function composes.
    let objects: Vec<Manifest> = repo
        .configuration
        .objects
        .iter()
        .chain(&repo.activation)
        .chain(&repo.examples)
        .filter(|m| dependencies::serving(m.group()).is_some())
        .chain(&rendered)
        .cloned()
        .collect();
    if !root.join(VENDORED_DIR).is_dir() {
        problems.push(
            Problem::file(
                &root.join(VENDORED_DIR),
                "no vendored CRDs: dependency ranges are not checked",
            )
            .missing(),
        );
        return problems;
    }
    let groups: Vec<&str> = objects.iter().map(Manifest::group).collect();
    let mut vendored: BTreeMap<&str, Vendored> = BTreeMap::new();
    let needs = crossplane_needs(repo);
    // A platform team's package among the examples is checked for its ranges only: its objects are examples,
    // already validated against our Configuration's range.
    let platform = repo
        .examples
        .iter()
        .filter(|m| m.is(meta::META_V1, "Configuration"));
    let ours = repo
        .packages()
        .into_iter()
        .filter_map(|p| match p.meta.as_slice() {
            [meta] => Some(meta),
            _ => None, // reported by meta::check
        });
    for meta in ours.chain(platform) {
        let ours = !meta.file.starts_with(root.join("examples"));
        // Only the Configuration brings objects to check; the others' Crossplane ranges are checked for shape.
        let checked: &[Manifest] = if ours && meta.kind() == "Configuration" {
            &objects
        } else {
            &[]
        };
        for range in ranges(meta) {
            let Some(dependency) = range.vendored else {
                problems.extend(shape(&range.declared, range.package));
                continue;
            };
            let loaded = match vendored.entry(dependency.name) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    match Vendored::load(root, dependency, &groups) {
                        Ok(v) => e.insert(v),
                        Err(bad) => {
                            problems.extend(bad);
                            continue;
                        }
                    }
                }
            };
            problems.extend(dependencies::check_range(loaded, &range.declared, checked));
            if dependency.package.is_none() {
                problems.extend(at_least(&range.declared, &needs, meta.kind() == "Configuration"));
            }
        }
    }
    problems
}

/// A range of a package we do not vendor CRDs for (ours, or a platform package's function): well-formed,
/// satisfiable, capped.
fn shape(declared: &Declared, package: &str) -> Vec<Problem> {
    let problem = |message: String| {
        declared.meta.problem(
            &declared.field,
            format!("{package} {:?}: {message}", declared.constraint),
        )
    };
    match Constraint::parse(declared.constraint) {
        Err(e) => vec![problem(format!("not a semver constraint ({e})"))],
        Ok(c) if !c.is_satisfiable() => vec![problem("no version satisfies it".into())],
        Ok(c) => c.too_wide().map(problem).into_iter().collect(),
    }
}

/// The oldest Crossplane each of our packages needs, and why: the function's own need, and each of our packages'
/// declared lower bound (a Configuration cannot work on a Crossplane its dependencies refuse).
fn crossplane_needs(repo: &Repo) -> Vec<(Version, String)> {
    let mut needs = vec![(
        FUNCTION_NEEDS_CROSSPLANE,
        "the function asks for required resources in Requirements.resources, which Crossplane reads from v2.0".to_owned(),
    )];
    for package in [&repo.configuration, &repo.function, &repo.provider_eks] {
        let Some(meta) = package.meta.first() else {
            continue;
        };
        let constraint = meta.str_at(&["spec", "crossplane", "version"]);
        if let Some(lower) = Constraint::parse(constraint).ok().and_then(|c| c.lower_bound()) {
            needs.push((
                lower,
                format!(
                    "the {} package {} declares Crossplane {constraint:?}",
                    meta.kind(),
                    meta.name()
                ),
            ));
        }
    }
    needs
}

/// A Crossplane range must not admit a release older than what the packages need. The Function package is held
/// to the function's own need; the Configuration to every need (it installs them all).
fn at_least(declared: &Declared, needs: &[(Version, String)], configuration: bool) -> Vec<Problem> {
    let Some(lower) = Constraint::parse(declared.constraint)
        .ok()
        .and_then(|c| c.lower_bound())
    else {
        return Vec::new();
    };
    let is_function = declared.meta.kind() == "Function";
    needs
        .iter()
        .enumerate()
        .filter(|(i, _)| configuration || (is_function && *i == 0))
        .filter(|(_, (need, _))| lower < *need)
        .map(|(_, (need, why))| {
            declared.meta.problem(
                &declared.field,
                format!(
                    "Crossplane {:?} admits {lower}, but {why}: raise the lower bound to {need}",
                    declared.constraint
                ),
            )
        })
        .collect()
}
