//! A Vultr cluster provider-upjet-vultr provisions. Not composed yet: a cluster of this source is refused by name.

use std::collections::BTreeMap;

use serde_json::Value;

use super::provision::{Progress, Provisioner};
use crate::{
    api::{
        inference_class::{InferenceClassSpec, Provider},
        inference_cluster::{InferenceClusterSpec, VultrCluster},
    },
    compose::{ComposeError, Output},
    proto::v1::RunFunctionRequest,
    stack::Cloud,
};

pub struct Vultr<'a> {
    cluster: &'a VultrCluster,
}

impl<'a> Vultr<'a> {
    pub fn new(cluster: &'a VultrCluster) -> Self {
        Self { cluster }
    }
}

impl Provisioner for Vultr<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Vultr
    }

    fn provider(&self) -> Option<Provider> {
        Some(Provider::Vultr)
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
            "Vultr provisioning is not available in this release",
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
