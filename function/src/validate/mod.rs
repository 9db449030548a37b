//! One source of truth for what a composite may be: the XRDs the package ships, embedded here, so `render` and
//! the server refuse exactly what the API server would, before anything is composed. Each composite is checked
//! against its XRD's structural schema (types, patterns, enums, bounds, required fields, after defaulting) and its
//! `x-kubernetes-validations` rules, and its metadata as the API server checks every custom resource's.
//!
//! Nothing here names a field of any kind: whatever the embedded XRDs say is what is enforced.

use std::{
    collections::HashSet,
    hash::{BuildHasher, RandomState},
    sync::{LazyLock, Mutex, OnceLock},
};

use serde_json::Value;

use crate::{api::TypeMeta, error::ComposeError, wire::RawStruct};

mod defaults;
pub mod metadata;
mod rules;
pub mod schema;

use schema::{Layout, ObjectSchema};

/// Every XRD of `package/configuration`, as the package installs them.
const XRDS: &[(&str, &str)] = &[
    (
        "package/configuration/xrds/inferenceclasses.yaml",
        include_str!("../../../package/configuration/xrds/inferenceclasses.yaml"),
    ),
    (
        "package/configuration/xrds/inferenceclusters.yaml",
        include_str!("../../../package/configuration/xrds/inferenceclusters.yaml"),
    ),
    (
        "package/configuration/xrds/inferencegateways.yaml",
        include_str!("../../../package/configuration/xrds/inferencegateways.yaml"),
    ),
    (
        "package/configuration/xrds/modelcaches.yaml",
        include_str!("../../../package/configuration/xrds/modelcaches.yaml"),
    ),
    (
        "package/configuration/xrds/modeldeployments.yaml",
        include_str!("../../../package/configuration/xrds/modeldeployments.yaml"),
    ),
    (
        "package/configuration/xrds/modelendpoints.yaml",
        include_str!("../../../package/configuration/xrds/modelendpoints.yaml"),
    ),
    (
        "package/configuration/xrds/modelservices.yaml",
        include_str!("../../../package/configuration/xrds/modelservices.yaml"),
    ),
];

/// Most findings one FATAL message lists; the rest are counted.
const MAX_FINDINGS_SHOWN: usize = 5;

/// One served version of one kind.
struct Served {
    group: String,
    kind: String,
    version: String,
    schema: ObjectSchema,
}

fn served() -> &'static Result<Vec<Served>, String> {
    static SERVED: OnceLock<Result<Vec<Served>, String>> = OnceLock::new();
    SERVED.get_or_init(load)
}

fn load() -> Result<Vec<Served>, String> {
    let mut out = Vec::new();
    for (path, text) in XRDS {
        let xrd: Value = serde_yaml::from_str(text).map_err(|e| format!("{path}: {e}"))?;
        let field = |pointer: &str| {
            xrd.pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("{path}: no {pointer}"))
        };
        let (group, kind) = (field("/spec/group")?, field("/spec/names/kind")?);
        for version in xrd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(name), Some(schema)) = (
                version.get("name").and_then(Value::as_str),
                version.pointer("/schema/openAPIV3Schema"),
            ) else {
                continue;
            };
            // Status is the function's to write and is validated when written, not when the spec is read.
            let mut spec_only = schema.clone();
            if let Some(props) = spec_only.get_mut("properties").and_then(Value::as_object_mut) {
                props.remove("status");
            }
            out.push(Served {
                group: group.clone(),
                kind: kind.clone(),
                version: name.to_owned(),
                schema: ObjectSchema::new(&spec_only, Layout::Modern).map_err(|e| format!("{path}: {e}"))?,
            });
        }
    }
    Ok(out)
}

/// Most composites [`composite_on_the_wire`] remembers as accepted.
const REMEMBERED: usize = 1024;

/// Composites accepted lately, by two independently keyed 64-bit hashes of their wire bytes (keys random per
/// process, so no one can aim for a collision). Crossplane sends the same composite on every call of a
/// reconcile's requirements loop and on every poll of an unchanged composite, and checking one against its XRD
/// costs more than composing a small one.
struct Accepted {
    hashers: (RandomState, RandomState),
    seen: Mutex<HashSet<(u64, u64)>>,
}

static ACCEPTED: LazyLock<Accepted> = LazyLock::new(|| Accepted {
    hashers: (RandomState::new(), RandomState::new()),
    seen: Mutex::default(),
});

/// [`composite_on_the_wire`] for an object whose kind is read from its own `apiVersion` and `kind`: a composite
/// another composer reads as a required resource is held to its XRD as its own composer holds it.
pub fn object_on_the_wire(object: &RawStruct) -> Result<(), ComposeError> {
    let type_meta: TypeMeta = object
        .parse()
        .map_err(|e| ComposeError::caused_by("", "cannot read the object's kind", ComposeError::from(e)))?;
    composite_on_the_wire(&type_meta, object)
}

/// [`composite`] for the composite as it came on the wire, skipping the check for bytes accepted before: the
/// check is a pure function of the composite, so the same bytes get the same answer.
pub fn composite_on_the_wire(type_meta: &TypeMeta, xr: &RawStruct) -> Result<(), ComposeError> {
    let bytes = xr.as_bytes();
    let key = (
        ACCEPTED.hashers.0.hash_one(bytes),
        ACCEPTED.hashers.1.hash_one(bytes),
    );
    if ACCEPTED.seen.lock().is_ok_and(|seen| seen.contains(&key)) {
        return Ok(());
    }
    let object = xr
        .to_json()
        .map_err(|e| ComposeError::caused_by("", "cannot read the observed composite", e))?;
    composite(type_meta, &object)?;
    if let Ok(mut seen) = ACCEPTED.seen.lock() {
        // Starting over when full keeps the bound without bookkeeping.
        if seen.len() >= REMEMBERED {
            seen.clear();
        }
        seen.insert(key);
    }
    Ok(())
}

/// Checks `object` (the observed composite) against the XRD that defines `type_meta`. A kind no embedded XRD
/// defines passes: the composer lookup refuses it with a better message.
pub fn composite(type_meta: &TypeMeta, object: &Value) -> Result<(), ComposeError> {
    let served = served()
        .as_ref()
        .map_err(|e| ComposeError::new("", format!("the embedded XRDs do not load: {e}")))?;
    let (group, version) = type_meta
        .api_version
        .split_once('/')
        .unwrap_or(("", &type_meta.api_version));
    let Some(schema) = served
        .iter()
        .find(|s| s.group == group && s.version == version && s.kind == type_meta.kind)
        .map(|s| &s.schema)
    else {
        return Ok(());
    };
    let mut findings = metadata::check(object.get("metadata"));
    if findings.is_empty() {
        let mut without_status = object.clone();
        if let Some(map) = without_status.as_object_mut() {
            map.remove("status");
        }
        findings = schema.admission(without_status);
    }
    match findings.split_first() {
        None => Ok(()),
        Some(((path, reason), rest)) => {
            let mut message = crate::limits::cut(reason, 1024);
            for (path, reason) in rest.iter().take(MAX_FINDINGS_SHOWN - 1) {
                message.push_str(&format!("; {path}: {}", crate::limits::cut(reason, 512)));
            }
            if rest.len() >= MAX_FINDINGS_SHOWN {
                message.push_str(&format!("; and {} more", rest.len() + 1 - MAX_FINDINGS_SHOWN));
            }
            Err(ComposeError::new(
                path.clone(),
                format!("{message} (the XRD refuses this, as the API server would)"),
            ))
        }
    }
}

#[cfg(test)]
mod tests;
