//! The real binary against the real kube-apiserver (with kube-controller-manager's garbage collector; see
//! `support::apiserver` for where it comes from) and moto (AWS) behind our fault proxy: activation, create,
//! scale, delete, faults, a crash right after CreateCluster, no leaked secrets, and what only a real server
//! decides: finalizers holding a delete, status written through the status subresource, generations,
//! resourceVersion conflicts, watches, and owner-reference garbage collection of the connection secret.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::proxy::Fault;
use support::world::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activated_provider_creates_scales_and_deletes_a_cluster_and_pool_in_order() {
    let mut world = World::start().await;
    world.start_provider();
    let pp = PostParams::default();
    world
        .clusters()
        .create(&pp, &world.cluster("demo"))
        .await
        .unwrap();
    world
        .pools()
        .create(&pp, &world.pool("h200", "demo"))
        .await
        .unwrap();

    // Before activation: the process serves metrics, runs no controller and makes no AWS call.
    wait_for("the metrics endpoint", &world, || async {
        world.metrics().is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        world
            .metrics()
            .unwrap()
            .contains("modelplane_provider_eks_active_controllers 0")
    );
    assert_eq!(
        world.proxy.requests(),
        Vec::<String>::new(),
        "AWS was called before activation"
    );
    let untouched = world.clusters().get("demo").await.unwrap();
    assert!(untouched.status.is_none() && untouched.finalizers().is_empty());

    world.activate().await;
    wait_for("Cluster demo Ready and Synced", &world, || {
        cluster_ready(&world, "demo")
    })
    .await;
    wait_for("NodePool h200 Ready and Synced", &world, || {
        pool_ready(&world, "h200")
    })
    .await;

    let eks = world.eks();
    let described = eks
        .describe_cluster()
        .name("demo")
        .send()
        .await
        .unwrap()
        .cluster
        .unwrap();
    assert_eq!(described.version.as_deref(), Some("1.34"));
    let group = eks
        .describe_nodegroup()
        .cluster_name("demo")
        .nodegroup_name("h200")
        .send()
        .await
        .unwrap();
    let group = group.nodegroup.unwrap();
    assert_eq!(
        group.scaling_config.as_ref().and_then(|s| s.desired_size),
        Some(2)
    );
    assert_eq!(group.labels.unwrap()["modelplane.ai/pool"], "h200");

    let c = world.clusters().get("demo").await.unwrap();
    assert_eq!(c.annotations()["crossplane.io/external-name"], "demo");
    assert!(
        c.finalizers()
            .contains(&"finalizer.managedresource.crossplane.io".to_string())
    );
    let secret = world.secrets().get("demo-kubeconfig").await.unwrap();
    let kubeconfig: serde_json::Value =
        serde_yaml::from_slice(&secret.data.clone().unwrap()["kubeconfig"].0).unwrap();
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["server"].as_str(),
        described.endpoint.as_deref()
    );
    // Owned by the Cluster the server knows (its uid), as its controller: the garbage collector's handle.
    let owner = &secret.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Cluster", c.uid().unwrap().as_str())
    );
    assert_eq!(owner.controller, Some(true));

    // Status goes through the status subresource: the server ignores a status sent to the main resource, and
    // none of the provider's writes counted as a spec change.
    let generation = c.metadata.generation.unwrap();
    let synced = condition(c.status.as_ref().map(|s| &s.conditions), "Synced").unwrap();
    assert_eq!(synced.observed_generation, Some(generation));
    let forged = Patch::Merge(json!({ "status": { "conditions": [] } }));
    let after = world
        .clusters()
        .patch("demo", &PatchParams::default(), &forged)
        .await
        .unwrap();
    let conditions = after.status.map(|s| s.conditions).unwrap_or_default();
    assert!(
        !conditions.is_empty(),
        "the main resource accepted a status write"
    );
    assert_eq!(after.metadata.generation, Some(generation));
    let pool_generation = world
        .pools()
        .get("h200")
        .await
        .unwrap()
        .metadata
        .generation
        .unwrap();

    let scale = Patch::Merge(json!({ "spec": { "forProvider": { "scaling": { "desiredSize": 3 } } } }));
    world
        .pools()
        .patch("h200", &PatchParams::default(), &scale)
        .await
        .unwrap();
    wait_for("desired size 3 in moto", &world, || async {
        let g = eks
            .describe_nodegroup()
            .cluster_name("demo")
            .nodegroup_name("h200")
            .send()
            .await;
        g.ok().and_then(|g| g.nodegroup?.scaling_config?.desired_size) == Some(3)
    })
    .await;
    // The spec change is a new generation, and the provider says it has acted on exactly that one.
    wait_for("NodePool h200 Synced at its new generation", &world, || async {
        let p = world.pools().get("h200").await.unwrap();
        let synced = condition(p.status.as_ref().map(|s| &s.conditions), "Synced");
        p.metadata.generation == Some(pool_generation + 1)
            && synced.is_some_and(|s| s.observed_generation == p.metadata.generation)
    })
    .await;

    // Deleting both at once: the cluster waits until its node group is gone.
    world
        .clusters()
        .delete("demo", &DeleteParams::default())
        .await
        .unwrap();
    // The finalizer holds the Cluster on the server (deletionTimestamp set) while its node group exists.
    let deleting = world.clusters().get("demo").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert!(
        deleting
            .finalizers()
            .contains(&"finalizer.managedresource.crossplane.io".to_string())
    );
    world
        .pools()
        .delete("h200", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("both managed resources gone", &world, || async {
        world.clusters().get_opt("demo").await.unwrap().is_none()
            && world.pools().get_opt("h200").await.unwrap().is_none()
    })
    .await;
    assert!(
        eks.list_clusters()
            .send()
            .await
            .unwrap()
            .clusters
            .unwrap_or_default()
            .is_empty()
    );
    let requests = world.proxy.requests();
    let group_deleted = requests
        .iter()
        .position(|r| r == "DELETE /clusters/demo/node-groups/h200")
        .unwrap();
    let cluster_deleted = requests
        .iter()
        .position(|r| r == "DELETE /clusters/demo")
        .unwrap();
    assert!(group_deleted < cluster_deleted, "{requests:?}");
    assert!(
        world
            .secrets()
            .get_opt("demo-kubeconfig")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !world.log().contains(SECRET_KEY),
        "the secret access key appeared in the provider log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_server_errors_and_slow_answers_converge_to_one_cluster() {
    let mut world = World::start().await;
    world.proxy.inject(
        "",
        &[
            Fault::Throttle,
            Fault::ServerError,
            Fault::Throttle,
            Fault::Slow(Duration::from_secs(2)),
            Fault::ServerError,
            Fault::Hang,
            Fault::Throttle,
            Fault::ServerError,
        ],
    );
    world.start_provider();
    world
        .clusters()
        .create(&PostParams::default(), &world.cluster("flaky"))
        .await
        .unwrap();
    world.activate().await;
    wait_for("Cluster flaky Ready despite faults", &world, || {
        cluster_ready(&world, "flaky")
    })
    .await;
    let clusters = world
        .eks()
        .list_clusters()
        .send()
        .await
        .unwrap()
        .clusters
        .unwrap_or_default();
    assert_eq!(clusters, vec!["flaky".to_string()]);
    assert!(
        !world.log().contains(SECRET_KEY),
        "the secret access key appeared in the provider log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_killed_right_after_create_cluster_adopts_the_cluster_on_restart() {
    let mut world = World::start().await;
    // CreateCluster reaches moto, but its answer never comes back.
    world.proxy.inject("POST /clusters", &[Fault::Lost]);
    world.start_provider();
    world
        .clusters()
        .create(&PostParams::default(), &world.cluster("crash"))
        .await
        .unwrap();
    world.activate().await;
    let eks = world.eks();
    wait_for("CreateCluster to reach moto", &world, || async {
        eks.describe_cluster().name("crash").send().await.is_ok()
    })
    .await;
    world.kill_provider();

    world.start_provider();
    wait_for("Cluster crash Ready after restart", &world, || {
        cluster_ready(&world, "crash")
    })
    .await;
    let clusters = eks
        .list_clusters()
        .send()
        .await
        .unwrap()
        .clusters
        .unwrap_or_default();
    assert_eq!(clusters, vec!["crash".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_conflicts_with_another_clients_change_is_retried_without_a_second_create() {
    let mut world = World::start().await;
    // CreateCluster is answered only after a while: long enough for another client to change the Cluster,
    // so the provider's next write (the create-succeeded mark, with the resourceVersion it read) is stale.
    world
        .proxy
        .inject("POST /clusters", &[Fault::Slow(Duration::from_secs(5))]);
    world.start_provider();
    world
        .clusters()
        .create(&PostParams::default(), &world.cluster("contested"))
        .await
        .unwrap();
    world.activate().await;
    wait_for("CreateCluster on its way", &world, || async {
        world.proxy.count("POST /clusters") == 1
    })
    .await;
    let label = Patch::Merge(json!({ "metadata": { "labels": { "team": "platform" } } }));
    world
        .clusters()
        .patch("contested", &PatchParams::default(), &label)
        .await
        .unwrap();
    wait_for("Cluster contested Ready", &world, || {
        cluster_ready(&world, "contested")
    })
    .await;
    let log = world.log();
    assert!(
        log.contains("kubernetes write failed") && log.contains("409"),
        "the API server never answered the stale write with a conflict\n{log}"
    );
    // The conflict cost one retry, not a second cluster, and the other client's change stands.
    assert_eq!(
        world.proxy.count("POST /clusters"),
        1,
        "{:?}",
        world.proxy.requests()
    );
    let c = world.clusters().get("contested").await.unwrap();
    assert_eq!(c.labels()["team"], "platform");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_garbage_collector_removes_the_connection_secret_of_a_cluster_gone_behind_the_providers_back() {
    let mut world = World::start().await;
    world.start_provider();
    world
        .clusters()
        .create(&PostParams::default(), &world.cluster("orphan"))
        .await
        .unwrap();
    world.activate().await;
    wait_for("Cluster orphan Ready", &world, || cluster_ready(&world, "orphan")).await;
    assert!(
        world
            .secrets()
            .get_opt("orphan-kubeconfig")
            .await
            .unwrap()
            .is_some()
    );

    // The provider is gone and someone drops its finalizer: the provider never gets to delete the secret.
    world.kill_provider();
    let unfinalize = Patch::Merge(json!({ "metadata": { "finalizers": null } }));
    world
        .clusters()
        .patch("orphan", &PatchParams::default(), &unfinalize)
        .await
        .unwrap();
    world
        .clusters()
        .delete("orphan", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "the garbage collector to delete orphan-kubeconfig",
        &world,
        || async {
            world
                .secrets()
                .get_opt("orphan-kubeconfig")
                .await
                .unwrap()
                .is_none()
        },
    )
    .await;
}
