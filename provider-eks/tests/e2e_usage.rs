//! ProviderConfigUsage on the real kube-apiserver with the real binary: a managed resource records the config
//! it uses, and a ProviderConfig in use cannot be deleted until its last user is gone.

// Test helpers outside #[test] functions may fail loudly too (clippy.toml covers only the test bodies).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use modelplane_eks_api::{ProviderConfig, ProviderConfigUsage};
use support::world::*;

const IN_USE: &str = "in-use.crossplane.io";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_config_in_use_is_deleted_only_after_its_last_managed_resource() {
    let mut world = World::start().await;
    world.start_provider();
    world.activate().await;
    let configs: Api<ProviderConfig> = Api::namespaced(world.kube.clone(), &world.ns);
    let usages: Api<ProviderConfigUsage> = Api::namespaced(world.kube.clone(), &world.ns);
    wait_for(
        "the ProviderConfig holds the in-use finalizer",
        &world,
        || async {
            configs
                .get("default")
                .await
                .unwrap()
                .finalizers()
                .contains(&IN_USE.to_owned())
        },
    )
    .await;

    world
        .clusters()
        .create(&PostParams::default(), &world.cluster("demo"))
        .await
        .unwrap();
    wait_for("Cluster demo Ready and Synced", &world, || {
        cluster_ready(&world, "demo")
    })
    .await;
    let cluster = world.clusters().get("demo").await.unwrap();
    let uid = cluster.uid().unwrap();
    let usage = usages.get(&uid).await.unwrap();
    assert_eq!(usage.spec.provider_config_ref.kind, "ProviderConfig");
    assert_eq!(usage.spec.provider_config_ref.name, "default");
    assert_eq!(
        (
            usage.spec.resource_ref.kind.as_str(),
            usage.spec.resource_ref.name.as_str()
        ),
        ("Cluster", "demo")
    );
    assert_eq!(usage.labels()["crossplane.io/provider-config"], "default");
    let owner = &usage.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(owner.uid, uid);

    // The config is asked to go while the cluster uses it: the server keeps it, marked for deletion.
    configs.delete("default", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held = configs.get("default").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(held.finalizers().contains(&IN_USE.to_owned()));

    // The cluster goes (its delete still reaches AWS through the held config), then its usage, then the config.
    world
        .clusters()
        .delete("demo", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the cluster, its usage and the config gone", &world, || async {
        world.clusters().get_opt("demo").await.unwrap().is_none()
            && usages.get_opt(&uid).await.unwrap().is_none()
            && configs.get_opt("default").await.unwrap().is_none()
    })
    .await;
    let eks = world.eks();
    let left = eks.list_clusters().send().await.unwrap();
    assert!(left.clusters().is_empty());
}
