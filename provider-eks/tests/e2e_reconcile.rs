//! The real binary against kmock and moto behind the fault proxy, for the reconciler's honesty: a rejected
//! Create is not retried in a loop, Observe-only of a missing resource says so, a change AWS cannot apply is
//! refused by name, a kind waits for its CRD to be served, and a Cluster being deleted says what it waits for.
//! kmock bumps resourceVersion on every write, even one that changes nothing, which is what exposed the loop.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use modelplane_eks_api::{Condition, ConditionStatus, ManagementPolicy};
use serde_json::json;
use support::world::*;

/// The compressed error schedule these tests run with: 120 s of the default longest backoff become this.
const MAX_BACKOFF_SECONDS: u64 = 3;

fn start_with_backoff(world: &mut World, backoff: u64, max_backoff: u64) {
    let (backoff, max_backoff) = (backoff.to_string(), max_backoff.to_string());
    world.start_provider_with(&[
        "--poll-interval-seconds",
        "2",
        "--busy-interval-seconds",
        "1",
        "--backoff-seconds",
        &backoff,
        "--max-backoff-seconds",
        &max_backoff,
        "--debug",
    ]);
}

fn condition(conditions: Option<&Vec<Condition>>, type_: &str) -> Option<Condition> {
    conditions?.iter().find(|c| c.type_ == type_).cloned()
}

async fn cluster_condition(world: &World, name: &str, type_: &str) -> Option<Condition> {
    let c = world.clusters().get(name).await.ok()?;
    condition(c.status.as_ref().map(|s| &s.conditions), type_)
}

async fn pool_condition(world: &World, name: &str, type_: &str) -> Option<Condition> {
    let p = world.pools().get(name).await.ok()?;
    condition(p.status.as_ref().map(|s| &s.conditions), type_)
}

fn says(condition: Option<Condition>, status: ConditionStatus, text: &str) -> bool {
    condition.is_some_and(|c| c.status == status && c.message.unwrap_or_default().contains(text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanently_rejected_create_waits_the_longest_backoff_between_attempts() {
    let Some(mut world) = World::start().await else {
        return;
    };
    world.proxy.reject_always("POST /clusters");
    start_with_backoff(&mut world, 1, MAX_BACKOFF_SECONDS);
    world
        .clusters()
        .create(&PostParams::default(), &cluster("unsupported"))
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
    let Some(mut world) = World::start().await else {
        return;
    };
    world.start_provider();
    let mut observed = cluster("elsewhere");
    observed.spec.management_policies = vec![ManagementPolicy::Observe];
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
    let Some(mut world) = World::start().await else {
        return;
    };
    world.start_provider();
    let pp = PostParams::default();
    world.clusters().create(&pp, &cluster("demo")).await.unwrap();
    world.pools().create(&pp, &pool("h200", "demo")).await.unwrap();
    world.activate().await;
    wait_for("NodePool h200 Ready and Synced", &world, || {
        pool_ready(&world, "h200")
    })
    .await;

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
    let Some(mut world) = World::start_with(false).await else {
        return;
    };
    world.start_provider();
    world
        .clusters()
        .create(&PostParams::default(), &cluster("early"))
        .await
        .unwrap();
    world.activate().await;
    wait_for("the metrics endpoint", &world, || async {
        world.metrics().is_some()
    })
    .await;
    // The MRDs are Active but the CRDs are not served yet: no controller may start.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        world
            .metrics()
            .unwrap()
            .contains("modelplane_provider_eks_active_controllers 0"),
        "a controller started before its CRD was Established"
    );
    assert_eq!(world.proxy.requests(), Vec::<String>::new());

    world.establish_crds().await;
    wait_for("Cluster early Ready once its CRD is Established", &world, || {
        cluster_ready(&world, "early")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_being_deleted_names_its_node_groups_and_goes_right_after_the_last() {
    let Some(mut world) = World::start().await else {
        return;
    };
    // Retries are far apart: only the NodePool watch can bring the Cluster's delete back in time.
    start_with_backoff(&mut world, 600, 600);
    let pp = PostParams::default();
    world.clusters().create(&pp, &cluster("demo")).await.unwrap();
    world.pools().create(&pp, &pool("h200", "demo")).await.unwrap();
    world.activate().await;
    wait_for("NodePool h200 Ready and Synced", &world, || {
        pool_ready(&world, "h200")
    })
    .await;

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
