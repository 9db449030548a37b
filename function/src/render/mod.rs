//! `modelplane-function render`: what `crossplane render` does for one pipeline step, offline.
//!
//! It builds the request Crossplane would send for a composite, runs it through the same handler the server
//! uses (or through a running server), answers the function's requirements from local files the way
//! Crossplane's requirements loop does, and prints the result the way `crossplane render` prints it.
//!
//! `--until-ready` ([`until_ready`]) goes further than `crossplane render`: it reconciles again and again, each
//! time observing what was composed as Ready with provider status [`simulate`] invents, and prints where the
//! composition settles, marked as a simulation.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde_json::{Map, Value};

use crate::{
    proto::v1::{
        Capability, RequestMeta, Requirements, Resource, ResourceSelector, Resources, RunFunctionRequest,
        RunFunctionResponse, Severity, State, resource_selector::Match,
    },
    wire::RawStruct,
};

pub mod command;
mod files;
mod output;
mod request;
pub mod simulate;
pub mod until_ready;

pub use output::{Format, documents, print, print_simulation};
pub use request::RequestBuilder;
pub use until_ready::{Outcome, Simulation, run_until_ready};

/// Crossplane calls a step at most this many times while its requirements change.
pub const MAX_CALLS: usize = 6;

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {reason}")]
    Input { path: PathBuf, reason: String },
    #[error("cannot call the function at {address}: {reason}")]
    Remote { address: String, reason: String },
    #[error("requirements didn't stabilize after the maximum number of iterations ({MAX_CALLS})")]
    Unstable,
    #[error("cannot write output: {0}")]
    Output(String),
    /// Whatever reads the output stopped reading (`render ... | head`): nothing is wrong with the render.
    #[error("the output's reader has gone")]
    ReaderGone,
    /// Flags that cannot be used together.
    #[error("{0}")]
    Usage(String),
}

impl RenderError {
    /// A failed write to the output; a closed pipe is the reader's choice, not an error to report.
    pub fn write(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Self::ReaderGone
        } else {
            Self::Output(e.to_string())
        }
    }

    fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// What `render` reads from disk.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub composite: Value,
    /// Objects the function may require (InferenceClasses, InferenceClusters, ...).
    pub required: Vec<Value>,
    /// Composed resources as they exist now, keyed by their composition-resource-name annotation.
    pub observed: Vec<Value>,
    pub context: Option<Map<String, Value>>,
}

impl Inputs {
    pub fn load(
        composite: &Path,
        required: &[PathBuf],
        observed: &[PathBuf],
        context: Option<&Path>,
    ) -> Result<Self, RenderError> {
        let context = match context {
            None => None,
            Some(path) => match files::read_one(path)? {
                Value::Object(map) => Some(map),
                _ => None,
            },
        };
        let composite_path = composite;
        let composite = files::read_one(composite_path)?;
        // As `kubectl apply` refuses them: a field the XRD does not declare would be dropped by the API server,
        // so what renders here would not be what runs (a misspelt field, or one this version does not have).
        let unknown = crate::validate::unknown_fields(&composite);
        if !unknown.is_empty() {
            let mut fields: Vec<&str> = unknown.iter().take(8).map(|(path, _)| path.as_str()).collect();
            if unknown.len() > fields.len() {
                fields.push("...");
            }
            return Err(RenderError::Input {
                path: composite_path.to_owned(),
                reason: format!(
                    "unknown field(s) {}: the XRD does not declare them, so the API server would drop them \
                     (kubectl apply refuses them)",
                    fields.join(", ")
                ),
            });
        }
        Ok(Self {
            composite,
            required: files::read_objects(required)?,
            observed: files::read_objects(observed)?,
            context,
        })
    }
}

/// The annotation Crossplane keys composed resources by.
pub const COMPOSITION_RESOURCE_NAME: &str = "crossplane.io/composition-resource-name";

/// The key Crossplane knows a composed resource by, from its annotation.
pub fn composition_key(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(COMPOSITION_RESOURCE_NAME))
        .and_then(Value::as_str)
}

/// The first request Crossplane would send for these inputs: the composite and its composed resources
/// observed, nothing desired yet, an empty context unless one was given, every capability advertised.
pub fn first_request(inputs: &Inputs) -> Result<RunFunctionRequest, RenderError> {
    let mut resources = BTreeMap::new();
    for object in &inputs.observed {
        let key = composition_key(object).ok_or_else(|| RenderError::Input {
            path: PathBuf::from("--observed"),
            reason: format!("an observed resource lacks the {COMPOSITION_RESOURCE_NAME} annotation"),
        })?;
        resources.insert(key.to_owned(), resource(object));
    }
    let mut req = bare_request(&inputs.composite);
    if let Some(observed) = req.observed.as_mut() {
        observed.resources = resources;
    }
    if let Some(context) = &inputs.context {
        req.context = Some(RawStruct::from_map(context));
    }
    Ok(req)
}

/// Every capability a current Crossplane advertises.
pub const CAPABILITIES: [Capability; 5] = [
    Capability::Capabilities,
    Capability::RequiredResources,
    Capability::Credentials,
    Capability::Conditions,
    Capability::RequiredSchemas,
];

/// The first request for `composite` alone: observed, nothing desired, an empty context, every capability.
fn bare_request(composite: &Value) -> RunFunctionRequest {
    RunFunctionRequest {
        // crossplane render sends an empty tag too; a function must not depend on its value.
        meta: Some(RequestMeta {
            tag: String::new(),
            capabilities: CAPABILITIES.map(|c| c as i32).to_vec(),
        }),
        observed: Some(State {
            composite: Some(resource(composite)),
            resources: BTreeMap::new(),
        }),
        desired: Some(State::default()),
        context: Some(RawStruct::default()),
        ..Default::default()
    }
}

fn resource(object: &Value) -> Resource {
    Resource {
        resource: RawStruct::from_value(object),
        ..Default::default()
    }
}

/// Runs the requirements loop: call, fetch what the response requires from `inputs.required`, call again, until
/// the requirements stop changing or a FATAL result ends it.
pub async fn run<F, Fut>(inputs: &Inputs, mut call: F) -> Result<RunFunctionResponse, RenderError>
where
    F: FnMut(RunFunctionRequest) -> Fut,
    Fut: Future<Output = Result<RunFunctionResponse, RenderError>>,
{
    let mut req = first_request(inputs)?;
    let mut previous: Option<Requirements> = None;
    for _ in 0..MAX_CALLS {
        let rsp = call(req.clone()).await?;
        let fatal = rsp.results.iter().any(|r| r.severity == Severity::Fatal as i32);
        let requirements = rsp.requirements.clone().unwrap_or_default();
        if fatal || previous.as_ref() == Some(&requirements) || requirements == Requirements::default() {
            return Ok(rsp);
        }
        answer(&mut req, &rsp, &inputs.required);
        previous = Some(requirements);
    }
    Err(RenderError::Unstable)
}

/// The next call after `rsp`, as Crossplane makes it: each requirement answered with what it selects from
/// `objects`, and the context `rsp` returned.
fn answer(req: &mut RunFunctionRequest, rsp: &RunFunctionResponse, objects: &[Value]) {
    let requirements = rsp.requirements.clone().unwrap_or_default();
    req.required_resources = requirements
        .resources
        .iter()
        .map(|(name, selector)| {
            (
                name.clone(),
                Resources {
                    items: select(objects, selector),
                },
            )
        })
        .collect();
    req.context = rsp.context.clone();
}

/// The objects a selector matches, ordered by namespace and name as the API server lists them.
fn select(objects: &[Value], selector: &ResourceSelector) -> Vec<Resource> {
    let field =
        |object: &Value, pointer: &str| object.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
    let mut found: Vec<&Value> = objects
        .iter()
        .filter(|object| {
            field(object, "/apiVersion").as_deref() == Some(selector.api_version.as_str())
                && field(object, "/kind").as_deref() == Some(selector.kind.as_str())
        })
        .filter(|object| {
            let namespace = field(object, "/metadata/namespace");
            match (&selector.r#match, &selector.namespace) {
                (Some(Match::MatchName(name)), ns) => {
                    field(object, "/metadata/name").as_ref() == Some(name)
                        && namespace.as_ref() == ns.as_ref()
                }
                (matcher, ns) => {
                    let in_namespace = ns.is_none() || namespace.as_ref() == ns.as_ref();
                    let labels = object.pointer("/metadata/labels");
                    let labelled = match matcher {
                        Some(Match::MatchLabels(wanted)) => wanted.labels.iter().all(|(k, v)| {
                            labels.and_then(|l| l.get(k)).and_then(Value::as_str) == Some(v.as_str())
                        }),
                        _ => true,
                    };
                    in_namespace && labelled
                }
            }
        })
        .collect();
    found.sort_by_key(|object| {
        (
            field(object, "/metadata/namespace"),
            field(object, "/metadata/name"),
        )
    });
    found.into_iter().map(resource).collect()
}
