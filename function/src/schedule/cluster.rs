//! The cluster-level checks on an [`ClusterView`]: is it usable yet for a replica, does the deployment
//! tolerate its taints, and which of its tolerations the pods must carry.

pub use crate::api::cluster_view::ClusterView;
use crate::api::{
    availability::Availability,
    inference_cluster::{PoolStatus, Taint, TaintEffect},
    model_deployment::{Toleration, TolerationOperator},
};

impl ClusterView {
    /// Why nothing can be placed here yet, if so. The cluster must say how to reach it, and either be Ready or
    /// have every component in `needed` ready: a component the replica does not need (monitoring, the gateway)
    /// never holds it back.
    pub fn not_usable(&self, needed: &[&str]) -> Option<String> {
        if self.status.provider_config_name.is_empty() {
            return Some("cluster status has no providerConfigName yet".into());
        }
        if self.is_ready() {
            return None;
        }
        if self.status.components.is_empty() {
            return Some("cluster is not Ready yet".into());
        }
        let waiting: Vec<&str> = needed
            .iter()
            .copied()
            .filter(|name| !self.component_ready(name))
            .collect();
        (!waiting.is_empty()).then(|| format!("needed components not ready yet: {}", waiting.join(", ")))
    }

    /// Whether the cluster takes, keeps and routes replicas at `now`: its cordon and how long it has been lost.
    pub fn availability(&self, now: jiff::Timestamp) -> Availability {
        Availability::of(&self.spec.scheduling, self.status.reachability.as_ref(), now)
    }

    pub fn is_ready(&self) -> bool {
        self.status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    }

    fn component_ready(&self, name: &str) -> bool {
        self.status.components.iter().any(|c| c.name == name && c.ready)
    }

    /// Components reported not ready, when the cluster is not Ready: what a placed replica does not wait for.
    pub fn components_not_ready(&self) -> Vec<&str> {
        if self.is_ready() {
            return Vec::new();
        }
        self.status
            .components
            .iter()
            .filter(|c| !c.ready)
            .map(|c| c.name.as_str())
            .collect()
    }

    pub fn pool(&self, name: &str) -> Option<&PoolStatus> {
        self.status.pools.iter().find(|p| p.name == name)
    }

    /// The first taint with one of `effects` that no toleration covers.
    pub fn untolerated_taint(&self, tolerations: &[Toleration], effects: &[TaintEffect]) -> Option<&Taint> {
        self.spec
            .taints
            .iter()
            .filter(|taint| effects.contains(&taint.effect))
            .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
    }
}

/// The deployment's tolerations that cover some taint of `cluster`, in the order written: what placing a
/// replica there relied on, and so what its pods must carry to land on the cluster's nodes.
pub fn relied_on<'t>(
    tolerations: &'t [Toleration],
    cluster: &ClusterView,
) -> impl Iterator<Item = &'t Toleration> {
    let taints = &cluster.spec.taints;
    tolerations
        .iter()
        .filter(move |t| taints.iter().any(|taint| tolerates(t, taint)))
}

/// A toleration as a pod spec writes it.
pub fn pod_toleration(t: &Toleration) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    if !t.key.is_empty() {
        out.insert("key".into(), t.key.clone().into());
    }
    let operator = match t.operator {
        TolerationOperator::Equal => "Equal",
        TolerationOperator::Exists => "Exists",
    };
    out.insert("operator".into(), operator.into());
    if t.operator == TolerationOperator::Equal {
        out.insert("value".into(), t.value.clone().into());
    }
    if let Some(effect) = t.effect {
        out.insert("effect".into(), effect.as_str().into());
    }
    serde_json::Value::Object(out)
}

/// Kubernetes' toleration semantics (`v1.Toleration.ToleratesTaint`).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if toleration.effect.is_some_and(|effect| effect != taint.effect) {
        return false;
    }
    match toleration.operator {
        TolerationOperator::Exists => toleration.key.is_empty() || toleration.key == taint.key,
        TolerationOperator::Equal => toleration.key == taint.key && toleration.value == taint.value,
    }
}
