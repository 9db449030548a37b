//! One kube-runtime Controller per managed kind, each running the generic managed reconciler.

use std::sync::Arc;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use futures::StreamExt;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, controller, watcher};
use kube::{Api, ResourceExt};
use modelplane_eks_api::{Addon, Cluster, NodePool, PodIdentityAssociation};

use crate::activation::ManagedKind;
use crate::eks::addon::AddonConnector;
use crate::eks::clients::ClientCache;
use crate::eks::cluster::ClusterConnector;
use crate::eks::external_name;
use crate::eks::file_system::FileSystemConnector;
use crate::eks::network::NetworkConnector;
use crate::eks::node_pool::NodePoolConnector;
use crate::eks::pod_identity::PodIdentityConnector;
use crate::eks::role::RoleConnector;
use crate::managed::annotations::EXTERNAL_NAME;
use crate::managed::conditions::READY;
use crate::managed::reconciler::{Connector, Reconciler, Timing, error_policy, reconcile};
use crate::managed::recorder::Events;
use crate::managed::resource::Managed;
use crate::managed::watch_filter::desired_state;
use crate::metrics::Metrics;

/// What every controller shares: the Kubernetes client, the AWS client cache, metrics and timing.
#[derive(Clone)]
pub struct Shared {
    pub kube: kube::Client,
    pub aws: Arc<ClientCache>,
    pub metrics: Arc<Metrics>,
    pub timing: Timing,
    /// Reconciles of one kind in flight at once, 0 for unbounded (`--max-concurrent-reconciles`).
    pub concurrency: u16,
    /// Reconciles of one kind doing Kubernetes work at once, before they hand themselves to the AWS rate limiter
    /// (`--admitted-reconciles`, `eks::admission`).
    pub admitted: u16,
}

async fn run<M, C>(shared: Shared, controller: Controller<M>, connector: C, kind: &'static str)
where
    M: Managed,
    C: Connector<M>,
{
    let reconciler = Arc::new(
        Reconciler::new(
            shared.kube.clone(),
            connector,
            shared.timing,
            shared.metrics.clone(),
            kind,
        )
        .with_events(Events::new(shared.kube.clone()))
        .with_usages()
        .with_admission(shared.admitted.into()),
    );
    shared.metrics.controller_started();
    controller
        .with_config(controller::Config::default().concurrency(shared.concurrency))
        .run(reconcile::<M, C>, error_policy::<M, C>, reconciler)
        .for_each(|_| async {})
        .await;
}

/// A controller whose own watch passes only desired-state changes (see `managed::events`): the provider's
/// status and bookkeeping writes never wake it, so its requeue schedule (backoff, poll) is what drives it.
fn filtered_controller<M: Managed>(kube: &kube::Client) -> Controller<M> {
    let (reader, writer) = reflector::store();
    let stream = watcher(Api::<M>::all(kube.clone()), watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(desired_state::<M>, PredicateConfig::default());
    Controller::for_stream(stream, reader)
}

/// Starts the controller of `kind` in the background.
pub fn spawn(shared: &Shared, kind: ManagedKind) -> tokio::task::JoinHandle<()> {
    let shared = shared.clone();
    match kind {
        ManagedKind::Cluster => {
            let connector = ClusterConnector {
                cache: shared.aws.clone(),
            };
            let controller = cluster_controller(&shared);
            tokio::spawn(run(shared, controller, connector, kind.label()))
        }
        ManagedKind::NodePool => {
            let cache = shared.aws.clone();
            spawn_on_cluster(shared, NodePoolConnector { cache }, kind)
        }
        ManagedKind::Role => {
            let cache = shared.aws.clone();
            spawn_plain(shared, RoleConnector { cache }, kind)
        }
        ManagedKind::FileSystem => {
            let cache = shared.aws.clone();
            spawn_plain(shared, FileSystemConnector { cache }, kind)
        }
        ManagedKind::Addon => {
            let cache = shared.aws.clone();
            spawn_on_cluster(shared, AddonConnector { cache }, kind)
        }
        ManagedKind::PodIdentityAssociation => {
            let cache = shared.aws.clone();
            spawn_on_cluster(shared, PodIdentityConnector { cache }, kind)
        }
        ManagedKind::Network => {
            let cache = shared.aws.clone();
            spawn_plain(shared, NetworkConnector { cache }, kind)
        }
    }
}

/// A kind that watches only its own objects.
fn spawn_plain<M, C>(shared: Shared, connector: C, kind: ManagedKind) -> tokio::task::JoinHandle<()>
where
    M: Managed,
    C: Connector<M>,
{
    let controller = filtered_controller::<M>(&shared.kube);
    tokio::spawn(run(shared, controller, connector, kind.label()))
}

/// A kind that lives on an EKS cluster: it watches Clusters too (see [`on_cluster_controller`]).
fn spawn_on_cluster<M, C>(shared: Shared, connector: C, kind: ManagedKind) -> tokio::task::JoinHandle<()>
where
    M: OnCluster,
    C: Connector<M>,
{
    let controller = on_cluster_controller::<M>(&shared);
    tokio::spawn(run(shared, controller, connector, kind.label()))
}

/// A Cluster being deleted waits for its node groups; it is woken when one of its NodePools is gone, so the
/// delete goes on as soon as the last one is, not at the next backoff retry.
fn cluster_controller(shared: &Shared) -> Controller<Cluster> {
    let controller = filtered_controller::<Cluster>(&shared.kube);
    let clusters = controller.store();
    let deleted_pools = watcher(
        Api::<NodePool>::all(shared.kube.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .filter_map(|event| {
        futures::future::ready(match event {
            Ok(watcher::Event::Delete(pool)) => Some(Ok(pool)),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
    });
    controller.watches_stream(deleted_pools, move |pool: NodePool| {
        let cluster = ObjectRef::<Cluster>::new(&pool.spec.for_provider.cluster_ref.name)
            .within(&pool.namespace().unwrap_or_default());
        let deleting = clusters
            .get(&cluster)
            .is_some_and(|c| c.metadata.deletion_timestamp.is_some());
        deleting.then_some(cluster)
    })
}

/// A kind that lives on an EKS cluster and waits while its Cluster is not Ready.
trait OnCluster: Managed {
    /// Whether this resource belongs on `cluster`.
    fn on(&self, cluster: &Cluster) -> bool;
}

impl OnCluster for NodePool {
    /// A pool references its Cluster object, in its own namespace.
    fn on(&self, cluster: &Cluster) -> bool {
        self.namespace() == cluster.namespace()
            && self.spec.for_provider.cluster_ref.name == cluster.name_any()
    }
}

/// Add-ons and pod identity associations name the EKS cluster itself (the Cluster's external name). The
/// Cluster that made it may be in any namespace; waking one too many is a Describe, missing one a backoff.
impl OnCluster for Addon {
    fn on(&self, cluster: &Cluster) -> bool {
        self.spec.for_provider.cluster_name == external_name(cluster)
    }
}

impl OnCluster for PodIdentityAssociation {
    fn on(&self, cluster: &Cluster) -> bool {
        self.spec.for_provider.cluster_name == external_name(cluster)
    }
}

/// What a resource on a cluster needs from its Cluster: whether it is Ready, deleted, its AWS name and
/// subnets. Other Cluster status writes do not concern them.
fn what_dependents_need(cluster: &Cluster) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    let status = cluster.status.as_ref();
    let ready = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == READY).map(|c| c.status));
    format!("{ready:?}").hash(&mut hasher);
    cluster.metadata.deletion_timestamp.is_some().hash(&mut hasher);
    cluster.annotations().get(EXTERNAL_NAME).hash(&mut hasher);
    status.map(|s| &s.at_provider.subnet_ids).hash(&mut hasher);
    Some(hasher.finish())
}

/// Node pools, add-ons and pod identity associations also wake up when their Cluster changes (becomes Ready,
/// gets deleted), so one created before its cluster is ACTIVE goes on as soon as it is, not at the next backoff
/// retry, and hundreds of waiting resources need no tight polling of the API server. Only the changes
/// [`what_dependents_need`] hashes pass, so the provider's own Cluster status writes wake nobody.
fn on_cluster_controller<M: OnCluster>(shared: &Shared) -> Controller<M> {
    let controller = filtered_controller::<M>(&shared.kube);
    let dependents = controller.store();
    let clusters = watcher(
        Api::<Cluster>::all(shared.kube.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .applied_objects()
    .predicate_filter(what_dependents_need, PredicateConfig::default());
    controller.watches_stream(clusters, move |cluster| {
        dependents
            .state()
            .into_iter()
            .filter(|d| d.on(&cluster))
            .map(|d| ObjectRef::from_obj(d.as_ref()))
            .collect::<Vec<_>>()
    })
}
