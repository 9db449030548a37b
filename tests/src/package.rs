//! The Crossplane packages this repository ships, assembled and checked without a cluster.
//!
//! `build` writes each package's `package.yaml` stream (what `crossplane xpkg build` puts in the package
//! image's base layer: the meta object first, then its XRDs and Compositions, or CRDs). `check` finds everything
//! that would stop the packages installing or the examples applying: see [`check`].

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{
    manifest::{self, Manifest, Problem},
    meta::{self, Expect},
    xrd::{self, Definition},
};

/// The Configuration's own package, which a platform team's Configuration depends on.
pub const CONFIGURATION_PACKAGE: &str = "ghcr.io/modelplaneai/modelplane";
pub const FUNCTION_PACKAGE: &str = "ghcr.io/modelplaneai/function-modelplane";
pub const PROVIDER_EKS_PACKAGE: &str = "ghcr.io/modelplaneai/provider-eks";
pub const PROVIDER_KUBERNETES_PACKAGE: &str = "xpkg.crossplane.io/crossplane-contrib/provider-kubernetes";
pub const PROVIDER_HELM_PACKAGE: &str = "xpkg.crossplane.io/crossplane-contrib/provider-helm";
const CONFIGURATION_DEPENDENCIES: &[&str] = &[
    FUNCTION_PACKAGE,
    PROVIDER_EKS_PACKAGE,
    PROVIDER_KUBERNETES_PACKAGE,
    PROVIDER_HELM_PACKAGE,
];

/// API group of Modelplane's XRs, and the kinds the Configuration is meant to define. A kind whose XRD has not
/// been written yet is reported as missing (an error only under `--strict`), anything else wrong is an error.
pub const GROUP: &str = "modelplane.ai";
pub const EXPECTED_KINDS: &[&str] = &[
    "InferenceClass",
    "InferenceCluster",
    "InferenceGateway",
    "ModelDeployment",
    "ModelCache",
    "ModelEndpoint",
    "ModelService",
];

pub const MRAP_API: &str = "apiextensions.crossplane.io/v1alpha1";
/// provider-eks's managed resources; only an EKS InferenceCluster may activate them (SafeStart).
const PROVIDER_EKS_MRD_SUFFIX: &str = ".eks.m.modelplane.ai";

/// The name Compositions must call our function by: the name Crossplane gives it when it installs it as the
/// Configuration's dependency.
pub fn function_name() -> String {
    meta::dependency_object_name(FUNCTION_PACKAGE)
}

/// One package: its metadata and the objects that follow it in `package.yaml`.
pub struct Package {
    pub name: &'static str,
    pub meta: Vec<Manifest>,
    pub objects: Vec<Manifest>,
}

impl Package {
    /// The `package.yaml` YAML stream.
    pub fn stream(&self) -> Result<String, Problem> {
        let mut out = String::new();
        for m in self.meta.iter().chain(&self.objects) {
            let yaml = serde_yaml::to_string(&m.value)
                .map_err(|e| m.problem("", format!("cannot write YAML: {e}")))?;
            out.push_str("---\n");
            out.push_str(&yaml);
        }
        Ok(out)
    }
}

/// Everything the checks read, loaded from a repository root.
pub struct Repo {
    pub configuration: Package,
    pub function: Package,
    pub provider_eks: Package,
    /// `examples/` and the default classes: objects users apply.
    pub examples: Vec<Manifest>,
    pub activation: Vec<Manifest>,
    pub problems: Vec<Problem>,
}

impl Repo {
    pub fn load(root: &Path) -> Self {
        let mut problems = Vec::new();
        let pkg = root.join("package");
        let mut read_meta = |dir: &str| {
            manifest::load_file(&pkg.join(dir).join("crossplane.yaml")).unwrap_or_else(|p| {
                problems.push(p);
                Vec::new()
            })
        };
        let metas = ["configuration", "function", "provider-eks"].map(&mut read_meta);
        let mut read_dirs = |dirs: &[PathBuf]| {
            dirs.iter()
                .flat_map(|d| {
                    let (found, bad) = manifest::load_dir(d);
                    problems.extend(bad);
                    found
                })
                .collect::<Vec<_>>()
        };
        let config_dir = pkg.join("configuration");
        let config_objects = read_dirs(&[config_dir.join("xrds"), config_dir.join("compositions")]);
        let function_objects = read_dirs(&[pkg.join("function/crds")]);
        let provider_objects = read_dirs(&[pkg.join("provider-eks/crds")]);
        let examples = read_dirs(&[root.join("examples"), config_dir.join("classes")]);
        let activation = read_dirs(&[config_dir.join("activation")]);
        let [config_meta, function_meta, provider_meta] = metas;
        Self {
            configuration: Package {
                name: "configuration",
                meta: config_meta,
                objects: config_objects,
            },
            function: Package {
                name: "function",
                meta: function_meta,
                objects: function_objects,
            },
            provider_eks: Package {
                name: "provider-eks",
                meta: provider_meta,
                objects: provider_objects,
            },
            examples,
            activation,
            problems,
        }
    }

    pub fn packages(&self) -> [&Package; 3] {
        [&self.configuration, &self.function, &self.provider_eks]
    }
}

/// Writes `<out>/<package>/package.yaml` for every package and returns the files written.
pub fn build(root: &Path, out: &Path) -> Result<Vec<PathBuf>, Vec<Problem>> {
    let repo = Repo::load(root);
    if !repo.problems.is_empty() {
        return Err(repo.problems);
    }
    let mut written = Vec::new();
    for package in repo.packages() {
        let stream = package.stream().map_err(|p| vec![p])?;
        let dir = out.join(package.name);
        let file = dir.join("package.yaml");
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&file, stream))
            .map_err(|e| vec![Problem::file(&file, format!("cannot write: {e}"))])?;
        written.push(file);
    }
    Ok(written)
}

/// Every problem with the packages and examples under `root`:
/// * every object parses, and each package's `crossplane.yaml` is one valid meta object with its capabilities
///   and dependencies;
/// * each package holds only what Crossplane accepts in it;
/// * every XRD and CRD schema is structural and every CEL rule compiles (kube-cel);
/// * every Composition targets an XRD of its package, runs our function in every step, and every XRD has one;
/// * every example whose kind has a definition validates against it (schema, unknown fields, CEL);
/// * the default activation policies leave provider-eks's kinds inactive;
/// * every dependency range is satisfiable, capped below the next major, and what it admits accepts our objects:
///   the XRDs, Compositions and policies, and everything the function composes for the examples, validated against
///   the vendored CRDs of the oldest allowed and every vendored newer release (see [`crate::ranges`]).
pub fn check(root: &Path) -> Vec<Problem> {
    let mut problems = check_repo(root, &Repo::load(root));
    for p in &mut problems {
        if let Some(relative) = p.file.strip_prefix(&format!("{}/", root.display())) {
            p.file = relative.to_owned();
        }
        // Range problems name the objects they found wrong by file too.
        p.message = p.message.replace(&format!("{}/", root.display()), "");
    }
    problems
}

fn check_repo(root: &Path, repo: &Repo) -> Vec<Problem> {
    let mut problems = repo.problems.clone();
    let function = function_name();
    let expectations = [
        Expect {
            kind: "Configuration",
            capabilities: &[],
            depends_on: CONFIGURATION_DEPENDENCIES,
        },
        Expect {
            kind: "Function",
            capabilities: &["composition"],
            depends_on: &[],
        },
        Expect {
            kind: "Provider",
            capabilities: &["SafeStart"],
            depends_on: &[],
        },
    ];
    for (package, expect) in repo.packages().into_iter().zip(&expectations) {
        problems.extend(meta::check(&package.meta, expect));
    }
    let v2 = configuration(&repo.configuration, &function, &mut problems);
    let mut crds = Vec::new();
    for package in [&repo.function, &repo.provider_eks] {
        crds.extend(package.objects.iter().filter_map(|m| {
            if !xrd::is_crd(m) {
                problems.push(m.problem(
                    "kind",
                    format!("a {} package holds only CustomResourceDefinitions", package.name),
                ));
                return None;
            }
            xrd::definition(m, &mut problems)
        }));
    }
    if repo.provider_eks.objects.is_empty() {
        problems.push(
            Problem::file(
                Path::new("package/provider-eks/crds"),
                "no CRDs yet (generated from provider-eks/api)",
            )
            .missing(),
        );
    }
    for kind in EXPECTED_KINDS {
        if !v2.iter().any(|d| d.defines_kind(GROUP, kind)) {
            problems.push(
                Problem::file(
                    Path::new("package/configuration/xrds"),
                    format!("no XRD defines {GROUP} {kind} yet"),
                )
                .missing(),
            );
        }
    }
    let mut definitions = v2;
    definitions.extend(crds);
    crate::examples::check(&repo.examples, &definitions, &mut problems);
    problems.extend(repo.activation.iter().flat_map(activation_policy));
    problems.extend(crate::ranges::check(root, repo));
    problems
}

/// Checks one Configuration's contents and returns the definitions its XRDs make.
fn configuration(package: &Package, function: &str, problems: &mut Vec<Problem>) -> Vec<Definition> {
    let mut found = Vec::new();
    let definitions: Vec<Definition> = package
        .objects
        .iter()
        .filter(|m| xrd::is_xrd(m))
        .filter_map(|m| xrd::definition(m, &mut found))
        .collect();
    let mut composed = std::collections::BTreeSet::new();
    for m in &package.objects {
        if xrd::is_xrd(m) {
            continue;
        }
        if m.kind() != "Composition" {
            found.push(m.problem("kind", "a Configuration holds only XRDs and Compositions"));
            continue;
        }
        let kind = m.str_at(&["spec", "compositeTypeRef", "kind"]);
        composed.insert(kind.to_owned());
        let target_missing = !definitions.iter().any(|d| d.kind == kind);
        let expected = EXPECTED_KINDS.contains(&kind);
        found.extend(
            xrd::composition(m, &definitions, Some(function))
                .into_iter()
                .map(|p| {
                    if target_missing && expected && p.field == "spec.compositeTypeRef" {
                        p.missing()
                    } else {
                        p
                    }
                }),
        );
    }
    for d in &definitions {
        if !composed.contains(&d.kind) {
            found.push(
                d.source
                    .problem("spec.names.kind", format!("no Composition targets {}", d.kind)),
            );
        }
    }
    problems.extend(found);
    definitions
}

/// A default activation policy must never wake provider-eks: its kinds are activated per EKS InferenceCluster.
fn activation_policy(m: &Manifest) -> Vec<Problem> {
    if !m.is(MRAP_API, "ManagedResourceActivationPolicy") {
        return vec![m.problem(
            "kind",
            format!("expected {MRAP_API} ManagedResourceActivationPolicy"),
        )];
    }
    let Some(patterns) = m
        .value
        .pointer("/spec/activate")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    else {
        return vec![m.problem("spec.activate", "a policy needs at least one pattern")];
    };
    let mut problems = Vec::new();
    for (i, pattern) in patterns.iter().enumerate() {
        let at = format!("spec.activate[{i}]");
        match pattern.as_str() {
            None => problems.push(m.problem(at, "must be a string")),
            Some(p) if p == "*" || p.ends_with(PROVIDER_EKS_MRD_SUFFIX) || p.ends_with(".modelplane.ai") => problems.push(m.problem(
                at,
                format!("{p:?} would activate provider-eks kinds up front; an EKS InferenceCluster activates them itself"),
            )),
            Some(_) => {}
        }
    }
    problems
}

#[cfg(test)]
#[path = "package_tests.rs"]
mod tests;
