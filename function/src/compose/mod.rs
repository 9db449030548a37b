//! One pure composer per composite kind.
//!
//! A composer reads the request (the observed composite as a typed view, observed composed resources,
//! required resources) and returns an [`Output`]: what it wants composed, the composite's status, and what it
//! needs Crossplane to fetch. Composers do no I/O and read no clock, with one exception: the ModelDeployment
//! composer's entry ([`model_deployment::compose`]) reads the fleet's last metrics sample and the time it is
//! read at, and hands both to [`model_deployment::compose_with`], which tests call with a fixed reading. So for
//! the same request (and, for a ModelDeployment, the same sample) the server, `render` and the tests all get
//! the same answer.
//!
//! Every composer builds what it composes as a compact [`crate::wire::tree::Tree`] (`tree!`/`fields!`), through
//! the envelopes Crossplane and its providers define: [`remote::Object`] (provider-kubernetes),
//! [`crossplane::release`] (provider-helm), [`crossplane::ManagedResource`] and [`crossplane::usage`].

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::{
    api::TypeMeta,
    proto::v1::{ResourceSelector, RunFunctionRequest, Status},
    wire::RawStruct,
};

mod composed;
pub mod conditions;
pub mod crossplane;
pub use composed::ComposedObject;
pub mod inference_class;
pub mod inference_cluster;
pub mod inference_gateway;
#[cfg(test)]
mod ledger_sim;
pub mod model_cache;
pub mod model_deployment;
pub mod model_endpoint;
pub mod model_service;
pub mod remote;
pub mod shared;

pub use crate::error::ComposeError;
pub use conditions::{ConditionType, Reason};

#[cfg(test)]
pub mod fixtures;

/// API group of every Modelplane composite.
pub const API_GROUP: &str = "modelplane.ai";
/// The one API version the composers read today.
pub const API_VERSION: &str = "modelplane.ai/v1alpha1";

/// A composer: the request and its observed composite in, what to compose out.
pub type ComposeFn = fn(&RunFunctionRequest, &RawStruct) -> Result<Output, ComposeError>;

/// The composite kinds this function serves, and the composer for each.
pub const COMPOSERS: &[(&str, ComposeFn)] = &[
    ("InferenceClass", inference_class::compose),
    ("InferenceCluster", inference_cluster::compose),
    ("InferenceGateway", inference_gateway::compose),
    ("ModelCache", model_cache::compose),
    ("ModelDeployment", model_deployment::compose),
    ("ModelEndpoint", model_endpoint::compose),
    ("ModelService", model_service::compose),
];

/// Finds the composer for an observed composite in `composers` ([`COMPOSERS`], or a table a test injects), or
/// says why there is none.
pub fn composer_in(composers: &[(&str, ComposeFn)], type_meta: &TypeMeta) -> Result<ComposeFn, String> {
    let served = || {
        composers
            .iter()
            .map(|(kind, _)| *kind)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (group, _) = type_meta
        .api_version
        .split_once('/')
        .unwrap_or(("", &type_meta.api_version));
    let Some((_, compose)) = composers.iter().find(|(served, _)| *served == type_meta.kind) else {
        return Err(format!(
            "composite kind {:?} (apiVersion {:?}) is not served by this function; it serves {API_GROUP} {}",
            type_meta.kind,
            type_meta.api_version,
            served()
        ));
    };
    if group != API_GROUP || type_meta.api_version != API_VERSION {
        return Err(format!(
            "composite {} has apiVersion {:?}; this function reads {API_VERSION}",
            type_meta.kind, type_meta.api_version
        ));
    }
    Ok(*compose)
}

/// One desired composed resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Composed {
    pub object: ComposedObject,
    /// Only resources known to be ready are marked so; Crossplane counts anything else as not ready.
    pub ready: bool,
}

/// A custom condition for the composite.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionOut {
    pub type_: &'static str,
    pub status: Status,
    pub reason: &'static str,
    pub message: Option<String>,
}

/// Everything a composer decided for one request.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Output {
    /// Fields for the composite's `status`.
    pub status: Map<String, Value>,
    /// Desired composed resources by composition resource name.
    pub resources: BTreeMap<String, Composed>,
    /// What Crossplane must fetch and send back under each requirement name. Must be the same on every call once
    /// met, or Crossplane's requirements loop never settles.
    pub requirements: BTreeMap<String, ResourceSelector>,
    pub conditions: Vec<ConditionOut>,
    /// Overrides Crossplane's readiness calculation for the composite when set.
    pub ready: Option<bool>,
    /// Warning results, to be raised as events.
    pub warnings: Vec<String>,
    /// How long Crossplane may wait before composing again; the default TTL when unset.
    pub ttl: Option<std::time::Duration>,
}

/// The response TTL while something waits (an unplaced replica, a cache not Ready, a placement not yet
/// admitted or over-committed): Crossplane requeues after it, so the wait is retried without watches.
pub const WAITING_TTL: std::time::Duration = std::time::Duration::from_secs(15);

#[cfg(test)]
impl Output {
    /// The condition of `type_` this output reports; a test that expects none to be missing panics naming it.
    pub fn reported(&self, type_: &str) -> &ConditionOut {
        self.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap_or_else(|| panic!("no {type_} condition reported"))
    }
}

impl Output {
    /// Composes `object` under `key`; `ready` only when it is known to be.
    pub fn compose(&mut self, key: impl Into<String>, object: impl Into<ComposedObject>, ready: bool) {
        let object = object.into();
        self.resources.insert(key.into(), Composed { object, ready });
    }

    /// Merges the fields `status` serializes into the composite's status: a composer writes its status through
    /// the typed struct of its kind, and a field the struct leaves out keeps what an earlier call set.
    pub fn set_status(&mut self, status: &impl serde::Serialize) -> Result<(), ComposeError> {
        match serde_json::to_value(status) {
            Ok(Value::Object(fields)) => {
                self.status.extend(fields);
                Ok(())
            }
            Ok(other) => Err(ComposeError::new(
                "status",
                format!("internal error: a status must be an object, not {other}"),
            )),
            Err(e) => Err(ComposeError::caused_by("status", "internal error", e)),
        }
    }

    /// Asks Crossplane to compose again by `at` (a grace period running out), sooner if already asked.
    pub fn compose_again_by(&mut self, at: jiff::Timestamp, now: jiff::Timestamp) {
        let left = std::time::Duration::try_from(at.duration_since(now)).unwrap_or_default();
        let ttl = self.ttl.map_or(left, |ttl| ttl.min(left));
        // Never zero: Crossplane reads a zero TTL as its default.
        self.ttl = Some(ttl.max(std::time::Duration::from_secs(1)));
    }

    pub fn condition(
        &mut self,
        type_: ConditionType,
        status: Status,
        reason: Reason,
        message: impl Into<String>,
    ) {
        let message = message.into();
        self.conditions.push(ConditionOut {
            type_: type_.as_str(),
            status,
            reason: reason.as_str(),
            message: (!message.is_empty()).then_some(message),
        });
    }
}
