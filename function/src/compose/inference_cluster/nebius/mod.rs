//! A Nebius cluster provider-upjet-nebius provisions. Not composed yet: a cluster of this source is refused by name.

use std::collections::BTreeMap;

use serde_json::Value;

use super::provision::{Progress, Provisioner};
use crate::{
    api::{
        inference_class::{InferenceClassSpec, Provider},
        inference_cluster::{InferenceClusterSpec, NebiusCluster},
    },
    compose::{ComposeError, Output},
    proto::v1::RunFunctionRequest,
    stack::Cloud,
};

pub struct Nebius<'a> {
    cluster: &'a NebiusCluster,
}

impl<'a> Nebius<'a> {
    pub fn new(cluster: &'a NebiusCluster) -> Self {
        Self { cluster }
    }
}

impl Provisioner for Nebius<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Nebius
    }

    fn provider(&self) -> Option<Provider> {
        Some(Provider::Nebius)
    }

    fn region(&self) -> Option<&str> {
        None
    }

    fn check(
        &self,
        _: &InferenceClusterSpec,
        _: &BTreeMap<String, InferenceClassSpec>,
    ) -> Result<(), ComposeError> {
        let _ = self.cluster;
        Err(ComposeError::new(
            "spec.cluster.source",
            "Nebius provisioning is not available in this release",
        ))
    }

    fn compose(
        &self,
        _: &RunFunctionRequest,
        _: &mut Output,
        _: &str,
        _: &InferenceClusterSpec,
        _: &BTreeMap<String, InferenceClassSpec>,
    ) -> Result<Progress, ComposeError> {
        Ok(Progress::default())
    }

    fn workload_credentials(&self, _: &str) -> Value {
        Value::Null
    }

    fn cache_storage_class(&self, _: &Output) -> Option<String> {
        None
    }

    fn pool_key(&self, _: &str) -> Option<String> {
        None
    }

    fn uses(&self, _: &str, _: &str) -> Vec<String> {
        Vec::new()
    }
}
