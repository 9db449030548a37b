//! `ModelCache`: a Hugging Face model staged once per cluster on shared storage. Namespaced.
//!
//! Engines name the model by its repo id and get `HF_HUB_CACHE` pointed at the mount, so the Hub client inside
//! the engine resolves `org/name` against the staged snapshot instead of downloading it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where every cache volume is mounted, in hydration Jobs and engine pods alike, and what `HF_HUB_CACHE` is set
/// to. One path for both, so what the Job writes is exactly where the engine looks.
pub const MOUNT_PATH: &str = "/mnt/models";

/// The PVC holding a cache on a workload cluster. The ModelCache composer creates it and the ModelDeployment
/// composer mounts it: both call this, so the names cannot disagree.
pub fn pvc_name(cache_name: &str) -> String {
    format!("modelcache-{cache_name}")
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCacheSpec {
    #[serde(default)]
    pub source: CacheSource,
    pub hugging_face: HuggingFace,
    /// Clusters to stage on ahead of any deployment. Clusters where a deployment using this cache is placed
    /// get it as well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<LabelSelector>,
}

/// Where weights come from. One source today, named as upstream Modelplane names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum CacheSource {
    #[default]
    HuggingFace,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HuggingFace {
    /// Repo id, `org/name`.
    pub repo: String,
    #[serde(default = "default_revision")]
    pub revision: String,
    /// Secret (in the ModelCache's namespace) holding a Hub token, for gated or private repos.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret: Option<SecretKey>,
    /// Size of the volume in GiB. Size it for the whole snapshot.
    #[serde(rename = "sizeGiB")]
    pub size_gib: u32,
}

impl HuggingFace {
    /// The volume request, as a Kubernetes quantity.
    pub fn volume_size(&self) -> String {
        format!("{}Gi", self.size_gib)
    }
}

fn default_revision() -> String {
    "main".into()
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct SecretKey {
    pub name: String,
    pub key: String,
}

/// A Kubernetes label selector (`matchLabels` and `matchExpressions`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum SelectorOperator {
    #[default]
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl LabelSelector {
    /// Whether `labels` satisfy every requirement. An empty selector matches everything.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|req| {
                let value = labels.get(&req.key);
                match req.operator {
                    SelectorOperator::In => value.is_some_and(|v| req.values.contains(v)),
                    SelectorOperator::NotIn => value.is_none_or(|v| !req.values.contains(v)),
                    SelectorOperator::Exists => value.is_some(),
                    SelectorOperator::DoesNotExist => value.is_none(),
                }
            })
    }
}

/// How far a cache is on one cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum Phase {
    /// Waiting for something outside the cache (the volume, the cluster, the auth secret).
    Pending,
    /// The download Job is running.
    Hydrating,
    /// The full snapshot is on the volume; engines may start.
    Ready,
    /// The download Job gave up; `reason` says why.
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCache {
    pub cluster: String,
    pub phase: Phase,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// What the cluster's downloader last reported, once it has.
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub progress: Option<StagingProgress>,
}

impl ClusterCache {
    pub fn new(cluster: &str, phase: Phase, reason: impl Into<String>) -> Self {
        Self {
            cluster: cluster.to_owned(),
            phase,
            reason: reason.into(),
            progress: None,
        }
    }

    /// How far the cluster is, 0 to 100: a Ready cluster is done whatever it reported.
    pub fn percent(&self) -> u32 {
        match (&self.progress, self.phase) {
            (_, Phase::Ready) => 100,
            (Some(progress), _) => progress.percent,
            (None, _) => 0,
        }
    }
}

/// The figures the hydration Job reports (`modelplane-function stage`), as of its last report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StagingProgress {
    pub files_staged: u64,
    pub files_total: u64,
    pub bytes_staged: u64,
    pub bytes_total: u64,
    /// `bytesStaged` of `bytesTotal`, rounded down (100 only once every byte is checked).
    pub percent: u32,
    /// The commit the revision pointed at when the download listed it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub commit: String,
    /// The last failed attempt (a refused request, bad bytes, a cut connection), retried or not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_error: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCacheStatus {
    #[serde(default)]
    pub clusters: Vec<ClusterCache>,
    /// How far staging is across the clusters, 0 to 100 (the mean of theirs): `kubectl get`'s STAGED column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged_percent: Option<u32>,
}
