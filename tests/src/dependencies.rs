//! The dependencies our packages name (Crossplane itself, provider-kubernetes, provider-helm) and the vendored
//! CRDs of the releases we know, so a version range can be checked against what those releases accept.
//!
//! A range is checked at its lower bound and at every vendored release inside it. At a version `v`, a kind's
//! CRD is the one of the newest vendored release not newer than `v` that has it (`min/` holds only the files that
//! matter at the lower bounds; a kind missing there comes from the nearest older release).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde_json::Value;

use crate::{
    manifest::{self, Manifest, Problem},
    schema::{Layout, ObjectSchema},
    semver::{Constraint, Version},
    vendored::VENDORED_DIR,
};

/// One release whose CRDs are vendored under `tests/crds/<dir>`.
pub struct Release {
    pub version: Version,
    pub dir: &'static str,
}

pub struct Dependency {
    /// How messages name it.
    pub name: &'static str,
    /// The package reference a Configuration depends on; None for Crossplane itself (`spec.crossplane.version`).
    pub package: Option<&'static str>,
    /// API groups whose objects it serves.
    pub groups: &'static [&'static str],
    /// Vendored releases, oldest first.
    pub releases: &'static [Release],
}

pub const CROSSPLANE: Dependency = Dependency {
    name: "Crossplane",
    package: None,
    groups: &[
        "apiextensions.crossplane.io",
        "pkg.crossplane.io",
        "ops.crossplane.io",
        "protection.crossplane.io",
    ],
    releases: &[
        Release {
            version: Version(2, 0, 0),
            dir: "min/crossplane-v2.0.0",
        },
        Release {
            version: Version(2, 2, 0),
            dir: "min/xp-v2.2.0",
        },
        Release {
            version: Version(2, 3, 0),
            dir: "min/xp-v2.3.0",
        },
        // The snapshot is a little past v2.3.4; it stands for the newest release.
        Release {
            version: Version(2, 3, 4),
            dir: "crossplane",
        },
    ],
};

pub const PROVIDER_KUBERNETES: Dependency = Dependency {
    name: "provider-kubernetes",
    package: Some(crate::package::PROVIDER_KUBERNETES_PACKAGE),
    groups: &["kubernetes.crossplane.io", "kubernetes.m.crossplane.io"],
    releases: &[
        Release {
            version: Version(1, 0, 0),
            dir: "min/provider-kubernetes-v1.0.0",
        },
        // The snapshot's CRDs are byte for byte those of tag v1.3.0 (tests/crds/README.md).
        Release {
            version: Version(1, 3, 0),
            dir: "provider-kubernetes",
        },
    ],
};

pub const PROVIDER_HELM: Dependency = Dependency {
    name: "provider-helm",
    package: Some(crate::package::PROVIDER_HELM_PACKAGE),
    groups: &["helm.crossplane.io", "helm.m.crossplane.io"],
    releases: &[
        Release {
            version: Version(1, 0, 0),
            dir: "min/provider-helm-v1.0.0",
        },
        Release {
            version: Version(1, 0, 2),
            dir: "min/provider-helm-v1.0.2",
        },
        Release {
            version: Version(1, 4, 0),
            dir: "provider-helm",
        },
    ],
};

pub const ALL: &[&Dependency] = &[&CROSSPLANE, &PROVIDER_KUBERNETES, &PROVIDER_HELM];

/// The dependency serving objects of API group `group`, if we vendor its CRDs.
pub fn serving(group: &str) -> Option<&'static Dependency> {
    ALL.iter().copied().find(|d| d.groups.contains(&group))
}

/// Where a range is declared: the package metadata object and the field holding the constraint.
pub struct Declared<'a> {
    pub meta: &'a Manifest,
    pub field: String,
    pub constraint: &'a str,
}

/// One vendored CRD version, compiled on first use.
struct Served {
    file: PathBuf,
    kind_versions: Vec<(String, Value)>,
}

/// The vendored CRDs of one dependency, read from `root/tests/crds`.
pub struct Vendored {
    dependency: &'static Dependency,
    /// Per release (same order as `dependency.releases`): (group, kind) → the CRD's served versions.
    releases: Vec<BTreeMap<(String, String), Served>>,
    compiled: BTreeMap<(PathBuf, String), Result<ObjectSchema, String>>,
}

impl Vendored {
    /// Reads the CRDs of `groups` (only those: the Crossplane set is large) for every vendored release.
    pub fn load(root: &Path, dependency: &'static Dependency, groups: &[&str]) -> Result<Self, Vec<Problem>> {
        let mut releases = Vec::new();
        let mut problems = Vec::new();
        for release in dependency.releases {
            let dir = root.join(VENDORED_DIR).join(release.dir);
            let mut found = BTreeMap::new();
            let entries = std::fs::read_dir(&dir)
                .map_err(|e| vec![Problem::file(&dir, format!("cannot list: {e}"))])?;
            let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            files.sort();
            for file in files {
                let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let wanted = name == "xrd.yaml" || groups.iter().any(|g| name.starts_with(&format!("{g}_")));
                if !name.ends_with(".yaml") || !wanted {
                    continue;
                }
                match manifest::load_file(&file) {
                    Ok(crds) => {
                        for crd in crds {
                            let key = (
                                crd.str_at(&["spec", "group"]).to_owned(),
                                crd.str_at(&["spec", "names", "kind"]).to_owned(),
                            );
                            let kind_versions = crd
                                .value
                                .pointer("/spec/versions")
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten()
                                .filter(|v| v.get("served") == Some(&Value::Bool(true)))
                                .filter_map(|v| {
                                    Some((
                                        v.get("name")?.as_str()?.to_owned(),
                                        v.pointer("/schema/openAPIV3Schema")?.clone(),
                                    ))
                                })
                                .collect();
                            found.insert(
                                key,
                                Served {
                                    file: file.clone(),
                                    kind_versions,
                                },
                            );
                        }
                    }
                    Err(p) => problems.push(p),
                }
            }
            releases.push(found);
        }
        if problems.is_empty() {
            Ok(Self {
                dependency,
                releases,
                compiled: BTreeMap::new(),
            })
        } else {
            Err(problems)
        }
    }

    /// The versions a range is checked at: its lower bound and each vendored release inside it.
    fn checked_versions(&self, constraint: &Constraint) -> Vec<Version> {
        let mut versions: Vec<Version> = constraint.lower_bound().into_iter().collect();
        for release in self.dependency.releases {
            if constraint.matches(release.version) && !versions.contains(&release.version) {
                versions.push(release.version);
            }
        }
        versions
    }

    /// Every reason `object` would not be accepted as written at version `at` of the dependency: None when no
    /// vendored release up to `at` defines its kind.
    fn findings(&mut self, at: Version, object: &Manifest) -> Option<Vec<(String, String)>> {
        let (group, version) = object.api_version().rsplit_once('/')?;
        let key = (group.to_owned(), object.kind().to_owned());
        let served = self
            .dependency
            .releases
            .iter()
            .zip(&self.releases)
            .rev()
            .filter(|(release, _)| release.version <= at)
            .find_map(|(_, crds)| crds.get(&key))?;
        let Some((_, schema)) = served.kind_versions.iter().find(|(v, _)| v == version) else {
            let served: Vec<&str> = served.kind_versions.iter().map(|(v, _)| v.as_str()).collect();
            return Some(vec![(
                "apiVersion".into(),
                format!(
                    "{} is not served (served: {})",
                    object.api_version(),
                    served.join(", ")
                ),
            )]);
        };
        let compiled = self
            .compiled
            .entry((served.file.clone(), version.to_owned()))
            .or_insert_with(|| ObjectSchema::new(schema, Layout::Plain));
        Some(match compiled {
            Ok(schema) => schema.validate(&object.value),
            Err(e) => vec![(String::new(), format!("the vendored CRD does not compile: {e}"))],
        })
    }
}

/// Checks one declared range of `dependency` against the vendored releases, validating `objects` (those in the
/// dependency's groups) at each version the range admits that we can check. Problems are reported on the
/// declaring field and name the object, its field and the release that rejects it.
pub fn check_range(vendored: &mut Vendored, declared: &Declared, objects: &[Manifest]) -> Vec<Problem> {
    let name = vendored.dependency.name;
    let problem = |message: String| {
        declared.meta.problem(
            &declared.field,
            format!("{name} {:?}: {message}", declared.constraint),
        )
    };
    let constraint = match Constraint::parse(declared.constraint) {
        Ok(c) => c,
        Err(e) => return vec![problem(format!("not a semver constraint ({e})"))],
    };
    if !constraint.is_satisfiable() {
        return vec![problem("no version satisfies it".into())];
    }
    let mut problems = Vec::new();
    if let Some(why) = constraint.too_wide() {
        problems.push(problem(why));
    }
    let oldest = vendored.dependency.releases.first().map(|r| r.version);
    if let (Some(lower), Some(oldest)) = (constraint.lower_bound(), oldest)
        && lower < oldest
    {
        problems.push(problem(format!(
            "admits {lower}, older than any vendored {name} CRDs ({oldest} is the oldest): nothing shows the packages work there; raise the lower bound or vendor that release's CRDs"
        )));
        return problems;
    }
    // The same finding on many composed objects is one problem: the first object named, the rest counted.
    let mut found: BTreeMap<(Version, String, String, String), (String, usize)> = BTreeMap::new();
    for at in vendored.checked_versions(&constraint) {
        for object in objects
            .iter()
            .filter(|o| vendored.dependency.groups.contains(&o.group()))
        {
            let findings = vendored.findings(at, object).unwrap_or_else(|| {
                vec![(
                    String::new(),
                    format!("{at} has no {} in {}", object.kind(), object.group()),
                )]
            });
            for (field, message) in findings {
                let first = || format!("{} in {}", object.object(), object.file.display());
                found
                    .entry((at, object.kind().to_owned(), field, message))
                    .or_insert_with(|| (first(), 0))
                    .1 += 1;
            }
        }
    }
    for ((at, kind, field, message), (first, count)) in found {
        let more = if count > 1 {
            format!(" (and {} more)", count - 1)
        } else {
            String::new()
        };
        problems.push(problem(format!(
            "admits {at}, whose {kind} CRD rejects {first}{more} at {field}: {message}"
        )));
    }
    problems
}

#[cfg(test)]
#[path = "dependencies_tests.rs"]
mod tests;
