//! Turns the last response into the objects `crossplane render` prints: the composite with the status the
//! function set and the conditions Crossplane would compute, each desired composed resource with the metadata
//! Crossplane adds, then one `Result` object per result.

use std::io::Write;

use serde_json::{Map, Value, json};

use super::{
    COMPOSITION_RESOURCE_NAME, Inputs, RenderError,
    until_ready::{MAX_ROUNDS, Outcome, Simulation},
};
use crate::proto::v1::{Ready, RunFunctionResponse, Severity, Status};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Yaml,
    Json,
}

/// The printed objects, in `crossplane render`'s order.
///
/// After a FATAL result Crossplane applies nothing and leaves the composite alone, so only the results print.
pub fn documents(inputs: &Inputs, rsp: &RunFunctionResponse) -> Result<Vec<Value>, RenderError> {
    let results = rsp.results.iter().map(result_document);
    if rsp.results.iter().any(|r| r.severity == Severity::Fatal as i32) {
        return Ok(results.collect());
    }
    let xr = &inputs.composite;
    let name = xr
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let namespace = xr.pointer("/metadata/namespace").and_then(Value::as_str);
    let desired = rsp.desired.clone().unwrap_or_default();

    let mut unready = Vec::new();
    let mut composed = Vec::new();
    for (key, resource) in &desired.resources {
        if resource.ready != Ready::True as i32 {
            unready.push(key.as_str());
        }
        let mut object = match resource.resource.as_ref().map(|raw| raw.to_json()) {
            Some(Ok(Value::Object(map))) => map,
            Some(Err(e)) => return Err(RenderError::Output(format!("desired resource {key}: {e}"))),
            _ => Map::new(),
        };
        add_composed_metadata(&mut object, xr, key, name, namespace);
        composed.push(Value::Object(object));
    }

    let composite_status = match desired.composite.as_ref().and_then(|c| c.resource.as_ref()) {
        Some(raw) => raw
            .to_json()
            .map_err(|e| RenderError::Output(format!("desired composite: {e}")))?,
        None => Value::Null,
    };
    let mut status = composite_status
        .get("status")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let composite_ready = desired
        .composite
        .as_ref()
        .map_or(Ready::Unspecified as i32, |c| c.ready);
    let mut conditions = vec![ready_condition(composite_ready, &unready)];
    conditions.extend(rsp.conditions.iter().map(|c| {
        let mut condition = json!({"type": c.r#type, "status": status_word(c.status), "reason": c.reason});
        if let Some(message) = &c.message {
            condition["message"] = json!(message);
        }
        condition
    }));
    status["conditions"] = Value::Array(conditions);

    let mut metadata = json!({"name": name});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    let mut out = vec![json!({
        "apiVersion": xr.get("apiVersion"),
        "kind": xr.get("kind"),
        "metadata": metadata,
        "status": status,
    })];
    out.extend(composed);
    out.extend(results);
    Ok(out)
}

fn result_document(result: &crate::proto::v1::Result) -> Value {
    json!({
        "apiVersion": "render.crossplane.io/v1beta1",
        "kind": "Result",
        "severity": Severity::try_from(result.severity).unwrap_or(Severity::Unspecified).as_str_name(),
        "reason": result.reason.clone().unwrap_or_else(|| "ComposeResources".into()),
        "message": result.message,
    })
}

/// The labels, annotation, owner and name prefix Crossplane forces on every composed resource.
fn add_composed_metadata(
    object: &mut Map<String, Value>,
    xr: &Value,
    key: &str,
    name: &str,
    ns: Option<&str>,
) {
    let composite_label = xr
        .pointer("/metadata/labels/crossplane.io~1composite")
        .and_then(Value::as_str)
        .unwrap_or(name)
        .to_owned();
    let metadata = object.entry("metadata").or_insert_with(|| json!({}));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    if !metadata.contains_key("name") && !metadata.contains_key("generateName") {
        metadata.insert("generateName".into(), json!(format!("{composite_label}-")));
    }
    if let (Some(ns), false) = (ns, metadata.contains_key("namespace")) {
        metadata.insert("namespace".into(), json!(ns));
    }
    insert_into(metadata, "annotations", COMPOSITION_RESOURCE_NAME, json!(key));
    insert_into(
        metadata,
        "labels",
        "crossplane.io/composite",
        json!(composite_label),
    );
    metadata.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": xr.get("apiVersion"), "kind": xr.get("kind"), "name": name,
            "uid": xr.pointer("/metadata/uid").cloned().unwrap_or_else(|| json!("")),
            "controller": true, "blockOwnerDeletion": true,
        }]),
    );
}

fn insert_into(metadata: &mut Map<String, Value>, field: &str, key: &str, value: Value) {
    if let Some(map) = metadata.entry(field).or_insert_with(|| json!({})).as_object_mut() {
        map.insert(key.into(), value);
    }
}

/// Crossplane's Ready condition: the function's override if it set one, else Available only when every
/// desired composed resource is marked ready.
fn ready_condition(composite_ready: i32, unready: &[&str]) -> Value {
    let available = if composite_ready == Ready::True as i32 {
        true
    } else if composite_ready == Ready::False as i32 {
        false
    } else {
        unready.is_empty()
    };
    if available {
        json!({"type": "Ready", "status": "True", "reason": "Available"})
    } else if unready.is_empty() {
        json!({"type": "Ready", "status": "False", "reason": "Creating"})
    } else {
        json!({"type": "Ready", "status": "False", "reason": "Creating",
               "message": format!("Unready resources: {}", unready.join(", "))})
    }
}

fn status_word(status: i32) -> &'static str {
    match Status::try_from(status) {
        Ok(Status::ConditionTrue) => "True",
        Ok(Status::ConditionFalse) => "False",
        _ => "Unknown",
    }
}

/// Prints a `--until-ready` simulation as a YAML stream under a comment header that says it is one: the final
/// composition, or with `stages` each round's new resources under what the composite still waited for, then
/// the composite and the results as they ended.
pub fn print_simulation(
    simulation: &Simulation,
    stages: bool,
    out: &mut impl Write,
) -> Result<(), RenderError> {
    let rounds = simulation.rounds.len();
    let mut header = comment(&format!(
        "SIMULATION by `render --until-ready`, not a cluster's state: {rounds} reconcile round(s), each \
         observing what the round before composed as Ready. Every observed status (IDs, ARNs, addresses, the \
         cluster gateway's CA, readiness) was invented by the renderer; no cloud or cluster reported it."
    ));
    if !simulation.simulated.is_empty() {
        header += &comment(&format!(
            "Simulated the same way, from the required objects: {}.",
            simulation.simulated.join(", ")
        ));
    }
    header += &comment(&format!("Outcome: {}", outcome_line(simulation)));
    write_text(out, &header)?;
    if !stages {
        return print(&simulation.documents, Format::Yaml, out);
    }
    for (i, round) in simulation.rounds.iter().enumerate() {
        let mut text = comment(&format!(
            "--- round {}: {} new resource(s)",
            i + 1,
            round.new.len()
        ));
        for waiting in &round.waiting {
            text += &comment(&format!("still waiting: {waiting}"));
        }
        write_text(out, &text)?;
        print(&round.new, Format::Yaml, out)?;
    }
    write_text(
        out,
        &comment(&format!("--- the composite and results after round {rounds}")),
    )?;
    let last: Vec<Value> = simulation
        .documents
        .iter()
        .enumerate()
        .filter(|(i, d)| *i == 0 || d["kind"] == "Result")
        .map(|(_, d)| d.clone())
        .collect();
    print(&last, Format::Yaml, out)
}

fn outcome_line(simulation: &Simulation) -> String {
    let waiting = simulation.waiting().join("; ");
    match simulation.outcome {
        Outcome::Ready => "Ready.".into(),
        Outcome::Stuck => format!("settled without becoming Ready, still waiting for {waiting}"),
        Outcome::Unsettled => format!("still changing after {MAX_ROUNDS} rounds, waiting for {waiting}"),
        Outcome::Fatal => format!("FATAL: {waiting}"),
    }
}

/// `text` as YAML comment lines of at most about 110 characters, broken between words.
fn comment(text: &str) -> String {
    const WIDTH: usize = 110;
    let mut lines = vec![String::from("#")];
    for word in text.split_whitespace() {
        let line = lines
            .last_mut()
            .filter(|l| l.len() + 1 + word.len() <= WIDTH || l.len() <= 2);
        match line {
            Some(line) => {
                line.push(' ');
                line.push_str(word);
            }
            None => lines.push(format!("#   {word}")),
        }
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn write_text(out: &mut impl Write, text: &str) -> Result<(), RenderError> {
    out.write_all(text.as_bytes()).map_err(RenderError::write)
}

/// Prints the documents as a YAML stream or a JSON array.
pub fn print(documents: &[Value], format: Format, out: &mut impl Write) -> Result<(), RenderError> {
    let fail = |e: &dyn std::fmt::Display| RenderError::Output(e.to_string());
    match format {
        Format::Yaml => {
            for document in documents {
                let text = serde_yaml::to_string(document).map_err(|e| fail(&e))?;
                write!(out, "---\n{text}").map_err(RenderError::write)?;
            }
        }
        Format::Json => {
            let text = serde_json::to_string_pretty(documents).map_err(|e| fail(&e))?;
            writeln!(out, "{text}").map_err(RenderError::write)?;
        }
    }
    Ok(())
}
