//! `render --until-ready`: the composition a composite reaches after repeated reconciles, simulated.
//!
//! Each round reconciles every composite of a small simulated control plane once: the one rendered, and every
//! Modelplane composite among the required objects that has no status of its own (an example InferenceCluster,
//! a ModelCache). A composite observes what it composed the round before as Ready ([`super::simulate`]), and
//! its requirements are answered from everything the control plane holds: the required objects, every
//! composite with the status it reported last round, and every composed resource. So an example cluster becomes
//! Ready by its own composition, a ModelDeployment schedules on the status that cluster reports, and a
//! ModelCache stages where the deployment's replicas went, as on a real control plane. Required objects that
//! carry a status are taken as observed and never change.
//!
//! Rounds stop once one changes nothing (a fixpoint) or after [`MAX_ROUNDS`]; the composite is then Ready, or
//! it waits on something no simulation supplies, and [`Outcome`] says which.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Inputs, RenderError, composition_key, documents, run, simulate};
use crate::{
    compose::API_GROUP,
    proto::v1::{RunFunctionRequest, RunFunctionResponse, Severity},
};

/// Rounds before giving up. The seed's EKS cluster settles in 7 (its five stages, a round for the rest to be
/// observed Ready, one that changes nothing); the seed ModelDeployment on it in 13, since it schedules only once
/// the cluster is Ready and starts engines only once its cache is staged. Twice that leaves room for more
/// stages without letting a composition that never settles run long.
pub const MAX_ROUNDS: usize = 24;

/// One reconcile of the rendered composite.
#[derive(Debug, Clone)]
pub struct Round {
    /// Composed resources first desired in this round, as `render` prints them.
    pub new: Vec<Value>,
    /// What the composite still waited for after it, from its own conditions.
    pub waiting: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ready,
    /// A round changed nothing, and the composite is not Ready.
    Stuck,
    /// [`MAX_ROUNDS`] rounds and still changing.
    Unsettled,
    /// The function returned a FATAL result for the rendered composite.
    Fatal,
}

#[derive(Debug, Clone)]
pub struct Simulation {
    pub rounds: Vec<Round>,
    /// The last round's documents, as `render` prints them.
    pub documents: Vec<Value>,
    pub response: RunFunctionResponse,
    pub outcome: Outcome,
    /// `Kind name` of each required composite whose status was simulated.
    pub simulated: Vec<String>,
}

impl Simulation {
    /// What the composite waited for when the simulation stopped.
    pub fn waiting(&self) -> &[String] {
        self.rounds.last().map_or(&[], |r| r.waiting.as_slice())
    }
}

/// A composite being reconciled: itself with its latest status, and its composed resources as observed.
#[derive(Debug, Clone, PartialEq)]
struct Member {
    object: Value,
    observed: Vec<Value>,
}

/// Runs rounds until the composition settles; `call` runs one RunFunction request, in-process or remote.
pub async fn run_until_ready<F, Fut>(inputs: &Inputs, mut call: F) -> Result<Simulation, RenderError>
where
    F: FnMut(RunFunctionRequest) -> Fut,
    Fut: Future<Output = Result<RunFunctionResponse, RenderError>>,
{
    let (members, fixed): (Vec<&Value>, Vec<&Value>) = inputs.required.iter().partition(|o| simulated(o));
    let simulated_names = members.iter().map(|o| describe(o)).collect();
    let mut members: Vec<Member> = std::iter::once(&inputs.composite)
        .chain(members)
        .enumerate()
        .map(|(i, object)| Member {
            object: object.clone(),
            observed: if i == 0 {
                inputs.observed.clone()
            } else {
                Vec::new()
            },
        })
        .collect();
    let mut rounds = Vec::new();
    let mut composed_before = BTreeSet::new();
    for _ in 0..MAX_ROUNDS {
        let view: Vec<Value> = fixed
            .iter()
            .map(|o| (*o).clone())
            .chain(
                members
                    .iter()
                    .flat_map(|m| std::iter::once(&m.object).chain(&m.observed))
                    .cloned(),
            )
            .collect();
        let mut next = Vec::with_capacity(members.len());
        let mut main = None;
        for (i, member) in members.iter().enumerate() {
            let member_inputs = Inputs {
                composite: member.object.clone(),
                required: view.clone(),
                observed: member.observed.clone(),
                context: if i == 0 { inputs.context.clone() } else { None },
            };
            let rsp = run(&member_inputs, &mut call).await?;
            let docs = documents(&member_inputs, &rsp)?;
            if let Some(message) = fatal_message(&rsp) {
                if i == 0 {
                    rounds.push(Round {
                        new: Vec::new(),
                        waiting: vec![message],
                    });
                    return Ok(finish(rounds, docs, rsp, Outcome::Fatal, simulated_names));
                }
                return Err(RenderError::Input {
                    path: "--required".into(),
                    reason: format!("{} cannot be simulated: {message}", describe(&member.object)),
                });
            }
            next.push(reconciled(member, &docs));
            if i == 0 {
                main = Some((docs, rsp));
            }
        }
        let Some((docs, rsp)) = main else {
            return Err(RenderError::Output("no composite to render".into()));
        };
        let new: Vec<Value> = composed(&docs)
            .filter(|d| !composed_before.contains(&key_of(d)))
            .cloned()
            .collect();
        composed_before.extend(composed(&docs).map(key_of));
        rounds.push(Round {
            new,
            waiting: waiting_for(&docs),
        });
        let settled = next == members;
        members = next;
        if settled {
            let outcome = if is_ready(&docs) {
                Outcome::Ready
            } else {
                Outcome::Stuck
            };
            return Ok(finish(rounds, docs, rsp, outcome, simulated_names));
        }
        if rounds.len() == MAX_ROUNDS {
            return Ok(finish(rounds, docs, rsp, Outcome::Unsettled, simulated_names));
        }
    }
    Err(RenderError::Output("no round ran".into()))
}

fn finish(
    rounds: Vec<Round>,
    documents: Vec<Value>,
    response: RunFunctionResponse,
    outcome: Outcome,
    simulated: Vec<String>,
) -> Simulation {
    Simulation {
        rounds,
        documents,
        response,
        outcome,
        simulated,
    }
}

/// Whether a required object is a composite this simulation reconciles: a Modelplane kind that composes
/// something and has not brought a status of its own.
fn simulated(object: &Value) -> bool {
    let group = object["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map(|(g, _)| g);
    let kind = object["kind"].as_str().unwrap_or_default();
    group == Some(API_GROUP) && kind != "InferenceClass" && object.get("status").is_none_or(Value::is_null)
}

fn describe(object: &Value) -> String {
    format!(
        "{} {}",
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// `member` after one reconcile: the status the function reported, and what it composed, observed Ready.
fn reconciled(member: &Member, docs: &[Value]) -> Member {
    let mut object = member.object.clone();
    if let Some(status) = docs.first().and_then(|c| c.get("status")) {
        object["status"] = status.clone();
    }
    Member {
        object,
        observed: composed(docs).map(simulate::observe).collect(),
    }
}

/// The composed resources among printed documents: everything after the composite but the results.
fn composed(docs: &[Value]) -> impl Iterator<Item = &Value> {
    docs.iter().skip(1).filter(|d| d["kind"] != "Result")
}

fn key_of(doc: &Value) -> String {
    composition_key(doc).unwrap_or_default().to_owned()
}

fn conditions(docs: &[Value]) -> &[Value] {
    docs.first()
        .and_then(|c| c.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn is_ready(docs: &[Value]) -> bool {
    conditions(docs)
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The composite's conditions that are not True, as `Type: message`. Crossplane's own Ready condition lists
/// every composed resource not observed Ready yet; it is left out when the function says more.
fn waiting_for(docs: &[Value]) -> Vec<String> {
    let pending: Vec<&Value> = conditions(docs)
        .iter()
        .filter(|c| c["status"] != "True")
        .collect();
    let own: Vec<&&Value> = pending.iter().filter(|c| c["type"] != "Ready").collect();
    let shown: Vec<&Value> = if own.is_empty() {
        pending
    } else {
        own.into_iter().copied().collect()
    };
    shown
        .iter()
        .map(|c| {
            let reason = c["message"]
                .as_str()
                .filter(|m| !m.is_empty())
                .or(c["reason"].as_str());
            format!(
                "{}: {}",
                c["type"].as_str().unwrap_or_default(),
                reason.unwrap_or_default()
            )
        })
        .collect()
}

fn fatal_message(rsp: &RunFunctionResponse) -> Option<String> {
    rsp.results
        .iter()
        .find(|r| r.severity == Severity::Fatal as i32)
        .map(|r| r.message.clone())
}

#[cfg(test)]
mod tests;
