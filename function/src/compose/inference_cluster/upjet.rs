//! What every cloud composed through an upjet provider (GKE, AKS, Nebius, Vultr) shares: the namespaced
//! managed-resource envelope (`<group>.m.upbound.io`, built by [`ManagedResource`]), the provider config each MR authenticates with, the
//! connection secret a cluster's kubeconfig lands in, the GPU pools' labels, taints
//! and autoscaling range.
//!
//! Each cloud's module builds its `forProvider` blocks; this one keeps the envelope identical across them, so
//! deletion order (Usages), readiness and naming work the same on every cloud.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{
    observed::Observed,
    provision::{self, ClusterInput, Credentials},
};
use crate::{
    api::inference_cluster::{
        AksCluster, GPU_TAINT_EFFECT, GPU_TAINT_KEY, GkeCluster, InferenceClusterSpec, NebiusCluster,
        NodePool, POOL_LABEL, ProviderConfigRef, TaintEffect, VultrCluster,
    },
    compose::crossplane::ManagedResource,
    wire::tree::{Tree, tree},
};

/// Node label carrying a GPU pool's accelerator type, as upstream Modelplane's node pools carry it.
pub const GPU_LABEL: &str = "modelplane.ai/gpu";

/// A cloud's block of `spec.cluster` (`gke`, `aks`, ...) as the upjet machinery reads it: the provider config
/// its managed resources authenticate with.
pub trait UpjetCluster {
    /// Where the spec names the provider config, for errors.
    const CREDENTIALS_FIELD: &'static str;
    /// The API version of the provider's (Cluster)ProviderConfig kinds.
    const PROVIDER_CONFIG_API_VERSION: &'static str;

    fn credentials(&self) -> &ProviderConfigRef;
}

/// Each cloud's spec block names its provider config in `credentials`.
macro_rules! upjet_cluster {
    ($cluster:ty, $field:literal, $api_version:literal) => {
        impl UpjetCluster for $cluster {
            const CREDENTIALS_FIELD: &'static str = $field;
            const PROVIDER_CONFIG_API_VERSION: &'static str = $api_version;
            fn credentials(&self) -> &ProviderConfigRef {
                &self.credentials
            }
        }
    };
}

upjet_cluster!(
    GkeCluster,
    "spec.cluster.gke.credentials",
    "gcp.m.upbound.io/v1beta1"
);
upjet_cluster!(
    AksCluster,
    "spec.cluster.aks.credentials",
    "azure.m.upbound.io/v1beta1"
);
upjet_cluster!(
    NebiusCluster,
    "spec.cluster.nebius.credentials",
    "nebius.m.upbound.io/v1beta1"
);
upjet_cluster!(
    VultrCluster,
    "spec.cluster.vultr.credentials",
    "vultr.m.upbound.io/v1beta1"
);

/// The provider config `cluster`'s managed resources use, as `Provisioner::credentials` reports it.
pub fn credentials<C: UpjetCluster>(cluster: &C) -> Credentials {
    Credentials::new(
        C::CREDENTIALS_FIELD,
        C::PROVIDER_CONFIG_API_VERSION,
        cluster.credentials(),
    )
}

/// What every stage of an upjet cloud reads: the cluster's name, its cloud's spec block `C` and what is observed.
pub struct Context<'a, C> {
    pub name: &'a str,
    pub cluster: &'a C,
    pub seen: &'a Observed<'a>,
}

impl<'a, C: UpjetCluster> Context<'a, C> {
    pub fn new(input: &ClusterInput<'a>, cluster: &'a C, seen: &'a Observed<'a>) -> Self {
        Self {
            name: input.name,
            cluster,
            seen,
        }
    }

    /// A namespaced MR of the cluster named `name`, authenticated by the cluster's provider config.
    pub fn managed(&self, api_version: &str, kind: &str, name: &str, for_provider: Tree) -> ManagedResource {
        let credentials = self.cluster.credentials();
        let provider_config = tree!({"kind": credentials.kind.as_str(), "name": &credentials.name});
        ManagedResource::new(api_version, kind, name, provider_config, for_provider)
    }

    /// The cluster's own MR, named after the cluster, writing its kubeconfig where provider-kubernetes and
    /// provider-helm read it ([`provision::kubeconfig_secret`]).
    pub fn cluster_managed(&self, api_version: &str, kind: &str, for_provider: Tree) -> ManagedResource {
        self.managed(api_version, kind, self.name, for_provider)
            .connection_secret(provision::kubeconfig_secret(self.name))
    }

    /// A non-empty string at `pointer` of the resource under `key`, once it is observed Ready.
    pub fn ready_string(&self, key: &str, pointer: &str) -> Option<String> {
        non_empty(self.seen.ready_field(key, pointer))
    }

    /// A non-empty string at `pointer` of what the resource under `key` was last composed with.
    pub fn spec_string(&self, key: &str, pointer: &str) -> Option<String> {
        non_empty(self.seen.spec_field(key, pointer))
    }

    /// An input a resource is built from: read from the stage before (`from`: key and pointer) once that is Ready,
    /// else, for a resource that exists, what it was composed with (`own`), so it stays composed, unchanged, while
    /// what it was built from is not observed.
    pub fn input(&self, from: (&str, &str), own: (&str, &str)) -> Option<String> {
        self.ready_string(from.0, from.1)
            .or_else(|| self.spec_string(own.0, own.1))
    }
}

fn non_empty(value: Option<Value>) -> Option<String> {
    value
        .and_then(|v| v.as_str().map(str::to_owned))
        .filter(|s| !s.is_empty())
}

/// The labels every node of `pool` carries: its pool (what replicas are pinned by) and, for a GPU pool, its
/// accelerator type.
pub fn pool_labels(pool: &str, accelerator: Option<&str>) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([(POOL_LABEL.to_owned(), pool.to_owned())]);
    if let Some(accelerator) = accelerator {
        labels.insert(GPU_LABEL.to_owned(), accelerator.to_owned());
    }
    labels
}

/// One taint of a GPU node, before a cloud spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTaint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

/// The GPU taint (which keeps everything but GPU workloads off GPU nodes) and the cluster's own taints, on every
/// GPU node.
pub fn gpu_taints(spec: &InferenceClusterSpec) -> Vec<NodeTaint> {
    debug_assert_eq!(GPU_TAINT_EFFECT, TaintEffect::NoSchedule.as_str());
    let mut taints = vec![NodeTaint {
        key: GPU_TAINT_KEY.into(),
        value: "true".into(),
        effect: TaintEffect::NoSchedule,
    }];
    taints.extend(spec.taints.iter().map(|t| NodeTaint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: t.effect,
    }));
    taints
}

/// The autoscaling range of a pool: `minNodeCount`..`maxNodeCount` around `nodeCount`; without a range the pool
/// stays at its node count.
pub fn node_range(pool: &NodePool) -> (u32, u32) {
    (
        pool.min_node_count.unwrap_or(pool.node_count),
        pool.max_node_count.unwrap_or(pool.node_count),
    )
}
