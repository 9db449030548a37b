//! A AKS cluster provider-upjet-azure provisions. Not composed yet: a cluster of this source is refused by name.

use std::collections::BTreeMap;

use serde_json::Value;

use super::provision::{Progress, Provisioner};
use crate::{
    api::{
        inference_class::{InferenceClassSpec, Provider},
        inference_cluster::{AksCluster, InferenceClusterSpec},
    },
    compose::{ComposeError, Output},
    proto::v1::RunFunctionRequest,
    stack::Cloud,
};

pub struct Aks<'a> {
    cluster: &'a AksCluster,
}

impl<'a> Aks<'a> {
    pub fn new(cluster: &'a AksCluster) -> Self {
        Self { cluster }
    }
}

impl Provisioner for Aks<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Aks
    }

    fn provider(&self) -> Option<Provider> {
        Some(Provider::Aks)
    }

    fn region(&self) -> Option<&str> {
        Some(&self.cluster.location)
    }

    fn check(
        &self,
        _: &InferenceClusterSpec,
        _: &BTreeMap<String, InferenceClassSpec>,
    ) -> Result<(), ComposeError> {
        let _ = self.cluster;
        Err(ComposeError::new(
            "spec.cluster.source",
            "AKS provisioning is not available in this release",
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
