//! The cluster sources whose composers have not landed yet (GKE, AKS, Nebius, Vultr): admitted by the XRDs with
//! upstream's fields, refused here by name before anything is composed, so a cluster is never half-provisioned.

use std::collections::BTreeMap;

use serde_json::Value;

use super::provision::{Progress, Provisioner};
use crate::{
    api::{
        inference_class::{InferenceClassSpec, Provider},
        inference_cluster::InferenceClusterSpec,
    },
    compose::{ComposeError, Output},
    proto::v1::RunFunctionRequest,
    stack::Cloud,
};

pub struct Unprovisioned<'a> {
    cloud: Cloud,
    provider: Provider,
    region: Option<&'a str>,
}

impl<'a> Unprovisioned<'a> {
    pub fn new(cloud: Cloud, provider: Provider, region: Option<&'a str>) -> Self {
        Self {
            cloud,
            provider,
            region,
        }
    }
}

impl Provisioner for Unprovisioned<'_> {
    fn cloud(&self) -> Cloud {
        self.cloud
    }

    fn provider(&self) -> Option<Provider> {
        Some(self.provider)
    }

    fn region(&self) -> Option<&str> {
        self.region
    }

    fn check(
        &self,
        _: &InferenceClusterSpec,
        _: &BTreeMap<String, InferenceClassSpec>,
    ) -> Result<(), ComposeError> {
        Err(ComposeError::new(
            "spec.cluster.source",
            format!(
                "{} provisioning is not available in this release",
                self.provider.as_str()
            ),
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
