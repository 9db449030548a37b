//! The closed vocabulary of the conditions Modelplane sets on its composites: every type and every reason is a
//! variant here, so a typo is a compile error and `kubectl wait --for=condition=...` users can read the whole list
//! in one place. The variant's name is what Crossplane shows.

use strum::IntoStaticStr;

use crate::api::model_deployment::UnplacedReason;
use crate::workload::pod_report::PodReason;

/// A condition type, one per question a user asks of a composite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr)]
pub enum ConditionType {
    /// InferenceClass: the class describes devices the scheduler can use.
    Valid,
    /// InferenceCluster: every pool's InferenceClass has been fetched.
    ClassesResolved,
    /// InferenceCluster: the stack's components are installed and available.
    StackReady,
    /// ModelCache: the weights are staged on every selected cluster.
    Staged,
    /// ModelCache: `spec.huggingFace.revision` names a commit, so every cluster stages the same bytes.
    RevisionPinned,
    /// ModelDeployment: every replica has a cluster and pool.
    Scheduled,
    /// ModelDeployment: the ModelCache the replicas mount is staged where they run.
    CacheReady,
    /// InferenceGateway: the fleet gateway has an address and its certificate.
    GatewayReady,
    /// InferenceGateway: which caller keys are in effect.
    CallerAuth,
    /// InferenceGateway: the client certificate it presents to cluster gateways, and how many require it.
    ClientCertificate,
    /// InferenceGateway: the implementation serving it (`spec.backend`), and any of its settings not applied.
    Backend,
    /// ModelEndpoint: the endpoint can be routed to.
    EndpointReady,
    /// ModelService: the ModelEndpoints its entries select, and how many are ready.
    EndpointsResolved,
    /// ModelService: a gateway routes the model.
    RoutingReady,
    /// ModelDeployment: KEDA scales it as `spec.autoscaling` says.
    Autoscaling,
    /// ModelDeployment: its engines report to the fleet's metrics, within `spec.slo` when it sets targets.
    Serving,
    /// ModelDeployment: every placed replica's engine pods run and are ready, or what keeps them from it.
    EnginesRunning,
    /// InferenceCluster: Modelplane reaches the cluster's API server, or since when it has not.
    Reachable,
    /// InferenceCluster: the cluster takes new replicas, or why not (a cordon, an outage, a recent return).
    Schedulable,
    /// ModelDeployment: every cluster its replicas run on carries their traffic and keeps them.
    ClustersAvailable,
}

/// Why a condition has its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr)]
pub enum Reason {
    // InferenceClass
    ValidClass,
    // InferenceCluster
    WaitingForClasses,
    Creating,
    Available,
    // ModelCache
    AuthSecretMissing,
    NoClusters,
    Staged,
    Staging,
    HydrationFailed,
    Commit,
    BranchOrTag,
    // ModelDeployment
    WaitingForClusters,
    AllReplicasPlaced,
    InsufficientCapacity,
    NoMatchingCluster,
    CacheStaged,
    CacheNotFound,
    CacheNotReady,
    // InferenceGateway
    NoCluster,
    ClusterNotReady,
    CertificatePending,
    ClientPolicyPending,
    Provisioning,
    NoCallers,
    KeysPending,
    SomeKeysPending,
    KeysInEffect,
    Issuing,
    Presented,
    AsRequested,
    ServedByEnvoyGateway,
    SettingsNotApplied,
    // ModelEndpoint
    Valid,
    // ModelService
    NoEndpoints,
    NoReadyEndpoints,
    NamespaceNotGranted,
    // ModelDeployment autoscaling
    KedaNotInstalled,
    Scaling,
    // ModelDeployment serving
    Reporting,
    WithinSlo,
    SloMissed,
    NoFigures,
    MetricsUnavailable,
    Resolved,
    NoGateway,
    NoBackends,
    Waiting,
    Routed,
    // ModelDeployment engine pods, as the clusters' pod reporters see them
    EnginesRunning,
    EnginesStarting,
    Unschedulable,
    ImagePullFailed,
    EngineConfigInvalid,
    EngineCrashing,
    EngineNotHealthy,
    // Losing and cordoning clusters (InferenceCluster and ModelDeployment)
    Reachable,
    Unreachable,
    Open,
    Cordoned,
    Returning,
    ClusterUnreachable,
    Evacuating,
    Draining,
    ClustersAvailable,
}

/// A condition message naming the first `max` of `items` and counting the rest, joined with "; ".
pub fn first_named(items: Vec<String>, max: usize) -> String {
    let hidden = items.len().saturating_sub(max);
    let mut message: Vec<String> = items.into_iter().take(max).collect();
    if hidden > 0 {
        message.push(format!("and {hidden} more"));
    }
    message.join("; ")
}

impl ConditionType {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl From<PodReason> for Reason {
    fn from(reason: PodReason) -> Self {
        match reason {
            PodReason::Unschedulable => Reason::Unschedulable,
            PodReason::ImagePullFailed => Reason::ImagePullFailed,
            PodReason::EngineConfigInvalid => Reason::EngineConfigInvalid,
            PodReason::EngineCrashing => Reason::EngineCrashing,
            PodReason::EngineNotHealthy => Reason::EngineNotHealthy,
            PodReason::EnginesStarting => Reason::EnginesStarting,
            PodReason::EnginesRunning => Reason::EnginesRunning,
        }
    }
}

impl From<UnplacedReason> for Reason {
    fn from(reason: UnplacedReason) -> Self {
        match reason {
            UnplacedReason::InsufficientCapacity => Reason::InsufficientCapacity,
            UnplacedReason::NoMatchingCluster => Reason::NoMatchingCluster,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_variants() {
        assert_eq!(ConditionType::StackReady.as_str(), "StackReady");
        assert_eq!(Reason::InsufficientCapacity.as_str(), "InsufficientCapacity");
        assert_eq!(
            Reason::from(UnplacedReason::NoMatchingCluster).as_str(),
            UnplacedReason::NoMatchingCluster.as_str()
        );
        // The reporter writes a pod reason by name; the condition shows the same name.
        for reason in [
            PodReason::Unschedulable,
            PodReason::ImagePullFailed,
            PodReason::EngineConfigInvalid,
            PodReason::EngineCrashing,
            PodReason::EngineNotHealthy,
            PodReason::EnginesStarting,
            PodReason::EnginesRunning,
        ] {
            assert_eq!(Reason::from(reason).as_str(), reason.as_str());
        }
    }
}
