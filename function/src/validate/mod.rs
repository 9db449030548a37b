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

use crate::{
    api::TypeMeta,
    error::ComposeError,
    wire::{
        RawStruct,
        content_hash::{self, Keep},
    },
};

mod defaults;
pub mod metadata;
mod reads;
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

/// Composites accepted lately, each by two keys of two independently keyed 64-bit hashes (keys random per
/// process, so no one can aim for a collision): of its bytes, and of what the check reads ([`checked`]).
/// Crossplane sends the same composite on every call of a reconcile's requirements loop, on every poll, and again
/// whenever only its status or resource version moved, its maps in a new order each time; checking one against
/// its XRD costs more than composing a small one. The bytes' key is the cheap one and answers an exact repeat;
/// the content key answers the rest.
struct Accepted {
    hashers: (RandomState, RandomState),
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    bytes: HashSet<(u64, u64)>,
    content: HashSet<(u64, u64)>,
}

impl Seen {
    /// Starting over when full keeps the bound without bookkeeping.
    fn remember(set: &mut HashSet<(u64, u64)>, key: (u64, u64)) {
        if set.len() >= REMEMBERED {
            set.clear();
        }
        set.insert(key);
    }
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

/// What of a composite's metadata [`composite`] reads: [`metadata::check`]'s fields, and the two a CRD's rules may.
const METADATA_CHECKED: &[&str] = &["name", "generateName", "namespace", "labels", "annotations"];

/// Which top-level fields of a composite its check reads: all but its status, and of its metadata only
/// [`METADATA_CHECKED`] (not its resource version, uid, timestamps or managed fields, which move on every write).
fn checked(key: &[u8]) -> Keep {
    match key {
        b"status" => Keep::Skip,
        b"metadata" => Keep::Only(METADATA_CHECKED),
        _ => Keep::Whole,
    }
}

/// [`composite`] for the composite as it came on the wire, skipping the check for one accepted before: the check
/// is a pure function of what [`checked`] selects, so the same content gets the same answer, whatever order the
/// sender wrote its map entries in.
pub fn composite_on_the_wire(type_meta: &TypeMeta, xr: &RawStruct) -> Result<(), ComposeError> {
    let bytes = xr.as_bytes();
    let hashers = &ACCEPTED.hashers;
    let bytes_key = (hashers.0.hash_one(bytes), hashers.1.hash_one(bytes));
    if ACCEPTED
        .seen
        .lock()
        .is_ok_and(|seen| seen.bytes.contains(&bytes_key))
    {
        return Ok(());
    }
    let content_key = content_hash::struct_hash(bytes, hashers, checked);
    let seen_before =
        content_key.is_some_and(|key| ACCEPTED.seen.lock().is_ok_and(|seen| seen.content.contains(&key)));
    if !seen_before {
        let object = xr
            .to_json()
            .map_err(|e| ComposeError::caused_by("", "cannot read the observed composite", e))?;
        owned_composite(type_meta, object)?;
    }
    if let Ok(mut seen) = ACCEPTED.seen.lock() {
        Seen::remember(&mut seen.bytes, bytes_key);
        if let Some(key) = content_key {
            Seen::remember(&mut seen.content, key);
        }
    }
    Ok(())
}

/// Checks `object` (the observed composite) against the XRD that defines `type_meta`. A kind no embedded XRD
/// defines passes: the composer lookup refuses it with a better message.
pub fn composite(type_meta: &TypeMeta, object: &Value) -> Result<(), ComposeError> {
    owned_composite(type_meta, object.clone())
}

/// The fields of `object` (a composite of one of our kinds, read from its own `apiVersion` and `kind`) its XRD
/// does not declare, by path, `status` aside. The function never sees them (the API server drops them before
/// Crossplane reads the composite), so only `render`, reading a user's file, has them to refuse.
pub fn unknown_fields(object: &Value) -> Vec<(String, String)> {
    let field = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or_default();
    let (group, version) = field("apiVersion").split_once('/').unwrap_or_default();
    let Ok(served) = served() else {
        return Vec::new();
    };
    let Some(served) = served
        .iter()
        .find(|s| s.group == group && s.version == version && s.kind == field("kind"))
    else {
        return Vec::new();
    };
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    served.schema.unknown_fields(&object)
}

/// [`composite`] for an object the caller has no further use for: the check defaults it in place.
fn owned_composite(type_meta: &TypeMeta, mut object: Value) -> Result<(), ComposeError> {
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
        if let Some(map) = object.as_object_mut() {
            map.remove("status");
        }
        findings = schema.admission(object);
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
