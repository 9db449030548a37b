//! A cluster nobody of ours provisions: reached with the kubeconfig the user's Secret holds, its caches staged on
//! the ReadWriteMany class the user names, its pools offered as soon as the cluster is reachable.

use super::provision::{self, ClusterInput, Progress, Provisioned, Provisioner};
use crate::{
    api::inference_cluster::ExistingCluster,
    compose::{ComposeError, Output},
    stack::Cloud,
};

pub struct Existing<'a> {
    cluster: &'a ExistingCluster,
}

impl<'a> Existing<'a> {
    pub fn new(cluster: &'a ExistingCluster) -> Self {
        Self { cluster }
    }
}

impl Provisioner for Existing<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Generic
    }

    /// Nothing to check: nobody of ours provisions it.
    fn check(&self, _: &ClusterInput) -> Result<(), ComposeError> {
        Ok(())
    }

    /// Ready as given, reached through the kubeconfig Secret the spec names.
    fn compose(&self, _: &ClusterInput, _: &mut Output) -> Result<Provisioned, ComposeError> {
        let secret = &self.cluster.secret_ref;
        Ok(Provisioned {
            progress: Progress {
                cluster_ready: true,
                waiting: Vec::new(),
            },
            workload_credentials: provision::kubeconfig_credentials(
                &secret.name,
                &secret.namespace,
                &secret.key,
            ),
        })
    }

    fn cache_storage_class(&self, _: &Output) -> Option<String> {
        self.cluster.cache.as_ref().map(|c| c.storage_class_name.clone())
    }

    fn pool_key(&self, _: &str) -> Option<String> {
        None
    }

    fn uses(&self, _: &str, _: &str) -> Vec<String> {
        Vec::new()
    }
}
