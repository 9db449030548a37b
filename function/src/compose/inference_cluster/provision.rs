//! The seam behind which clouds differ, as `ServingStack` is for stacks: each cluster source (EKS through
//! provider-eks; GKE, AKS, Nebius and Vultr through their upjet providers; Existing through nobody) is one
//! [`Provisioner`]. The composer asks it what to check, what to compose stage by stage, how provider-kubernetes
//! and provider-helm reach the cluster, where model caches stage, which pool resource gates each pool, and what
//! must outlive what on deletion. Everything else of a cluster (components, status, the ledger) is the same on
//! every cloud; what the upjet clouds share besides is in `upjet`.

use std::collections::BTreeMap;

use super::{aks, components, eks, existing, gke, nebius, observed::Observed, vultr};
use crate::compose::shared::CONTROL_NAMESPACE;
use crate::wire::tree::{Fields, Tree, fields};
use crate::{
    api::{
        inference_class::{InferenceClassSpec, Provider},
        inference_cluster::{InferenceClusterSpec, ProviderConfigKind, ProviderConfigRef, Source},
    },
    compose::{ComposeError, Output},
    proto::v1::{ResourceSelector, RunFunctionRequest, resource_selector::Match},
    sdk::request,
    stack::Cloud,
};

/// How far a provisioned cluster has come: what the rest of the composition may build on.
#[derive(Debug, Default)]
pub struct Progress {
    /// The cluster's API server is observed Ready, so things can be installed on it.
    pub cluster_ready: bool,
    /// Stages not composed yet, for the composite's status.
    pub waiting: Vec<&'static str>,
}

/// Everything a provisioner's `compose` worked out: how far the cluster has come, and how provider-kubernetes and
/// provider-helm reach it (which, on some clouds, needs what compose read from the request).
#[derive(Debug)]
pub struct Provisioned {
    pub progress: Progress,
    /// The `spec` of the provider-kubernetes and provider-helm ClusterProviderConfigs that reach the cluster.
    pub workload_credentials: Fields,
}

impl Provisioned {
    /// `progress`, reaching the cluster through the kubeconfig the cloud's provider writes to
    /// [`kubeconfig_secret`], which carries its own client credentials.
    pub fn with_kubeconfig(name: &str, progress: Progress) -> Self {
        Self {
            progress,
            workload_credentials: kubeconfig_credentials(
                &kubeconfig_secret(name),
                CONTROL_NAMESPACE,
                KUBECONFIG_KEY,
            ),
        }
    }
}

/// Which provider config a cluster's managed resources use: `reference` (the spec's `credentials`) of
/// `api_version`, named in errors by `field`.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub field: &'static str,
    pub api_version: &'static str,
    pub reference: ProviderConfigRef,
}

/// What a provisioner is given of the composite: the request (what is observed), the cluster's name, its spec and
/// the InferenceClasses its pools name (each has this cloud's provisioning block by now).
#[derive(Clone, Copy)]
pub struct ClusterInput<'a> {
    pub req: &'a RunFunctionRequest,
    pub name: &'a str,
    pub spec: &'a InferenceClusterSpec,
    pub classes: &'a BTreeMap<String, InferenceClassSpec>,
}

/// What the cloud a cluster is on provisions, and how the rest of Modelplane reaches it.
pub trait Provisioner {
    /// The component table's column for this cloud.
    fn cloud(&self) -> Cloud;

    /// The cloud whose InferenceClasses this cluster's pools must name; `None` for a cluster nobody provisions.
    fn provider(&self) -> Option<Provider> {
        self.cloud().provider()
    }

    /// The region chart values are rendered for, where the cloud has one in the spec.
    fn region(&self) -> Option<&str> {
        None
    }

    /// The provider config the cloud's managed resources authenticate with, fetched before anything is composed
    /// so a missing one is refused by the field that names it rather than left to fail in every MR; `None`
    /// where nothing of a provider's is composed, or the provider reports it itself.
    fn credentials(&self) -> Option<Credentials> {
        None
    }

    /// What the XRD cannot say about this cloud's cluster and its pools against their classes: checked before
    /// anything is composed, each failure naming the field.
    fn check(&self, input: &ClusterInput) -> Result<(), ComposeError>;

    /// Composes the cloud's resources, each stage once the one before is observed Ready, and says how far the
    /// cluster has come and how the workload providers reach it.
    fn compose(&self, input: &ClusterInput, out: &mut Output) -> Result<Provisioned, ComposeError>;

    /// The ReadWriteMany StorageClass model caches stage on, once it exists: read from what is composed and
    /// ready in `out` (a provisioned cluster's own class, see [`ready_storage_class`]) or from the spec (an
    /// existing cluster's).
    fn cache_storage_class(&self, out: &Output) -> Option<String>;

    /// The composed resource whose readiness offers `pool` to the scheduler; `None` when nothing of ours
    /// provisions it.
    fn pool_key(&self, pool: &str) -> Option<String>;

    /// The keys of the composed resources a resource of `kind` under `key` uses, so it is deleted first.
    fn uses(&self, kind: &str, key: &str) -> Vec<String>;
}

/// Where a provisioning provider (provider-eks, every upjet provider) writes a cluster's kubeconfig:
/// `<cluster>-kubeconfig` in [`CONTROL_NAMESPACE`], the Secret provider-kubernetes and provider-helm read it from.
pub fn kubeconfig_secret(cluster: &str) -> String {
    format!("{cluster}-kubeconfig")
}

/// The key every provisioning provider writes the kubeconfig under in its connection secret.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// `class` once the composed object under `key` that creates it on the cluster is ready, so no cache volume
/// waits on a class that does not exist yet.
pub fn ready_storage_class(out: &Output, key: &str, class: &str) -> Option<String> {
    out.resources
        .get(key)
        .filter(|c| c.ready)
        .map(|_| class.to_owned())
}

/// Owned copies of a static list of composed-resource keys, as [`Provisioner::uses`] returns them.
pub fn keys(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| (*k).to_owned()).collect()
}

/// The provisioner of the cluster's source, built from its spec block (the XRD requires the block its source
/// names; a spec that reaches here without it is refused by name).
pub fn provisioner(spec: &InferenceClusterSpec) -> Result<Box<dyn Provisioner + '_>, ComposeError> {
    let cluster = &spec.cluster;
    let missing = || {
        ComposeError::new(
            format!("spec.cluster.{}", cluster.source.field()),
            format!("is required when source is {:?}", cluster.source),
        )
    };
    match cluster.source {
        Source::Eks => Ok(Box::new(eks::Eks::new(cluster.eks.as_ref().ok_or_else(missing)?))),
        Source::Gke => Ok(gke::provisioner(cluster.gke.as_ref().ok_or_else(missing)?)),
        Source::Aks => Ok(aks::provisioner(cluster.aks.as_ref().ok_or_else(missing)?)),
        Source::Nebius => Ok(nebius::provisioner(
            cluster.nebius.as_ref().ok_or_else(missing)?,
            spec,
        )),
        Source::Vultr => Ok(vultr::provisioner(cluster.vultr.as_ref().ok_or_else(missing)?)),
        Source::Existing => Ok(Box::new(existing::Existing::new(
            cluster.existing.as_ref().ok_or_else(missing)?,
        ))),
    }
}

/// The ManagedResourceActivationPolicy that activates a provider's kinds (by CRD name) once a cluster on its
/// cloud exists. Named per cluster and provider, so clusters never fight over one policy. Activation is one-way
/// (an Active ManagedResourceDefinition never returns to Inactive): deleting the last cluster of a cloud
/// deletes its policy but leaves the provider's controllers running.
pub fn activation_policy(cluster: &str, provider: &str, crds: &[&str]) -> Fields {
    let crds: Vec<&str> = crds.to_vec();
    fields!({
        "apiVersion": "apiextensions.crossplane.io/v1alpha1",
        "kind": "ManagedResourceActivationPolicy",
        "metadata": {"name": format!("{cluster}-{provider}")},
        "spec": {"activate": crds},
    })
}

/// The key every cloud composes its activation policy under.
pub const KEY_ACTIVATION_POLICY: &str = "activation-policy";

/// Composes a cloud's activation `policy`; `None` once its kinds are active (the policy is observed, or a
/// resource of the cloud, keyed `prefix...`, is, which only an active kind can be), else the progress to report:
/// waiting on `what`. Until then the cloud composes nothing else, as Crossplane's applies of its kinds would fail.
pub fn activate(
    out: &mut Output,
    seen: &Observed,
    policy: Fields,
    prefix: &str,
    what: &'static str,
) -> Option<Progress> {
    out.compose(KEY_ACTIVATION_POLICY, policy, false);
    if seen.exists(KEY_ACTIVATION_POLICY) || seen.any_with_prefix(prefix) {
        return None;
    }
    Some(Progress {
        cluster_ready: false,
        waiting: vec![what],
    })
}

/// A provider-kubernetes/provider-helm credentials block reading a kubeconfig from a Secret.
pub fn kubeconfig_credentials(secret: &str, namespace: &str, key: &str) -> Fields {
    fields!({"credentials": {"source": "Secret",
                             "secretRef": {"name": secret, "namespace": namespace, "key": key}}})
}

/// The Modelplane ReadWriteMany StorageClass `manifest` on the cluster, as a provider-kubernetes Object named
/// `<cluster>-<part>`. A StorageClass has no Ready condition, so the Object is Ready once created.
pub fn storage_class_object(cluster: &str, part: &str, manifest: impl Into<Tree>) -> Fields {
    components::cluster_object(cluster, part, manifest)
        .ready_once_created()
        .build()
}

/// The requirement under which the cluster's provider config is fetched.
pub const CREDENTIALS_REQUIREMENT: &str = "credentials";

impl Credentials {
    /// The provider config `reference` (the spec's `credentials`, at `field`) of `api_version`.
    pub fn new(field: &'static str, api_version: &'static str, reference: &ProviderConfigRef) -> Self {
        Self {
            field,
            api_version,
            reference: reference.clone(),
        }
    }

    /// The provider config by name: a ClusterProviderConfig, or a ProviderConfig in the namespace the MRs are
    /// composed in (the only one a namespaced MR's `providerConfigRef` can name).
    pub fn selector(&self) -> ResourceSelector {
        let kind = self.reference.kind;
        ResourceSelector {
            api_version: self.api_version.into(),
            kind: kind.as_str().into(),
            r#match: Some(Match::MatchName(self.reference.name.clone())),
            namespace: (kind == ProviderConfigKind::ProviderConfig).then(|| CONTROL_NAMESPACE.to_owned()),
        }
    }

    /// Refused by field when Crossplane looked for the provider config and found none, before anything is
    /// composed (nothing the cloud composes could authenticate). Not asked yet is not refused: Crossplane answers
    /// every requirement before it applies what a call composed.
    pub fn check(&self, req: &RunFunctionRequest) -> Result<(), ComposeError> {
        let Some(found) = request::required_resources(req, CREDENTIALS_REQUIREMENT) else {
            return Ok(());
        };
        if found.iter().any(|r| r.resource.is_some()) {
            return Ok(());
        }
        let kind = self.reference.kind.as_str();
        let place = match self.reference.kind {
            ProviderConfigKind::ProviderConfig => format!(" in namespace {CONTROL_NAMESPACE}"),
            ProviderConfigKind::ClusterProviderConfig => String::new(),
        };
        Err(ComposeError::new(
            self.field,
            format!(
                "{kind} {:?} ({}){place} does not exist: create it with the cloud's credentials, or name one that does",
                self.reference.name, self.api_version
            ),
        ))
    }
}
