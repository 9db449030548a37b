//! One kube-runtime Controller per managed kind, each running the generic managed reconciler.

use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, ResourceExt};
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

async fn run<M, C>(shared: Shared, controller: Controller<M>, connector: C, kind: &'static str)
where
    M: Managed,
    C: Connector<M>,
{
    let reconciler = Arc::new(Reconciler::new(
        shared.kube.clone(),
        connector,
        shared.timing,
        shared.metrics.clone(),
        kind,
    ));
    shared.metrics.controller_started();
    controller
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
            let controller = Controller::new(
                Api::<Cluster>::all(shared.kube.clone()),
                watcher::Config::default(),
            );
            tokio::spawn(run(shared, controller, connector, kind.label()))
        }
        ManagedKind::NodePool => {
            let connector = NodePoolConnector {
                cache: shared.aws.clone(),
            };
            let controller = node_pool_controller(&shared);
            tokio::spawn(run(shared, controller, connector, kind.label()))
        }
    }
}

/// Node pools also wake up when their Cluster changes (becomes Ready, gets deleted), so a pool waiting for its
/// cluster needs no tight polling: hundreds of waiting pools would otherwise poll the API server every second.
fn node_pool_controller(shared: &Shared) -> Controller<NodePool> {
    let controller = Controller::new(
        Api::<NodePool>::all(shared.kube.clone()),
        watcher::Config::default(),
    );
    let pools = controller.store();
    controller.watches(
        Api::<Cluster>::all(shared.kube.clone()),
        watcher::Config::default(),
        move |cluster| {
            let namespace = cluster.namespace();
            let name = cluster.name_any();
            pools
                .state()
                .into_iter()
                .filter(|p| p.namespace() == namespace && p.spec.for_provider.cluster_ref.name == name)
                .map(|p| ObjectRef::from_obj(p.as_ref()))
                .collect::<Vec<_>>()
        },
    )
}
