//! A GKE cluster provider-upjet-gcp provisions. Not composed yet: a cluster of this source is refused by name.

use std::collections::BTreeMap;

use serde_json::Value;

use super::provision::{Progress, Provisioner};
use crate::{
    api::{
        inference_class::{InferenceClassSpec, Provider},
        inference_cluster::{GkeCluster, InferenceClusterSpec},
    },
    compose::{ComposeError, Output},
    proto::v1::RunFunctionRequest,
    stack::Cloud,
};

pub struct Gke<'a> {
    cluster: &'a GkeCluster,
}

impl<'a> Gke<'a> {
    pub fn new(cluster: &'a GkeCluster) -> Self {
        Self { cluster }
    }
}

impl Provisioner for Gke<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Gke
    }

    fn provider(&self) -> Option<Provider> {
        Some(Provider::Gke)
    }

    fn region(&self) -> Option<&str> {
        Some(&self.cluster.region)
    }

    fn check(
        &self,
        _: &InferenceClusterSpec,
        _: &BTreeMap<String, InferenceClassSpec>,
    ) -> Result<(), ComposeError> {
        let _ = self.cluster;
        Err(ComposeError::new(
            "spec.cluster.source",
            "GKE provisioning is not available in this release",
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
