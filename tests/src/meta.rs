//! Package metadata (`crossplane.yaml`): the one `meta.pkg.crossplane.io` object at a package's root.

use serde_json::Value;

use crate::manifest::{Manifest, Problem};

pub const META_V1: &str = "meta.pkg.crossplane.io/v1";
pub const META_V1BETA1: &str = "meta.pkg.crossplane.io/v1beta1";
/// Annotations Crossplane's and Upbound's tools show for a package.
pub const REQUIRED_ANNOTATIONS: &[&str] = &[
    "meta.crossplane.io/maintainer",
    "meta.crossplane.io/source",
    "meta.crossplane.io/license",
    "meta.crossplane.io/description",
];
const DEPENDENCY_KINDS: &[&str] = &["Provider", "Function", "Configuration"];

/// The capabilities Crossplane acts on, per package kind (`pkg/meta/v1`): a Function is used in Compositions
/// and/or Operations, a Provider may start safely (inactive ManagedResourceDefinitions). Anything else is ignored
/// by Crossplane, so declaring it is a mistake (a misspelt `SafeStart` leaves every kind active).
pub fn known_capabilities(kind: &str) -> &'static [&'static str] {
    match kind {
        "Function" => &["composition", "operation"],
        "Provider" => &["safe-start"],
        _ => &[],
    }
}
/// The pre-v2 dependency form names the package under its kind.
const LEGACY_DEPENDENCY_KEYS: &[&str] = &["provider", "function", "configuration"];

/// What a package of one kind must declare.
pub struct Expect<'a> {
    pub kind: &'a str,
    pub capabilities: &'a [&'a str],
    /// Package references (without tag) the package must depend on.
    pub depends_on: &'a [&'a str],
}

/// Checks the metadata object; `metas` is everything the package's `crossplane.yaml` holds.
pub fn check(metas: &[Manifest], expect: &Expect) -> Vec<Problem> {
    let [meta] = metas else {
        let file = metas.first().map(|m| m.file.clone()).unwrap_or_default();
        return vec![Problem::file(
            &file,
            format!(
                "crossplane.yaml must hold exactly one {} object, found {}",
                expect.kind,
                metas.len()
            ),
        )];
    };
    let mut problems = Vec::new();
    let allowed_versions: &[&str] = if expect.kind == "Function" {
        &[META_V1, META_V1BETA1]
    } else {
        &[META_V1]
    };
    if !allowed_versions.contains(&meta.api_version()) || meta.kind() != expect.kind {
        problems.push(meta.problem("kind", format!("must be {META_V1} {}", expect.kind)));
    }
    for annotation in REQUIRED_ANNOTATIONS {
        if meta
            .value
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(annotation))
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            problems.push(meta.problem(format!("metadata.annotations.{annotation}"), "required"));
        }
    }
    let constraint = meta.str_at(&["spec", "crossplane", "version"]);
    if expect.kind != "Function" && constraint.is_empty() {
        problems.push(meta.problem(
            "spec.crossplane.version",
            "required: say which Crossplane versions this package works with",
        ));
    } else if !constraint.is_empty() && !is_constraint(constraint) {
        problems.push(meta.problem(
            "spec.crossplane.version",
            format!("{constraint:?} is not a semver constraint"),
        ));
    }
    let declared: Vec<String> = meta
        .value
        .pointer("/spec/capabilities")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(normalize)
        .collect();
    let known = known_capabilities(expect.kind);
    for (i, capability) in declared.iter().enumerate() {
        if !known.iter().any(|k| normalize(k) == *capability) {
            let names = if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            };
            problems.push(meta.problem(
                format!("spec.capabilities[{i}]"),
                format!(
                    "{capability:?} is not a capability Crossplane knows for a {} (known: {names})",
                    expect.kind
                ),
            ));
        }
    }
    for capability in expect.capabilities {
        if !declared.contains(&normalize(capability)) {
            problems.push(meta.problem("spec.capabilities", format!("must include {capability}")));
        }
    }
    let deps = meta
        .value
        .pointer("/spec/dependsOn")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut packages = Vec::new();
    for (i, dep) in deps.iter().enumerate() {
        match dependency(dep) {
            Ok(package) => packages.push(package),
            Err((field, message)) => {
                problems.push(meta.problem(format!("spec.dependsOn[{i}]{field}"), message))
            }
        }
    }
    for wanted in expect.depends_on {
        if !packages.iter().any(|p| p == wanted) {
            problems.push(meta.problem("spec.dependsOn", format!("must depend on {wanted}")));
        }
    }
    problems
}

/// Crossplane compares capabilities ignoring case and anything that is not a letter or digit.
fn normalize(capability: &str) -> String {
    capability
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Checks one `dependsOn` entry (current or legacy form) and returns its package reference.
fn dependency(dep: &Value) -> Result<String, (String, String)> {
    let field = |key: &str| dep.get(key).and_then(Value::as_str).unwrap_or_default();
    let legacy = LEGACY_DEPENDENCY_KEYS.iter().find(|k| dep.get(**k).is_some());
    let package = match legacy {
        Some(key) => field(key),
        None => {
            if field("apiVersion") != "pkg.crossplane.io/v1" || !DEPENDENCY_KINDS.contains(&field("kind")) {
                return Err((String::new(), "needs apiVersion pkg.crossplane.io/v1 and kind Provider, Function or Configuration (or the legacy provider:/function:/configuration: form)".into()));
            }
            field("package")
        }
    };
    let at = format!(".{}", legacy.copied().unwrap_or("package"));
    if !is_fully_qualified(package) {
        return Err((
            at,
            format!(
                "{package:?} must be a fully qualified reference (registry/org/name); Crossplane v2 has no default registry"
            ),
        ));
    }
    if package.contains('@') || package.rsplit('/').next().is_some_and(|last| last.contains(':')) {
        return Err((at, "give the version in `version`, not in the reference".into()));
    }
    let version = field("version");
    if !is_constraint(version) {
        return Err((
            ".version".into(),
            format!("{version:?} is not a semver constraint"),
        ));
    }
    Ok(package.to_owned())
}

fn is_fully_qualified(package: &str) -> bool {
    let mut parts = package.split('/');
    let host = parts.next().unwrap_or_default();
    (host.contains('.') || host.contains(':') || host == "localhost")
        && parts.next().is_some_and(|p| !p.is_empty())
}

/// The name Crossplane gives a package it installs as a dependency: the repository path without the registry
/// host, as a DNS label (`ghcr.io/modelplaneai/function-modelplane` → `modelplaneai-function-modelplane`).
/// Compositions must call a dependency Function by this name.
pub fn dependency_object_name(package: &str) -> String {
    let path = package.split_once('/').map_or(package, |(_, path)| path);
    path.replace(['/', '.', '_'], "-").to_ascii_lowercase()
}

/// Accepts Masterminds/semver constraints as Crossplane uses them (see [`crate::semver`]).
pub fn is_constraint(constraint: &str) -> bool {
    crate::semver::Constraint::parse(constraint).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn configuration(deps: Value) -> Vec<Manifest> {
        vec![Manifest::new(
            "crossplane.yaml",
            0,
            json!({
            "apiVersion": META_V1, "kind": "Configuration",
            "metadata": {"name": "c", "annotations": {
                "meta.crossplane.io/maintainer": "m", "meta.crossplane.io/source": "s",
                "meta.crossplane.io/license": "Apache-2.0", "meta.crossplane.io/description": "d"}},
            "spec": {"crossplane": {"version": ">=v2.0.0-0"}, "dependsOn": deps}}),
        )]
    }

    const EXPECT: Expect = Expect {
        kind: "Configuration",
        capabilities: &[],
        depends_on: &["ghcr.io/o/provider-eks"],
    };

    #[test]
    fn current_and_legacy_dependencies_are_accepted() {
        let deps = json!([{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "package": "ghcr.io/o/provider-eks", "version": ">=v0.1.0"},
                          {"function": "xpkg.crossplane.io/crossplane-contrib/function-auto-ready", "version": "v0.5.x"}]);
        assert_eq!(check(&configuration(deps), &EXPECT), []);
    }

    #[test]
    fn short_references_tags_and_bad_constraints_are_rejected() {
        let deps = json!([{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "package": "o/provider-eks", "version": ">=v0.1.0"},
                          {"provider": "ghcr.io/o/provider-eks:v0.1.0", "version": ">=v0.1.0"},
                          {"provider": "ghcr.io/o/provider-eks", "version": "latest"}]);
        let fields: Vec<String> = check(&configuration(deps), &EXPECT)
            .into_iter()
            .map(|p| p.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.dependsOn[0].package",
                "spec.dependsOn[1].provider",
                "spec.dependsOn[2].version",
                "spec.dependsOn"
            ]
        );
    }

    #[test]
    fn capabilities_match_the_way_crossplane_matches_them() {
        let mut metas = configuration(json!([]));
        metas[0].value["kind"] = json!("Provider");
        metas[0].value["spec"]["capabilities"] = json!(["safe-start"]);
        let expect = Expect {
            kind: "Provider",
            capabilities: &["SafeStart"],
            depends_on: &[],
        };
        assert_eq!(check(&metas, &expect), []);
        metas[0].value["spec"]["capabilities"] = json!(["Safe_Start"]);
        assert_eq!(check(&metas, &expect), []);
        metas[0].value["spec"]["capabilities"] = json!([]);
        assert_eq!(check(&metas, &expect)[0].message, "must include SafeStart");
    }

    #[test]
    fn a_capability_crossplane_does_not_know_for_the_kind_is_named() {
        let mut metas = configuration(json!([]));
        metas[0].value["kind"] = json!("Provider");
        metas[0].value["spec"]["capabilities"] = json!(["SafeStart", "composition"]);
        let expect = Expect {
            kind: "Provider",
            capabilities: &["SafeStart"],
            depends_on: &[],
        };
        let found = check(&metas, &expect);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].field, "spec.capabilities[1]");
        assert!(
            found[0].message.contains("known: safe-start"),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn missing_annotations_and_two_metas_are_problems() {
        let mut metas = configuration(json!([]));
        metas[0].value["metadata"]["annotations"] = json!({});
        assert_eq!(
            check(
                &metas,
                &Expect {
                    kind: "Configuration",
                    capabilities: &[],
                    depends_on: &[]
                }
            )
            .len(),
            4
        );
        metas.push(metas[0].clone());
        assert!(check(&metas, &EXPECT)[0].message.contains("exactly one"));
    }

    #[test]
    fn dependency_names_drop_the_registry_host() {
        assert_eq!(
            dependency_object_name("ghcr.io/modelplaneai/function-modelplane"),
            "modelplaneai-function-modelplane"
        );
    }

    #[test]
    fn constraints() {
        for ok in [
            ">=v2.0.0-0",
            ">= 1.2.3, < 2.0.0",
            "v0.5.x",
            "~1.2",
            "^1.0.0 || >=2.1",
        ] {
            assert!(is_constraint(ok), "{ok}");
        }
        for bad in ["", "latest", ">=v2.a", "1.2.3.4"] {
            assert!(!is_constraint(bad), "{bad}");
        }
    }
}
