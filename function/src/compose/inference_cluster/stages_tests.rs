//! Readiness and staging: what a cluster composes as what it depends on is observed, when it and its pools are
//! Ready, what it keeps composed, how deletion is ordered, and what deletion leaves alone.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::*;

#[test]
fn the_cluster_and_its_pools_are_ready_only_once_everything_is_observed_ready() {
    let xr = eks("Dynamo");
    let start = first(&xr);
    assert_eq!(start.ready, Some(false));
    assert_eq!(start.status["pools"], json!([]));
    assert!(start.resources.values().all(|c| !c.ready));

    let observed = all_ready(&run(&xr));
    let done = compose_observed(&xr, &observed);
    assert_eq!(done.ready, Some(true));
    assert!(done.resources.values().all(|c| c.ready));
    assert_eq!(done.status["pools"][0]["name"], "gpu");
    assert_eq!(done.status["pools"][0]["nodeCount"], 2);
    assert_eq!(
        done.status["pools"][0]["devices"][0]["capacity"]["memory"]["value"],
        "141Gi"
    );
    assert_eq!(done.status["cacheStorageClass"], "modelplane-rwx-efs");

    let mut pool_down = observed.clone();
    fixtures::not_ready(&mut pool_down, "eks-nodepool-gpu");
    let waiting = compose_observed(&xr, &pool_down);
    assert_eq!(waiting.ready, Some(false));
    assert_eq!(
        waiting.status["pools"],
        json!([]),
        "a pool is schedulable only once its NodePool is ready"
    );
}

#[test]
fn provider_configs_and_the_policy_are_ready_once_they_exist() {
    let xr = eks("Standard");
    let start = first(&xr);
    let policy = Value::Object(start.resources["activation-policy"].object.to_map());
    let out = compose_observed(&xr, &[("activation-policy".to_owned(), policy)]);
    assert!(out.resources["activation-policy"].ready);
    assert!(!out.resources["eks-network"].ready);
}

fn eks_keys(out: &Output) -> BTreeSet<String> {
    out.resources
        .keys()
        .filter(|k| k.starts_with("eks-"))
        .cloned()
        .collect()
}

#[test]
fn provider_eks_objects_wait_for_the_activation_policy_to_be_observed() {
    let xr = stock();
    let start = first(&xr);
    assert!(start.resources.contains_key("activation-policy"));
    assert_eq!(
        eks_keys(&start),
        BTreeSet::new(),
        "no provider-eks kind exists yet"
    );
    assert!(
        !start.resources.keys().any(|k| k.starts_with("release-")),
        "nothing is installed before the cluster exists"
    );
    let components = start.status["components"].as_array().unwrap();
    assert!(!components.is_empty());
    assert!(
        components.iter().all(|c| c["ready"] == false),
        "a component not composed yet is not ready: {components:?}"
    );
}

#[test]
fn a_stock_cluster_comes_up_network_and_roles_then_cluster_then_what_hangs_off_it() {
    let xr = stock();
    let mut stages = Vec::new();
    let mut out = first(&xr);
    for _ in 0..8 {
        stages.push(eks_keys(&out));
        let next = compose_observed(&xr, &all_ready(&out));
        if next.resources.len() == out.resources.len() {
            break;
        }
        out = next;
    }
    let expected: [&[&str]; 4] = [
        &[],
        &[
            "eks-network",
            "eks-role-autoscaler",
            "eks-role-cluster",
            "eks-role-efs-csi",
            "eks-role-node",
        ],
        &["eks-cluster", "eks-filesystem"],
        &[
            "eks-addon-aws-efs-csi-driver",
            "eks-addon-coredns",
            "eks-addon-eks-pod-identity-agent",
            "eks-addon-kube-proxy",
            "eks-addon-vpc-cni",
            "eks-nodepool-gpu",
            "eks-nodepool-system",
            "eks-podidentity-autoscaler",
            "eks-podidentity-efs-csi",
        ],
    ];
    let added: Vec<BTreeSet<String>> = stages
        .windows(2)
        .map(|w| w[1].difference(&w[0]).cloned().collect())
        .collect();
    for (i, want) in expected.iter().enumerate().skip(1) {
        let want: BTreeSet<String> = want.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(added[i - 1], want, "stage {i}");
    }
    let cluster = &out.resources["eks-cluster"].object["spec"]["forProvider"];
    assert_eq!(
        cluster["roleArn"],
        "arn:aws:iam::123456789012:role/us-east-cluster"
    );
    assert_eq!(
        cluster["networking"]["subnetIds"],
        json!(["subnet-00", "subnet-01"])
    );
    let pool = &out.resources["eks-nodepool-gpu"].object["spec"]["forProvider"];
    assert_eq!(pool["nodeRoleArn"], "arn:aws:iam::123456789012:role/us-east-node");
    let network = &out.resources["eks-network"].object["spec"]["forProvider"];
    assert_eq!(
        network["zones"],
        json!(["us-east-1a", "us-east-1b"]),
        "the pool's zone and one more"
    );
    let identity = &out.resources["eks-podidentity-autoscaler"].object["spec"]["forProvider"];
    assert_eq!(
        (&identity["serviceAccount"], &identity["roleArn"]),
        (
            &json!("cluster-autoscaler"),
            &json!("arn:aws:iam::123456789012:role/us-east-autoscaler")
        )
    );
}

#[test]
fn the_cache_storage_class_waits_for_the_efs_driver_and_is_reported_once_it_exists() {
    let xr = stock();
    let full = run(&xr);
    let class = &full.resources["object-storageclass-efs"].object;
    let manifest = &class["spec"]["forProvider"]["manifest"];
    assert_eq!(manifest["metadata"]["name"], "modelplane-rwx-efs");
    assert_eq!(manifest["parameters"]["fileSystemId"], "fs-0123abcd");
    assert_eq!(class["spec"]["providerConfigRef"]["name"], "us-east");

    let mut observed = all_ready(&full);
    observed.retain(|(k, _)| k != "object-storageclass-efs");
    fixtures::not_ready(&mut observed, "eks-addon-aws-efs-csi-driver");
    let waiting = compose_observed(&xr, &observed);
    assert!(!waiting.resources.contains_key("object-storageclass-efs"));
    assert_eq!(waiting.status.get("cacheStorageClass"), None);
}

#[test]
fn what_exists_stays_composed_when_what_it_was_built_from_is_not_observed() {
    let xr = stock();
    let full = run(&xr);
    let mut observed = all_ready(&full);
    // The network and the roles drop out of the observed state (say, mid-deletion): the cluster must not.
    observed.retain(|(k, _)| k != "eks-network" && !k.starts_with("eks-role-"));
    let out = compose_observed(&xr, &observed);
    assert_eq!(
        out.resources["eks-cluster"].object["spec"],
        full.resources["eks-cluster"].object["spec"]
    );
    assert_eq!(
        out.resources["eks-nodepool-gpu"].object["spec"],
        full.resources["eks-nodepool-gpu"].object["spec"]
    );
    assert_eq!(
        out.resources["eks-filesystem"].object["spec"],
        full.resources["eks-filesystem"].object["spec"]
    );
}

#[test]
fn brought_subnets_and_roles_skip_the_network_and_those_roles() {
    let xr = eks("Standard");
    let mut byo = xr.clone();
    byo["spec"]["cluster"]["eks"]["networking"] = json!({"subnetIds": ["subnet-0a", "subnet-0b"]});
    let after_policy = compose_observed(
        &byo,
        &[(
            "activation-policy".to_owned(),
            json!({"kind": "ManagedResourceActivationPolicy"}),
        )],
    );
    assert!(!after_policy.resources.contains_key("eks-network"));
    assert!(!after_policy.resources.contains_key("eks-role-cluster"));
    assert_eq!(
        after_policy.resources["eks-cluster"].object["spec"]["forProvider"]["networking"]["subnetIds"],
        json!(["subnet-0a", "subnet-0b"])
    );
}

#[test]
fn usages_hold_deletion_in_reverse_order() {
    let out = run(&stock());
    let pairs: BTreeSet<(String, String)> = out
        .resources
        .values()
        .filter(|c| c.object["kind"] == "Usage")
        .map(|c| {
            let spec = &c.object["spec"];
            (
                format!(
                    "{}/{}",
                    spec["by"]["kind"].as_str().unwrap(),
                    spec["by"]["resourceRef"]["name"].as_str().unwrap()
                ),
                format!(
                    "{}/{}",
                    spec["of"]["kind"].as_str().unwrap(),
                    spec["of"]["resourceRef"]["name"].as_str().unwrap()
                ),
            )
        })
        .collect();
    for (by, of) in [
        ("NodePool/us-east-gpu", "Cluster/us-east"),
        ("NodePool/us-east-system", "Cluster/us-east"),
        ("NodePool/us-east-gpu", "Role/us-east-node"),
        ("NodePool/us-east-system", "Role/us-east-node"),
        ("Addon/us-east-coredns", "Cluster/us-east"),
        ("PodIdentityAssociation/us-east-efs-csi", "Role/us-east-efs-csi"),
        ("Cluster/us-east", "Network/us-east"),
        ("Cluster/us-east", "Role/us-east-cluster"),
        ("FileSystem/us-east", "Network/us-east"),
        ("Release/us-east-cluster-autoscaler", "Cluster/us-east"),
        ("Object/us-east-storageclass-efs", "Cluster/us-east"),
    ] {
        assert!(
            pairs.contains(&(by.to_owned(), of.to_owned())),
            "{by} uses {of}: {pairs:#?}"
        );
    }
    assert!(
        out.resources
            .values()
            .filter(|c| c.object["kind"] == "Usage")
            .all(|c| c.object["spec"]["replayDeletion"] == true)
    );
}

#[test]
fn deleting_a_cluster_deletes_its_stack_but_never_the_shared_modelplane_system_namespace() {
    let out = run(&existing("Standard"));
    let wrapped: Vec<Value> = out
        .resources
        .values()
        .filter(|c| c.object["kind"] == "Object")
        .map(|c| Value::Object(c.object.to_map()))
        .collect();
    let deletes = |o: &Value| {
        o["spec"]
            .get("managementPolicies")
            .and_then(Value::as_array)
            .is_none_or(|p| p.iter().any(|p| p == "*" || p == "Delete"))
    };
    let [gateway_namespace] = wrapped
        .iter()
        .filter(|o| {
            o["spec"]["forProvider"]["manifest"]
                == json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "modelplane-system"}})
        })
        .collect::<Vec<_>>()[..]
    else {
        panic!("no single modelplane-system Namespace Object");
    };
    assert!(!deletes(gateway_namespace), "{gateway_namespace}");
    let gateway = wrapped
        .iter()
        .find(|o| o["spec"]["forProvider"]["manifest"]["kind"] == "Gateway")
        .expect("the cluster gateway");
    assert!(deletes(gateway), "the gateway itself goes with the cluster");
}
