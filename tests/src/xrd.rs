//! CompositeResourceDefinitions (Crossplane v2 and legacy v1), CRDs, and the Compositions that target them.

use std::borrow::Borrow;

use serde_json::Value;

use crate::{
    manifest::{Manifest, Problem, type_name},
    schema::{Layout, ObjectSchema},
    structural,
};

pub const XRD_V2: &str = "apiextensions.crossplane.io/v2";
pub const XRD_V1: &str = "apiextensions.crossplane.io/v1";
pub const COMPOSITION_API: &str = "apiextensions.crossplane.io/v1";
pub const CRD_API: &str = "apiextensions.k8s.io/v1";

/// A definition of a kind: an XRD or a plain CRD, reduced to what the checks need.
pub struct Definition {
    pub source: Manifest,
    pub group: String,
    pub kind: String,
    pub claim_kind: Option<String>,
    pub layout: Layout,
    /// Served versions with their compiled schemas (None when the schema itself is broken).
    pub versions: Vec<(String, Option<ObjectSchema>)>,
}

impl Definition {
    /// Does this definition serve `apiVersion`/`kind` (as its composite or its claim)?
    pub fn serves(&self, api_version: &str, kind: &str) -> Option<&Option<ObjectSchema>> {
        let (group, version) = api_version.rsplit_once('/')?;
        let kind_matches = kind == self.kind || self.claim_kind.as_deref() == Some(kind);
        (group == self.group && kind_matches)
            .then(|| self.versions.iter().find(|(v, _)| v == version).map(|(_, s)| s))
            .flatten()
    }

    pub fn defines_kind(&self, group: &str, kind: &str) -> bool {
        self.group == group && (self.kind == kind || self.claim_kind.as_deref() == Some(kind))
    }
}

pub fn is_xrd(m: &Manifest) -> bool {
    m.kind() == "CompositeResourceDefinition" && (m.api_version() == XRD_V2 || m.api_version() == XRD_V1)
}

pub fn is_crd(m: &Manifest) -> bool {
    m.is(CRD_API, "CustomResourceDefinition")
}

/// Checks an XRD or CRD and returns its definition when it is usable at all.
pub fn definition(m: &Manifest, problems: &mut Vec<Problem>) -> Option<Definition> {
    let spec = &m.value["spec"];
    let group = m.str_at(&["spec", "group"]).to_owned();
    let kind = m.str_at(&["spec", "names", "kind"]).to_owned();
    let plural = m.str_at(&["spec", "names", "plural"]);
    for (field, value) in [
        ("spec.group", group.as_str()),
        ("spec.names.kind", &kind),
        ("spec.names.plural", plural),
    ] {
        if value.is_empty() {
            problems.push(m.problem(field, "required"));
        }
    }
    if group.is_empty() || kind.is_empty() || plural.is_empty() {
        return None;
    }
    let expected_name = format!("{plural}.{group}");
    if m.name() != expected_name {
        problems.push(m.problem(
            "metadata.name",
            format!("must be {expected_name:?} (<plural>.<group>)"),
        ));
    }
    let scope = spec.get("scope").and_then(Value::as_str);
    let claim_kind = spec
        .pointer("/claimNames/kind")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let layout = match m.api_version() {
        XRD_V2 => {
            if spec.get("claimNames").is_some() {
                problems.push(m.problem(
                    "spec.claimNames",
                    "apiextensions.crossplane.io/v2 XRDs cannot have claims",
                ));
            }
            if !matches!(scope, None | Some("Namespaced" | "Cluster")) {
                problems.push(m.problem("spec.scope", "must be Namespaced or Cluster"));
            }
            Layout::Modern
        }
        XRD_V1 => {
            let legacy = matches!(scope, None | Some("LegacyCluster"));
            if !legacy && !matches!(scope, Some("Namespaced" | "Cluster")) {
                problems.push(m.problem("spec.scope", "must be LegacyCluster, Namespaced or Cluster"));
            }
            if claim_kind.is_some() && !legacy {
                problems.push(m.problem("spec.claimNames", "claims need scope LegacyCluster"));
            }
            if claim_kind.as_deref() == Some(kind.as_str()) {
                problems.push(m.problem("spec.claimNames.kind", "must differ from the composite kind"));
            }
            if legacy { Layout::Legacy } else { Layout::Modern }
        }
        _ => Layout::Modern, // a CRD: no Crossplane fields
    };
    let versions = versions(m, layout, problems);
    Some(Definition {
        source: m.clone(),
        group,
        kind,
        claim_kind,
        layout,
        versions,
    })
}

fn versions(
    m: &Manifest,
    layout: Layout,
    problems: &mut Vec<Problem>,
) -> Vec<(String, Option<ObjectSchema>)> {
    let Some(list) = m
        .value
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
    else {
        problems.push(m.problem("spec.versions", "at least one version is required"));
        return Vec::new();
    };
    let is_xrd = is_xrd(m);
    let flagged = |key: &str| {
        list.iter()
            .filter(|v| v.get(key) == Some(&Value::Bool(true)))
            .count()
    };
    if is_xrd && flagged("referenceable") != 1 {
        problems.push(m.problem("spec.versions", "exactly one version must be referenceable"));
    }
    if !is_xrd && flagged("storage") != 1 {
        problems.push(m.problem("spec.versions", "exactly one version must be the storage version"));
    }
    let mut served = Vec::new();
    for (i, version) in list.iter().enumerate() {
        let at = format!("spec.versions[{i}]");
        let Some(name) = version.get("name").and_then(Value::as_str) else {
            problems.push(m.problem(format!("{at}.name"), "required"));
            continue;
        };
        let Some(schema) = version.pointer("/schema/openAPIV3Schema") else {
            problems.push(m.problem(format!("{at}.schema.openAPIV3Schema"), "required"));
            continue;
        };
        let schema_path = format!("{at}.schema.openAPIV3Schema");
        let mut findings = structural::check(schema, &schema_path);
        if is_xrd {
            findings.extend(reserved_fields(schema, layout, &schema_path));
        }
        let broken = !findings.is_empty();
        problems.extend(
            findings
                .into_iter()
                .map(|(field, message)| m.problem(field, message)),
        );
        if version.get("served") != Some(&Value::Bool(true)) {
            continue;
        }
        let compiled = if broken {
            None
        } else {
            ObjectSchema::new(schema, layout)
                .map_err(|e| problems.push(m.problem(&schema_path, e)))
                .ok()
        };
        served.push((name.to_owned(), compiled));
    }
    served
}

/// An XRD may not declare a `spec` field Crossplane owns: Crossplane's value would overwrite the user's.
fn reserved_fields(schema: &Value, layout: Layout, path: &str) -> Vec<structural::Finding> {
    let Some(spec) = schema
        .pointer("/properties/spec/properties")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    layout
        .reserved_spec_fields()
        .iter()
        .filter(|field| spec.contains_key(**field))
        .map(|field| {
            (
                format!("{path}.properties.spec.properties.{field}"),
                "Crossplane owns this field of a composite's spec".to_owned(),
            )
        })
        .collect()
}

/// Checks a Composition against the definitions it may target. `function` is the function every step must
/// call (None for compositions outside our packages, which may use any function).
pub fn composition<D: Borrow<Definition>>(
    m: &Manifest,
    definitions: &[D],
    function: Option<&str>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    if m.api_version() != COMPOSITION_API {
        problems.push(m.problem("apiVersion", format!("Compositions are {COMPOSITION_API}")));
    }
    let spec = &m.value["spec"];
    if !matches!(spec.get("mode").and_then(Value::as_str), None | Some("Pipeline")) {
        problems.push(m.problem("spec.mode", "must be Pipeline: Crossplane v2 has no other mode"));
    }
    let api_version = m.str_at(&["spec", "compositeTypeRef", "apiVersion"]);
    let kind = m.str_at(&["spec", "compositeTypeRef", "kind"]);
    let target = definitions
        .iter()
        .map(Borrow::borrow)
        .find(|d: &&Definition| d.kind == kind && api_version.starts_with(&format!("{}/", d.group)));
    match target {
        _ if api_version.is_empty() || kind.is_empty() => {
            problems.push(m.problem("spec.compositeTypeRef", "apiVersion and kind are required"));
        }
        None => problems.push(m.problem(
            "spec.compositeTypeRef",
            format!("no XRD here defines composite {api_version} {kind}"),
        )),
        Some(d) if d.serves(api_version, kind).is_none() => problems.push(m.problem(
            "spec.compositeTypeRef.apiVersion",
            format!("XRD {} does not serve {api_version}", d.source.name()),
        )),
        Some(_) => {}
    }
    let steps = spec
        .get("pipeline")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if steps.is_empty() {
        problems.push(m.problem("spec.pipeline", "a Pipeline Composition needs at least one step"));
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, step) in steps.iter().enumerate() {
        let at = format!("spec.pipeline[{i}]");
        match step.get("step").and_then(Value::as_str) {
            Some(name) if !names.insert(name) => {
                problems.push(m.problem(format!("{at}.step"), format!("duplicate step {name:?}")))
            }
            Some(_) => {}
            None => problems.push(m.problem(format!("{at}.step"), "required")),
        }
        let called = step
            .pointer("/functionRef/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match function {
            _ if called.is_empty() => problems.push(m.problem(format!("{at}.functionRef.name"), "required")),
            Some(ours) if called != ours => problems.push(m.problem(
                format!("{at}.functionRef.name"),
                format!("{called:?} is not {ours:?}; this package's Compositions run our function only"),
            )),
            _ => {}
        }
        if let Some(input) = step.get("input")
            && (input.get("apiVersion").is_none() || input.get("kind").is_none())
        {
            problems.push(m.problem(
                format!("{at}.input"),
                format!(
                    "a step input must be a KRM object with apiVersion and kind, not a bare {}",
                    type_name(input)
                ),
            ));
        }
    }
    problems
}
