//! Checks the XRD's CEL rules make, repeated here so `render` and older API servers give the same answer, plus
//! what the schema cannot say. Every error names the field.

use std::collections::BTreeSet;

mod probe;

use crate::{
    api::model_deployment::{
        ENGINE_CONTAINER, Engine, ModelDeploymentSpec, Phase, RESERVED_PREFIX, ReplicaSpec, Role,
        TemplateMetadata,
    },
    compose::{ComposeError, inference_class::is_dns_label},
    limits::quote,
    stack::{
        disaggregation::{DEFAULT_DECODE_ENGINE_PORT, PORT_FLAG},
        engine_flags,
        pod::SERVING_PORT,
    },
};

/// The container probes Modelplane writes when the user does not, and so checks when the user does.
const PROBES: [&str; 3] = ["startupProbe", "readinessProbe", "livenessProbe"];

pub fn validate(spec: &ModelDeploymentSpec) -> Result<(), ComposeError> {
    let template = &spec.template;
    reserved("spec.template.metadata", &template.metadata)?;
    if template.spec.engines.is_empty() {
        return Err(ComposeError::new(
            "spec.template.spec.engines",
            "at least one engine is required",
        ));
    }
    let mut names = BTreeSet::new();
    for (e, engine) in template.spec.engines.iter().enumerate() {
        let path = format!("spec.template.spec.engines[{e}]");
        if !is_dns_label(&engine.name) {
            return Err(ComposeError::new(
                format!("{path}.name"),
                format!("{:?} is not a DNS label", engine.name),
            ));
        }
        if !names.insert(engine.name.as_str()) {
            return Err(ComposeError::new(
                format!("{path}.name"),
                format!("duplicate engine {:?}", engine.name),
            ));
        }
        if engine.copies == 0 {
            return Err(ComposeError::new(format!("{path}.copies"), "must be at least 1"));
        }
        validate_engine(&path, engine)?;
    }
    validate_decode_port(&template.spec)
}

/// The decode engine's serving container and its path, under PrefillDecode serving.
fn decode_container(spec: &ReplicaSpec) -> Option<(String, &serde_json::Map<String, serde_json::Value>)> {
    let (e, engine) = spec.phase_engine(Phase::Decode)?;
    let m = engine
        .members
        .iter()
        .position(|m| matches!(m.role, Role::Standalone | Role::Leader))?;
    let container = engine.members[m].template.spec.containers.first()?;
    Some((
        format!("spec.template.spec.engines[{e}].members[{m}].template.spec.containers[0]"),
        container,
    ))
}

/// The decode engine's `--port` is read from its command line, which the XRD leaves opaque, so it is checked
/// here: it must be a port, and not the serving port, where the disaggregation sidecar listens.
fn validate_decode_port(spec: &ReplicaSpec) -> Result<(), ComposeError> {
    let Some((path, container)) = decode_container(spec) else {
        return Ok(());
    };
    let Some(port) = engine_flags::value(container, PORT_FLAG) else {
        return Ok(());
    };
    match port.parse::<u16>() {
        Ok(SERVING_PORT) => Err(ComposeError::new(
            path,
            format!(
                "the decode engine's {PORT_FLAG} {SERVING_PORT} is where the disaggregation sidecar listens; \
                 give the engine another port ({DEFAULT_DECODE_ENGINE_PORT} when it states none)"
            ),
        )),
        Ok(port) if port > 0 => Ok(()),
        _ => Err(ComposeError::new(
            path,
            format!(
                "the decode engine's {PORT_FLAG} {} is not a port",
                quote(&port, 64)
            ),
        )),
    }
}

/// Advice that does not stop composing: a decode engine that states no `--port` is probed, and reached by the
/// sidecar, on the port Modelplane assumes, which vLLM does not choose by itself.
pub fn warnings(spec: &ModelDeploymentSpec) -> Vec<String> {
    match decode_container(&spec.template.spec) {
        Some((path, container)) if engine_flags::value(container, PORT_FLAG).is_none() => vec![format!(
            "{path}: the decode engine states no {PORT_FLAG}; the disaggregation sidecar listens on \
             {SERVING_PORT} and forwards to {DEFAULT_DECODE_ENGINE_PORT}, so start the engine with \
             {PORT_FLAG}={DEFAULT_DECODE_ENGINE_PORT}"
        )],
        _ => Vec::new(),
    }
}

fn validate_engine(path: &str, engine: &Engine) -> Result<(), ComposeError> {
    let roles: Vec<Role> = engine.members.iter().map(|m| m.role).collect();
    let shape_ok = matches!(
        roles.as_slice(),
        [Role::Standalone] | [Role::Leader, Role::Worker] | [Role::Worker, Role::Leader]
    );
    if !shape_ok {
        return Err(ComposeError::new(
            format!("{path}.members"),
            format!("an engine is one Standalone member, or one Leader and one Worker; found {roles:?}"),
        ));
    }
    if engine.members.iter().all(|m| m.device_requests().is_empty()) {
        return Err(ComposeError::new(
            format!("{path}.members"),
            "at least one member must request devices (nodeSelector.devices)",
        ));
    }
    for (m, member) in engine.members.iter().enumerate() {
        let at = format!("{path}.members[{m}]");
        if member.role == Role::Worker && member.worker.as_ref().is_none_or(|w| w.nodes == 0) {
            return Err(ComposeError::new(
                format!("{at}.worker.nodes"),
                "a Worker needs worker.nodes of at least 1",
            ));
        }
        reserved(&format!("{at}.template.metadata"), &member.template.metadata)?;
        let containers = &member.template.spec.containers;
        let named = |c: &serde_json::Map<String, serde_json::Value>| {
            c.get("name").and_then(|n| n.as_str()) == Some(ENGINE_CONTAINER)
        };
        if containers.len() != 1 || !containers.iter().all(named) {
            return Err(ComposeError::new(
                format!("{at}.template.spec.containers"),
                format!("exactly one container, named {ENGINE_CONTAINER:?}, is required"),
            ));
        }
        for (c, container) in containers.iter().enumerate() {
            for field in PROBES {
                if let Some(probe) = container.get(field) {
                    probe::validate(&format!("{at}.template.spec.containers[{c}].{field}"), probe)?;
                }
            }
        }
    }
    Ok(())
}

/// Template labels and annotations land on pods, so they must be what the API server accepts there; the XRD
/// bounds their size but not their characters.
fn reserved(path: &str, metadata: &TemplateMetadata) -> Result<(), ComposeError> {
    for (key, value) in &metadata.labels {
        let at = || format!("{path}.labels");
        if let Some(why) = crate::validate::metadata::qualified_name(key) {
            return Err(ComposeError::new(at(), format!("key {}: {why}", quote(key, 64))));
        }
        if !crate::validate::metadata::is_label_value(value) {
            return Err(ComposeError::new(
                at(),
                format!(
                    "{key}: {} is not a label value (at most 63 alphanumerics, '-', '_' or '.')",
                    quote(value, 64)
                ),
            ));
        }
    }
    for key in metadata.annotations.keys() {
        if let Some(why) = crate::validate::metadata::qualified_name(key) {
            return Err(ComposeError::new(
                format!("{path}.annotations"),
                format!("key {}: {why}", quote(key, 64)),
            ));
        }
    }
    let keys = metadata
        .labels
        .keys()
        .map(|k| ("labels", k))
        .chain(metadata.annotations.keys().map(|k| ("annotations", k)));
    for (field, key) in keys {
        if key.starts_with(RESERVED_PREFIX) {
            return Err(ComposeError::new(
                format!("{path}.{field}"),
                format!("{key:?} uses the reserved prefix {RESERVED_PREFIX:?}"),
            ));
        }
    }
    Ok(())
}
