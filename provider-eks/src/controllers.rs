//! One kube-runtime Controller per managed kind, each running the generic managed reconciler.

use std::sync::Arc;

use futures::StreamExt;
use kube::Api;
use kube::runtime::{Controller, watcher};
use modelplane_eks_api::{Cluster, NodePool};

use crate::activation::ManagedKind;
use crate::eks::clients::ClientCache;
use crate::eks::cluster::ClusterConnector;
use crate::eks::node_pool::NodePoolConnector;
use crate::managed::reconciler::{Connector, Reconciler, Timing, error_policy, reconcile};
use crate::managed::resource::Managed;
use crate::metrics::Metrics;

/// What every controller shares: the Kubernetes client, the AWS client cache, metrics and timing.
#[derive(Clone)]
pub struct Shared {
    pub kube: kube::Client,
    pub aws: Arc<ClientCache>,
    pub metrics: Arc<Metrics>,
    pub timing: Timing,
}

async fn run<M, C>(shared: Shared, connector: C, kind: &'static str)
where
    M: Managed,
    C: Connector<M>,
{
    let api = Api::<M>::all(shared.kube.clone());
    let reconciler = Arc::new(Reconciler::new(
        shared.kube.clone(),
        connector,
        shared.timing,
        shared.metrics.clone(),
        kind,
    ));
    shared.metrics.controller_started();
    Controller::new(api, watcher::Config::default())
        .run(reconcile::<M, C>, error_policy::<M, C>, reconciler)
        .for_each(|_| async {})
        .await;
}

/// Starts the controller of `kind` in the background.
pub fn spawn(shared: &Shared, kind: ManagedKind) -> tokio::task::JoinHandle<()> {
    let shared = shared.clone();
    match kind {
        ManagedKind::Cluster => {
            let connector = ClusterConnector {
                cache: shared.aws.clone(),
            };
            tokio::spawn(run::<Cluster, _>(shared, connector, kind.label()))
        }
        ManagedKind::NodePool => {
            let connector = NodePoolConnector {
                cache: shared.aws.clone(),
            };
            tokio::spawn(run::<NodePool, _>(shared, connector, kind.label()))
        }
    }
}
