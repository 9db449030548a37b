//! The IAM policy the package ships (`package/provider-eks/iam/provider-policy.json`) is what provider-eks needs,
//! tested as AWS would check it: moto checks every call's signature and evaluates the caller's policies (the EKS
//! add-on and pod-identity stand-in asks moto the same), and the provider calls as an IAM user holding exactly
//! that policy. A stock InferenceCluster comes up whole and deletes to nothing under it, and neither the user's
//! secret key nor the cluster's kubeconfig shows in the provider's log, an Event or an MR; take one action away and
//! the managed resource that needs it says it was refused, naming the action.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

#[path = "stock/driver.rs"]
mod driver;
#[path = "stock/inventory.rs"]
mod inventory;

use std::time::{Duration, Instant};

use driver::StockCluster;
use serde_json::{Value, json};
use support::world::World;

/// The policy document as the package ships it.
fn shipped_policy() -> Value {
    let path = support::repo_root().join("package/provider-eks/iam/provider-policy.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// `policy` with `action` taken out of every statement that names it.
fn without(mut policy: Value, action: &str) -> Value {
    let mut found = false;
    for statement in policy["Statement"].as_array_mut().unwrap() {
        if let Some(actions) = statement["Action"].as_array_mut() {
            let before = actions.len();
            actions.retain(|a| a != action);
            found |= actions.len() != before;
        }
    }
    assert!(found, "the shipped policy does not name {action}");
    policy
}

/// Deletes the cluster's managed resources and checks AWS holds exactly what it held before.
async fn tear_down(world: &mut World, cluster: &mut StockCluster, baseline: &inventory::Inventory) {
    cluster.delete(world).await;
    let left = inventory::take(world).await.since(baseline);
    assert!(
        left.is_empty(),
        "left in AWS after deleting: {left:#?}\nprovider log:\n{}",
        world.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_iam_policy_is_enough_to_bring_up_and_delete_a_stock_cluster() {
    let mut world = World::start_with_eks_standin().await;
    let secret = world.enforce_iam(&shipped_policy().to_string()).await;
    let baseline = inventory::take(&world).await;
    driver::start_provider(&mut world);
    let mut cluster = StockCluster::example();
    cluster.converge(&mut world).await;
    let log = world.log();
    for refusal in [
        "AccessDenied",
        "not authorized",
        "SignatureDoesNotMatch",
        "InvalidClientTokenId",
    ] {
        assert!(!log.contains(refusal), "a call was refused ({refusal}):\n{log}");
    }
    let mut planted = connection_secrets(&world).await;
    assert!(!planted.is_empty(), "the cluster wrote no kubeconfig");
    planted.push(secret);
    let leaked_before = leaks(&world, &cluster, &planted).await;
    tear_down(&mut world, &mut cluster, &baseline).await;
    let mut leaked = leaks(&world, &cluster, &planted).await;
    leaked.extend(leaked_before);
    assert!(leaked.is_empty(), "secrets left their Secrets: {leaked:#?}");
}

/// The private connection details the provider wrote for the cluster: its bearer token, and the kubeconfig
/// carrying it. (The endpoint, the cluster's CA and the token's expiry are public, and in its status too.)
async fn connection_secrets(world: &World) -> Vec<String> {
    const PRIVATE: [&str; 2] = ["token", "kubeconfig"];
    let secrets = world.secrets().list(&Default::default()).await.unwrap();
    secrets
        .items
        .iter()
        .flat_map(|s| s.data.iter().flatten())
        .filter(|(key, _)| PRIVATE.contains(&key.as_str()))
        .map(|(_, value)| String::from_utf8_lossy(&value.0).into_owned())
        .filter(|v| v.len() >= 12)
        .collect()
}

/// Where a planted value appears: the provider's log, an Event in the world's namespace, or an MR's spec or status.
async fn leaks(world: &World, cluster: &StockCluster, planted: &[String]) -> Vec<String> {
    let events: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(world.kube.clone(), &world.ns);
    let mut places = vec![("the provider log".to_owned(), world.log())];
    for event in events.list(&Default::default()).await.unwrap() {
        let name = event.metadata.name.clone().unwrap_or_default();
        places.push((format!("Event {name}"), serde_json::to_string(&event).unwrap()));
    }
    for (key, object) in cluster.observed_all() {
        places.push((
            format!("MR {key}"),
            json!([object["spec"], object["status"]]).to_string(),
        ));
    }
    places
        .iter()
        .flat_map(|(place, text)| {
            planted
                .iter()
                .filter(|secret| text.contains(secret.as_str()))
                .map(move |secret| format!("{place}: a value of {} characters", secret.len()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_one_action_of_the_policy_the_resource_that_needs_it_reports_the_refusal() {
    let mut world = World::start_with_eks_standin().await;
    let policy = without(shipped_policy(), "eks:CreateNodegroup");
    world.enforce_iam(&policy.to_string()).await;
    let baseline = inventory::take(&world).await;
    driver::start_provider(&mut world);
    let mut cluster = StockCluster::example();
    let deadline = Instant::now() + support::world::CONVERGE;
    let refused = loop {
        cluster.step(&world).await;
        let synced = cluster
            .observed("eks-nodepool-gpu")
            .and_then(|pool| pool["status"]["conditions"].as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .find(|c| c["type"] == "Synced" && c["status"] == "False");
        if let Some(condition) = synced {
            break condition;
        }
        assert!(
            Instant::now() < deadline,
            "the GPU node pool never reported the refusal; not Ready:\n{}\nprovider log:\n{}",
            cluster.not_ready().join("\n"),
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("AccessDenied") && message.contains("eks:CreateNodegroup"),
        "the refusal names the missing action: {refused}"
    );
    assert!(
        world
            .eks()
            .list_nodegroups()
            .cluster_name(cluster.name())
            .send()
            .await
            .unwrap()
            .nodegroups()
            .is_empty(),
        "a node group was made without the permission"
    );
    tear_down(&mut world, &mut cluster, &baseline).await;
}
