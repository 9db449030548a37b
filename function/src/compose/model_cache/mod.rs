//! Stages a `ModelCache` on every cluster that needs it: a ReadWriteMany volume on the cluster's cache storage
//! class, the Hub token (when the repo needs one), and a download Job that is dropped once the snapshot is
//! complete.
//!
//! Which clusters: those matching `spec.clusterSelector` (staging ahead of demand) plus every cluster where a
//! ModelDeployment in the same namespace that references this cache has a replica placed. With neither, the
//! cache stages nowhere: a 480B model is a terabyte per cluster, so nothing is staged speculatively.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use super::{ComposeError, Output, remote};
use crate::compose::conditions::{ConditionType, Reason};
use crate::wire::tree::tree;
use crate::{
    api::{
        ObjectMeta,
        model_cache::{ClusterCache, ModelCacheSpec, ModelCacheStatus, Phase},
        model_deployment::ModelDeploymentStatus,
    },
    proto::v1::{ResourceSelector, RunFunctionRequest, Status, resource_selector::Match},
    schedule::ClusterView,
    sdk::request,
    wire::RawStruct,
};

mod hydrate;
mod progress;

const CLUSTERS: &str = "clusters";
const DEPLOYMENTS: &str = "deployments";
const AUTH_SECRET: &str = "auth-secret";

#[derive(Deserialize)]
struct ModelCache {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: ModelCacheSpec,
    #[serde(default)]
    status: ModelCacheStatus,
}

/// Where a ModelDeployment's replicas are and which cache it uses; nothing else of it is read.
#[derive(Deserialize)]
struct DeploymentView {
    #[serde(default)]
    spec: DeploymentSpecView,
    #[serde(default)]
    status: ModelDeploymentStatus,
}

#[derive(Default, Deserialize)]
struct DeploymentSpecView {
    #[serde(default)]
    template: TemplateView,
}

#[derive(Default, Deserialize)]
struct TemplateView {
    #[serde(default)]
    spec: TemplateSpecView,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TemplateSpecView {
    model_cache_ref: Option<NameRef>,
}

#[derive(Default, Deserialize)]
struct NameRef {
    name: String,
}

/// Job status fields that tell completion from failure.
#[derive(Default, Deserialize)]
struct JobView {
    #[serde(default)]
    status: JobStatusView,
}

#[derive(Default, Deserialize)]
struct JobStatusView {
    #[serde(default)]
    conditions: Vec<remote::ConditionView>,
}

pub fn compose(req: &RunFunctionRequest, xr: &RawStruct) -> Result<Output, ComposeError> {
    let cache: ModelCache = xr.parse()?;
    if cache.spec.hugging_face.size_gib == 0 {
        return Err(ComposeError::new(
            "spec.huggingFace.sizeGiB",
            "must be at least 1: the volume holds the whole snapshot",
        ));
    }
    let namespace = cache.metadata.namespace.as_deref().unwrap_or_default().to_owned();
    let mut out = Output {
        requirements: requirements(&cache, &namespace),
        ..Default::default()
    };
    let (Some(clusters), Some(deployments)) = (
        request::required_resources(req, CLUSTERS),
        request::required_resources(req, DEPLOYMENTS),
    ) else {
        return Ok(out);
    };
    let auth = match &cache.spec.hugging_face.auth_secret {
        None => Auth::NotNeeded,
        Some(secret) => match request::required_resources(req, AUTH_SECRET) {
            None => return Ok(out),
            Some(found) => check_secret(found, &namespace, &secret.name, &secret.key),
        },
    };

    let clusters = clusters
        .iter()
        .filter_map(|c| c.resource.as_ref()?.parse::<ClusterView>().ok())
        .map(|c| (c.metadata.name.clone(), c))
        .collect::<BTreeMap<_, _>>();
    let targets = target_clusters(&cache, &clusters, deployments);
    let previously_ready: BTreeSet<&str> = cache
        .status
        .clusters
        .iter()
        .filter(|c| c.phase == Phase::Ready)
        .map(|c| c.cluster.as_str())
        .collect();

    let mut states = Vec::new();
    for name in &targets {
        let state = match clusters.get(name) {
            None => pending(name, "the InferenceCluster no longer exists"),
            Some(cluster) => {
                let ready = previously_ready.contains(name.as_str());
                with_progress(
                    req,
                    stage(req, &cache, &namespace, cluster, &auth, ready, &mut out),
                )
            }
        };
        states.push(state);
    }
    report(&mut out, &cache, &auth, states)?;
    Ok(out)
}

fn requirements(cache: &ModelCache, namespace: &str) -> BTreeMap<String, ResourceSelector> {
    let select =
        |api_version: &str, kind: &str, name: Option<&str>, namespace: Option<&str>| ResourceSelector {
            api_version: api_version.into(),
            kind: kind.into(),
            r#match: name.map(|n| Match::MatchName(n.into())),
            namespace: namespace.map(str::to_owned),
        };
    let mut wanted = BTreeMap::from([
        (
            CLUSTERS.to_owned(),
            select("modelplane.ai/v1alpha1", "InferenceCluster", None, None),
        ),
        (
            DEPLOYMENTS.to_owned(),
            select("modelplane.ai/v1alpha1", "ModelDeployment", None, Some(namespace)),
        ),
    ]);
    if let Some(secret) = &cache.spec.hugging_face.auth_secret {
        wanted.insert(
            AUTH_SECRET.to_owned(),
            select("v1", "Secret", Some(&secret.name), Some(namespace)),
        );
    }
    wanted
}

/// Whether the Hub token can be propagated; when not, what is missing.
enum Auth {
    NotNeeded,
    Available { secret: String, key: String },
    Missing(String),
}

/// The keys of the token Secret (their values are never read).
#[derive(Deserialize)]
struct SecretView {
    #[serde(default)]
    data: BTreeMap<String, Value>,
}

/// Whether the cache's own namespace holds the token Secret with its key: another namespace's Secret of that name,
/// whatever arrives, is not it.
fn check_secret(found: &[crate::proto::v1::Resource], namespace: &str, name: &str, key: &str) -> Auth {
    let Some(secret) = request::named_in(found, name, namespace).and_then(|s| s.parse::<SecretView>().ok())
    else {
        return Auth::Missing(format!(
            "Secret {namespace}/{name} (spec.huggingFace.authSecret) not found"
        ));
    };
    if !secret.data.contains_key(key) {
        return Auth::Missing(format!(
            "Secret {namespace}/{name} has no key {key:?} (spec.huggingFace.authSecret.key)"
        ));
    }
    Auth::Available {
        secret: name.to_owned(),
        key: key.to_owned(),
    }
}

fn target_clusters(
    cache: &ModelCache,
    clusters: &BTreeMap<String, ClusterView>,
    deployments: &[crate::proto::v1::Resource],
) -> BTreeSet<String> {
    let mut targets: BTreeSet<String> = match &cache.spec.cluster_selector {
        Some(selector) => clusters
            .values()
            .filter(|c| selector.matches(&c.metadata.labels))
            .map(|c| c.metadata.name.clone())
            .collect(),
        None => BTreeSet::new(),
    };
    for deployment in deployments
        .iter()
        .filter_map(|d| d.resource.as_ref()?.parse::<DeploymentView>().ok())
    {
        let uses_cache = deployment
            .spec
            .template
            .spec
            .model_cache_ref
            .is_some_and(|r| r.name == cache.metadata.name);
        if uses_cache {
            targets.extend(deployment.status.replicas.into_iter().filter_map(|r| r.cluster));
        }
    }
    targets
}

fn pending(cluster: &str, reason: impl Into<String>) -> ClusterCache {
    ClusterCache::new(cluster, Phase::Pending, reason)
}

/// Adds to a cluster's state the figures its downloader last reported.
fn with_progress(req: &RunFunctionRequest, mut state: ClusterCache) -> ClusterCache {
    state.progress = progress::observed(req, &format!("progress-{}", state.cluster));
    if let (Phase::Failed, Some(reported)) = (state.phase, &state.progress)
        && !reported.last_error.is_empty()
    {
        // The Job's own condition says only which exit code failed it; the downloader says what went wrong.
        state.reason = format!("hydration Job failed: {}", reported.last_error);
    }
    state
}

/// Composes what one cluster needs and says how far it is.
fn stage(
    req: &RunFunctionRequest,
    cache: &ModelCache,
    namespace: &str,
    cluster: &ClusterView,
    auth: &Auth,
    already_ready: bool,
    out: &mut Output,
) -> ClusterCache {
    let name = cluster.metadata.name.as_str();
    let status = &cluster.status;
    if status.provider_config_name.is_empty() {
        return pending(
            name,
            "the cluster is not reachable yet (no status.providerConfigName)",
        );
    }
    if status.cache_storage_class.is_empty() {
        return pending(
            name,
            "the cluster has no cache storage class (status.cacheStorageClass)",
        );
    }
    let cache_name = cache.metadata.name.as_str();
    let pc = status.provider_config_name.as_str();
    let key = |what: &str| format!("{what}-{name}");

    // Staging ahead of any deployment may find no namespace yet on the cluster.
    out.compose(
        key("namespace"),
        remote::namespace(namespace, pc).build(),
        remote::observed_ready(req, &key("namespace")),
    );
    let volume = hydrate::volume_claim(
        cache_name,
        namespace,
        &cache.spec.hugging_face.volume_size(),
        &status.cache_storage_class,
    );
    let volume_ready = remote::observed_ready(req, &key("volume"));
    out.compose(
        key("volume"),
        remote::Object::new(volume, pc).build(),
        volume_ready,
    );
    // Where the Job reports: kept after staging, so the figures stay. Ready as composed: a report not written
    // yet (or a cluster that lost it) never holds the cache back.
    out.compose(
        key("progress"),
        remote::Object::new(hydrate::progress(cache_name, namespace), pc)
            .create_only()
            .build(),
        true,
    );
    if already_ready {
        return ClusterCache::new(name, Phase::Ready, "");
    }

    match auth {
        Auth::NotNeeded => {}
        Auth::Missing(what) => return pending(name, what.clone()),
        Auth::Available {
            secret,
            key: secret_key,
        } => {
            let token = remote::Object::new(hydrate::token_secret(cache_name, namespace), pc)
                .references(tree!([hydrate::token_reference(namespace, secret, secret_key)]))
                .build();
            out.compose(key("token"), token, remote::observed_ready(req, &key("token")));
        }
    }

    let job = remote::observed::<JobView>(request::observed_composed(req, &key("hydrate")));
    let condition = |type_: &str| {
        job.as_ref()?
            .manifest()?
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    };
    if condition("Complete").is_some() {
        // The snapshot is whole; leaving the Job (and what lets it report) out of the desired state deletes it.
        return ClusterCache::new(name, Phase::Ready, "");
    }
    // The Job's identity: patching its own progress ConfigMap is all it may do.
    for (what, manifest) in [
        ("stage-account", hydrate::service_account(cache_name, namespace)),
        ("stage-role", hydrate::role(cache_name, namespace)),
        ("stage-binding", hydrate::role_binding(cache_name, namespace)),
    ] {
        let ready = remote::observed_ready(req, &key(what));
        out.compose(key(what), remote::Object::new(manifest, pc).build(), ready);
    }
    out.compose(
        key("hydrate"),
        remote::Object::new(hydrate::job(cache_name, namespace, &cache.spec.hugging_face), pc).build(),
        false,
    );
    if let Some(failed) = condition("Failed") {
        let reason = format!("hydration Job failed: {} {}", failed.reason, failed.message);
        return ClusterCache::new(name, Phase::Failed, reason.trim_end());
    }
    match job {
        Some(_) if volume_ready => ClusterCache::new(name, Phase::Hydrating, ""),
        _ => pending(name, "waiting for the volume and the hydration Job"),
    }
}

fn report(
    out: &mut Output,
    cache: &ModelCache,
    auth: &Auth,
    states: Vec<ClusterCache>,
) -> Result<(), ComposeError> {
    let all_ready = states.iter().all(|s| s.phase == Phase::Ready);
    let (status, reason, message) = if let Auth::Missing(what) = auth {
        (Status::ConditionFalse, Reason::AuthSecretMissing, what.clone())
    } else if states.is_empty() {
        (
            Status::ConditionTrue,
            Reason::NoClusters,
            "no cluster matches spec.clusterSelector and no deployment using this cache is placed".to_owned(),
        )
    } else if all_ready {
        (
            Status::ConditionTrue,
            Reason::Staged,
            format!("{} is staged on every cluster", cache.spec.hugging_face.repo),
        )
    } else if let Some(failed) = states.iter().find(|s| s.phase == Phase::Failed) {
        (
            Status::ConditionFalse,
            Reason::HydrationFailed,
            format!("{}: {}", failed.cluster, failed.reason),
        )
    } else {
        let waiting: Vec<String> = states
            .iter()
            .filter(|s| s.phase != Phase::Ready)
            .map(|s| {
                if s.reason.is_empty() {
                    s.cluster.clone()
                } else {
                    format!("{} ({})", s.cluster, s.reason)
                }
            })
            .collect();
        (
            Status::ConditionFalse,
            Reason::Staging,
            format!("not yet staged on {}", waiting.join("; ")),
        )
    };
    out.condition(ConditionType::Staged, status, reason, message);
    pinned(out, &cache.spec.hugging_face.revision, &states);
    out.ready = Some(all_ready && !matches!(auth, Auth::Missing(_)));
    let staged_percent = (!states.is_empty()).then(|| {
        let sum: u64 = states.iter().map(|s| u64::from(s.percent())).sum();
        u32::try_from(sum / states.len() as u64).unwrap_or(100)
    });
    out.set_status(&ModelCacheStatus {
        clusters: states,
        staged_percent,
    })
}

/// Whether the revision is a commit. A branch or tag moves: clusters that list it at different times stage
/// different weights, so the condition says which commit each has staged.
fn pinned(out: &mut Output, revision: &str, states: &[ClusterCache]) {
    if crate::stage::hub::is_commit(revision) {
        let message = format!("spec.huggingFace.revision is commit {revision}");
        out.condition(
            ConditionType::RevisionPinned,
            Status::ConditionTrue,
            Reason::Commit,
            message,
        );
        return;
    }
    let staged: Vec<String> = states
        .iter()
        .filter_map(|s| Some(format!("{} on {}", s.progress.as_ref()?.commit, s.cluster)))
        .filter(|s| !s.starts_with(' '))
        .collect();
    let staged = match staged.is_empty() {
        true => String::new(),
        false => format!(" (listed: {})", staged.join(", ")),
    };
    let message = format!(
        "spec.huggingFace.revision {revision:?} is a branch or tag, not a commit: each cluster stages the commit it \
         points at when its download starts{staged}; set a 40-character commit id so every cluster serves the same \
         weights"
    );
    out.condition(
        ConditionType::RevisionPinned,
        Status::ConditionFalse,
        Reason::BranchOrTag,
        message,
    );
}

#[cfg(test)]
mod tests;
