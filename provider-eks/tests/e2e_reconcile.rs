//! The real binary against the real kube-apiserver and moto behind the fault proxy, for the reconciler's
//! honesty: a rejected Create is not retried in a loop, Observe-only of a missing resource says so, a change AWS
//! cannot apply is refused by name, a kind waits for its CRD to be served, a Cluster being deleted says what
//! it waits for (woken by a real watch), and an Addon made before its cluster goes on once the Cluster is Ready
//! (woken by the Cluster watch).
//!
//! kmock stays for one case the real server cannot serve: it bumps resourceVersion on every write, even one that
//! changes nothing, which is what exposed the rejected-Create loop of issue #15; that test runs on both.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use modelplane_eks_api::{Addon, AddonParameters, AddonSpec, Condition, ConditionStatus, ManagementPolicy};
use serde_json::json;
use support::world::*;

/// The compressed error schedule these tests run with: 120 s of the default longest backoff become this.
const MAX_BACKOFF_SECONDS: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanently_rejected_create_waits_the_longest_backoff_between_attempts() {
    rejected_create_waits_the_longest_backoff(World::start().await).await;
}

/// The same on kmock, whose resourceVersion bumps on writes that change nothing wake every watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanently_rejected_create_waits_the_longest_backoff_on_a_stand_in_that_bumps_every_write() {
    rejected_create_waits_the_longest_backoff(World::start_on_kmock().await).await;
}

async fn rejected_create_waits_the_longest_backoff(mut world: World) {
    world.proxy.reject_always("POST /clusters");
    world.start_provider_with_backoff(1, MAX_BACKOFF_SECONDS);
    world
        .clusters()
        .create(&PostParams::default(), &world.cluster("unsupported"))
        .await
        .unwrap();
    world.activate().await;
    wait_for("Synced=False calling the rejection permanent", &world, || async {
        says(
            cluster_condition(&world, "unsupported", "Synced").await,
            ConditionStatus::False,
            "permanent error",
        )
    })
    .await;
    let message = cluster_condition(&world, "unsupported", "Synced")
        .await
        .unwrap()
        .message
        .unwrap();
    assert!(message.contains("InvalidParameterException"), "{message}");

    // Two longest backoffs (the "2 minutes" at the default 120 s): one retry per backoff at most,
    // however many bookkeeping writes the API server turns into watch events.
    let before = world.proxy.count("POST /clusters");
    tokio::time::sleep(Duration::from_secs(2 * MAX_BACKOFF_SECONDS)).await;
    let during = world.proxy.count("POST /clusters") - before;
    assert!(
        during <= 3,
        "{during} CreateCluster calls in two longest backoffs\n{:?}",
        world.proxy.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observe_only_cluster_that_does_not_exist_says_creating_is_forbidden() {
    let mut world = World::start().await;
    world.start_provider();
    let mut observed = world.cluster("elsewhere");
    observed.spec.resource.management_policies = vec![ManagementPolicy::Observe];
    world
        .clusters()
        .create(&PostParams::default(), &observed)
        .await
        .unwrap();
    world.activate().await;
    wait_for(
        "Synced=False saying the cluster does not exist",
        &world,
        || async {
            says(
                cluster_condition(&world, "elsewhere", "Synced").await,
                ConditionStatus::False,
                "does not exist and the management policies forbid creating it",
            )
        },
    )
    .await;
    assert_eq!(world.proxy.count("POST /clusters"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_a_node_pools_instance_types_is_refused_by_field_name() {
    let mut world = World::start().await;
    world.start_provider();
    world.ready_cluster_and_pool("demo", "h200").await;

    let change = Patch::Merge(json!({ "spec": { "forProvider": { "instanceTypes": ["p4d.24xlarge"] } } }));
    world
        .pools()
        .patch("h200", &PatchParams::default(), &change)
        .await
        .unwrap();
    wait_for("Synced=False naming instanceTypes", &world, || async {
        says(
            pool_condition(&world, "h200", "Synced").await,
            ConditionStatus::False,
            "spec.forProvider.instanceTypes",
        )
    })
    .await;
    let group = world
        .eks()
        .describe_nodegroup()
        .cluster_name("demo")
        .nodegroup_name("h200")
        .send()
        .await
        .unwrap()
        .nodegroup
        .unwrap();
    assert_eq!(group.instance_types.unwrap(), vec!["p5.48xlarge".to_string()]);
    // The node group still runs: it is Ready, only not in sync with the spec.
    assert!(
        pool_condition(&world, "h200", "Ready")
            .await
            .is_some_and(|c| c.status == ConditionStatus::True)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_starts_only_once_its_crd_is_established() {
    // The MRDs turn Active before their CRDs exist, as when Crossplane activates them and creates the CRDs
    // after: the API server serves nothing of these kinds yet.
    let mut world = World::start_without_managed_crds().await;
    world.start_provider();
    world.activate().await;
    wait_for("the metrics endpoint", &world, || async {
        world.metrics().is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        world
            .metrics()
            .unwrap()
            .contains("modelplane_provider_eks_active_controllers 0"),
        "a controller started before its CRD was Established"
    );
    assert_eq!(world.proxy.requests(), Vec::<String>::new());

    world.install_managed_crds().await;
    world
        .clusters()
        .create(&PostParams::default(), &world.cluster("early"))
        .await
        .unwrap();
    wait_for("Cluster early Ready once its CRD is Established", &world, || {
        cluster_ready(&world, "early")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_being_deleted_names_its_node_groups_and_goes_right_after_the_last() {
    let mut world = World::start().await;
    // Retries are far apart: only the NodePool watch can bring the Cluster's delete back in time.
    world.start_provider_with_backoff(600, 600);
    world.ready_cluster_and_pool("demo", "h200").await;

    // A paused pool keeps its node group while the Cluster is deleted.
    let pause = Patch::Merge(json!({ "metadata": { "annotations": { "crossplane.io/paused": "true" } } }));
    world
        .pools()
        .patch("h200", &PatchParams::default(), &pause)
        .await
        .unwrap();
    wait_for("NodePool h200 paused", &world, || async {
        pool_condition(&world, "h200", "Synced")
            .await
            .is_some_and(|c| c.reason == "ReconcilePaused")
    })
    .await;
    world
        .clusters()
        .delete("demo", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "Cluster demo Ready=False/Deleting naming h200",
        &world,
        || async {
            let ready = cluster_condition(&world, "demo", "Ready").await;
            ready.clone().is_some_and(|c| c.reason == "Deleting")
                && says(ready, ConditionStatus::False, "h200")
        },
    )
    .await;

    world
        .pools()
        .delete("h200", &DeleteParams::default())
        .await
        .unwrap();
    let resume = Patch::Merge(json!({ "metadata": { "annotations": { "crossplane.io/paused": "false" } } }));
    world
        .pools()
        .patch("h200", &PatchParams::default(), &resume)
        .await
        .unwrap();
    // Well inside the 600 s retry: the Cluster must be woken by its last NodePool going away.
    let deadline = Instant::now() + Duration::from_secs(120);
    while world.clusters().get_opt("demo").await.unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "Cluster demo still there after its last NodePool went\n{}",
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        world
            .eks()
            .list_clusters()
            .send()
            .await
            .unwrap()
            .clusters
            .unwrap_or_default()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_addon_made_before_its_cluster_goes_on_as_soon_as_the_cluster_is_ready() {
    let mut world = World::start_with_eks_standin().await;
    // Retries are far apart: only the Cluster watch can bring the Addon's create back in time.
    world.start_provider_with_backoff(600, 600);
    let addons: kube::Api<Addon> = kube::Api::namespaced(world.kube.clone(), &world.ns);
    let mut addon = Addon::new(
        "coredns",
        AddonSpec {
            for_provider: AddonParameters {
                region: REGION.into(),
                cluster_name: "demo".into(),
                addon_name: "coredns".into(),
                ..Default::default()
            },
            resource: world.cluster("demo").spec.resource,
        },
    );
    addon.spec.resource.write_connection_secret_to_ref = None;
    addons.create(&PostParams::default(), &addon).await.unwrap();
    world.activate().await;
    world
        .activate_mrds(&["addons.eks.m.modelplane.ai".to_owned()])
        .await;
    let addon_condition = |type_: &'static str| {
        let addons = addons.clone();
        async move {
            let a = addons.get("coredns").await.ok()?;
            condition(a.status.as_ref().map(|s| &s.conditions), type_)
        }
    };
    wait_for("Addon coredns waiting for its cluster", &world, || async {
        says(
            addon_condition("Synced").await,
            ConditionStatus::False,
            "EKS cluster demo does not exist yet",
        )
    })
    .await;
    assert_eq!(world.proxy.count("POST /clusters/demo/addons"), 1);

    world
        .clusters()
        .create(&PostParams::default(), &world.cluster("demo"))
        .await
        .unwrap();
    wait_for("Cluster demo Ready and Synced", &world, || {
        cluster_ready(&world, "demo")
    })
    .await;
    // Well inside the 600 s retry: the Addon must be woken by its Cluster turning Ready.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ready = addon_condition("Ready").await;
        let synced = addon_condition("Synced").await;
        let is = |c: Option<Condition>| c.is_some_and(|c| c.status == ConditionStatus::True);
        if is(ready) && is(synced) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Addon coredns not Ready after its Cluster turned Ready\n{}",
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // One try at the start, one per change of the Cluster the Addon cares about (created, Creating, Ready):
    // neither the Addon's nor the Cluster's own status writes wake it again.
    let creates = world.proxy.count("POST /clusters/demo/addons");
    assert!((2..=4).contains(&creates), "{creates} CreateAddon calls");
    let listed = world
        .eks()
        .list_addons()
        .cluster_name("demo")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.addons(), ["coredns".to_owned()]);
}
