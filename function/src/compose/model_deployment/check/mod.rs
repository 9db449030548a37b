//! What the ModelDeployment XRD cannot say; everything it can (engine count, names and their uniqueness, copies,
//! an engine's member shape, device requests, a Worker's nodes, the one container named engine, the reserved
//! label prefix) is enforced from the XRD itself before composing (`crate::validate`). Every error names the field.

mod probe;

use modelplane_eks_api::names::is_label_value;

use crate::{
    api::model_deployment::{ModelDeploymentSpec, Phase, ReplicaSpec, Role, TemplateMetadata},
    compose::ComposeError,
    limits::quote,
    workload::{
        disaggregation::PORT_FLAG,
        engine_flags,
        well_known::{DEFAULT_DECODE_ENGINE_PORT, SERVING_PORT},
    },
};

/// The container probes Modelplane writes when the user does not, and so checks when the user does.
const PROBES: [&str; 3] = ["startupProbe", "readinessProbe", "livenessProbe"];

pub fn validate(spec: &ModelDeploymentSpec) -> Result<(), ComposeError> {
    let template = &spec.template;
    label_syntax("spec.template.metadata", &template.metadata)?;
    for (e, engine) in template.spec.engines.iter().enumerate() {
        for (m, member) in engine.members.iter().enumerate() {
            let at = format!("spec.template.spec.engines[{e}].members[{m}]");
            label_syntax(&format!("{at}.template.metadata"), &member.template.metadata)?;
            for (c, container) in member.template.spec.containers.iter().enumerate() {
                for field in PROBES {
                    if let Some(probe) = container.get(field) {
                        probe::validate(&format!("{at}.template.spec.containers[{c}].{field}"), probe)?;
                    }
                }
            }
        }
    }
    validate_decode_port(&template.spec)?;
    validate_scaling_metric(spec)
}

/// `spec.autoscaling` reads a figure every serving engine must report: TensorRT-LLM reports latencies only, and
/// SGLang reports nothing unless started with `--enable-metrics` (docs/metrics.md). An engine the command line
/// does not name is taken at its word.
fn validate_scaling_metric(spec: &ModelDeploymentSpec) -> Result<(), ComposeError> {
    let Some(scaling) = &spec.autoscaling else {
        return Ok(());
    };
    for (e, engine) in spec.template.spec.engines.iter().enumerate() {
        let Some(m) = engine
            .members
            .iter()
            .position(|m| matches!(m.role, Role::Standalone | Role::Leader))
        else {
            continue;
        };
        let Some(container) = engine.members[m].template.spec.containers.first() else {
            continue;
        };
        match engine_flags::engine(container) {
            Some(engine_flags::Engine::TensorRtLlm) => {
                return Err(ComposeError::new(
                    "spec.autoscaling.target.metric",
                    format!(
                        "engine {:?} runs TensorRT-LLM, which reports no {:?} (it reports latencies only); \
                         scale it by hand, or serve it with vLLM or SGLang",
                        engine.name, scaling.target.metric
                    ),
                ));
            }
            Some(engine_flags::Engine::Sglang) if !engine_flags::has(container, METRICS_FLAG) => {
                return Err(ComposeError::new(
                    format!("spec.template.spec.engines[{e}].members[{m}].template.spec.containers[0].args"),
                    format!(
                        "engine {:?} runs SGLang, which reports the metrics spec.autoscaling reads only when \
                         started with {METRICS_FLAG}",
                        engine.name
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// SGLang's switch for its Prometheus endpoint.
const METRICS_FLAG: &str = "--enable-metrics";

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

/// Template labels and annotations land on pods, so they must be what the API server accepts there; the XRD
/// bounds their size but not their characters.
fn label_syntax(path: &str, metadata: &TemplateMetadata) -> Result<(), ComposeError> {
    for (key, value) in &metadata.labels {
        let at = || format!("{path}.labels");
        if let Some(why) = crate::validate::metadata::qualified_name(key) {
            return Err(ComposeError::new(at(), format!("key {}: {why}", quote(key, 64))));
        }
        if !is_label_value(value) {
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
    Ok(())
}
