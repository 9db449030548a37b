//! The ModelServices of a deployment's namespace, read only while one of its replicas moves: a move hands
//! traffic over only as fast as the services route it. The new placement's endpoint must be listed by every
//! service that selects it before the old endpoint goes, and the old endpoint must have left every service's
//! route before the old workload goes. Each service says what its applied routes list in
//! `status.endpoints.routed`.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{
    api::routing::MatchLabels,
    compose::API_VERSION,
    proto::v1::{ResourceSelector, RunFunctionRequest},
    sdk::request,
};

/// The requirement naming the namespace's ModelServices.
pub const SERVICES: &str = "model-services";
/// A service routes at most this many endpoints (`model_service::crate::compose::shared::MAX_BACKENDS`); a full one may leave
/// a new endpoint out for good, so a move does not wait on it.
const ROUTE_CAPACITY: usize = crate::compose::shared::MAX_BACKENDS;

pub fn requirement(namespace: &str) -> ResourceSelector {
    ResourceSelector {
        api_version: API_VERSION.into(),
        kind: "ModelService".into(),
        r#match: None,
        namespace: Some(namespace.to_owned()),
    }
}

#[derive(Default, Deserialize)]
struct ServiceView {
    #[serde(default)]
    spec: SpecView,
    #[serde(default)]
    status: StatusView,
}

#[derive(Default, Deserialize)]
struct SpecView {
    #[serde(default)]
    endpoints: Vec<EntryView>,
}

#[derive(Default, Deserialize)]
struct EntryView {
    #[serde(default)]
    selector: MatchLabels,
}

#[derive(Default, Deserialize)]
struct StatusView {
    #[serde(default)]
    endpoints: CountsView,
}

#[derive(Default, Deserialize)]
struct CountsView {
    #[serde(default)]
    routed: Vec<String>,
}

/// The namespace's ModelServices as Crossplane fetched them.
pub struct Services(Vec<ServiceView>);

impl Services {
    /// None while Crossplane has not answered the requirement.
    pub fn read(req: &RunFunctionRequest) -> Option<Self> {
        let found = request::required_resources(req, SERVICES)?;
        Some(Self(
            found
                .iter()
                .filter_map(|r| r.resource.as_ref()?.parse::<ServiceView>().ok())
                .collect(),
        ))
    }

    /// Whether every service that selects an endpoint labelled `labels` routes `name`. A service that routes
    /// nothing (no gateway serves it) or is full is not waited on: it would not route the endpoint soon.
    pub fn route(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.0
            .iter()
            .filter(|s| s.spec.endpoints.iter().any(|e| e.selector.matches(labels)))
            .filter(|s| {
                !s.status.endpoints.routed.is_empty() && s.status.endpoints.routed.len() < ROUTE_CAPACITY
            })
            .all(|s| s.status.endpoints.routed.iter().any(|r| r == name))
    }

    /// Whether some service still routes `name`.
    pub fn still_route(&self, name: &str) -> bool {
        self.0
            .iter()
            .any(|s| s.status.endpoints.routed.iter().any(|r| r == name))
    }
}
