//! The real binary against kmock (Kubernetes API, over HTTP, with watches) and moto (AWS) behind our fault
//! proxy: activation, create, scale, delete, faults, a crash right after CreateCluster, and no leaked secrets.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::proxy::Fault;
use support::world::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activated_provider_creates_scales_and_deletes_a_cluster_and_pool_in_order() {
    let Some(mut world) = World::start().await else {
        return;
    };
    world.start_provider();
    let pp = PostParams::default();
    world.clusters().create(&pp, &cluster("demo")).await.unwrap();
    world.pools().create(&pp, &pool("h200", "demo")).await.unwrap();

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
    let secret = Api::<Secret>::namespaced(world.kube.clone(), NS)
        .get("demo-kubeconfig")
        .await
        .unwrap();
    let kubeconfig: serde_json::Value =
        serde_yaml::from_slice(&secret.data.unwrap()["kubeconfig"].0).unwrap();
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["server"].as_str(),
        described.endpoint.as_deref()
    );

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

    // Deleting both at once: the cluster waits until its node group is gone.
    world
        .clusters()
        .delete("demo", &DeleteParams::default())
        .await
        .unwrap();
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
        !world.log().contains(SECRET_KEY),
        "the secret access key appeared in the provider log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_server_errors_and_slow_answers_converge_to_one_cluster() {
    let Some(mut world) = World::start().await else {
        return;
    };
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
        .create(&PostParams::default(), &cluster("flaky"))
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
    let Some(mut world) = World::start().await else {
        return;
    };
    // CreateCluster reaches moto, but its answer never comes back.
    world.proxy.inject("POST /clusters", &[Fault::Lost]);
    world.start_provider();
    world
        .clusters()
        .create(&PostParams::default(), &cluster("crash"))
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
