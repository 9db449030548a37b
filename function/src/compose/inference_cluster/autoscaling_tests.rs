//! Autoscaling on a stock EKS cluster: pools with a range carry the cluster autoscaler's discovery tags and
//! their range; a pool of fixed size carries neither; the autoscaler's pod identity uses its own role.

use serde_json::json;

use super::*;

#[test]
fn pools_that_autoscale_carry_the_discovery_tags_and_their_range_and_fixed_pools_do_not() {
    let mut xr = eks("Standard");
    xr["spec"]["nodePools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "fixed", "className": "eks-h200-8x", "nodeCount": 3, "zones": ["us-east-1a"]}));
    let out = run(&xr);
    let spec = |key: &str| out.resources[key].object["spec"]["forProvider"].clone();
    let gpu = spec("eks-nodepool-gpu");
    assert_eq!(
        gpu["scaling"],
        json!({"minSize": 2, "maxSize": 4, "desiredSize": 2})
    );
    assert_eq!(gpu["tags"]["k8s.io/cluster-autoscaler/enabled"], "true");
    assert_eq!(gpu["tags"]["k8s.io/cluster-autoscaler/us-east"], "owned");
    // The system pool grows from two to three controllers' nodes, so the autoscaler may move it too.
    assert_eq!(
        spec("eks-nodepool-system")["tags"]["k8s.io/cluster-autoscaler/us-east"],
        "owned"
    );
    let fixed = spec("eks-nodepool-fixed");
    assert_eq!(
        fixed["scaling"],
        json!({"minSize": 3, "maxSize": 3, "desiredSize": 3})
    );
    assert!(
        fixed["tags"].get("k8s.io/cluster-autoscaler/enabled").is_none(),
        "{fixed}"
    );
    assert_eq!(fixed["tags"]["modelplane.ai/cluster"], "us-east");
}

#[test]
fn the_autoscaler_gets_its_role_through_pod_identity() {
    let out = run(&stock());
    let association = &out.resources["eks-podidentity-autoscaler"].object["spec"]["forProvider"];
    assert_eq!(association["serviceAccount"], "cluster-autoscaler");
    assert_eq!(association["namespace"], "kube-system");
    assert_eq!(
        association["roleArn"],
        "arn:aws:iam::123456789012:role/us-east-autoscaler"
    );
    let role = &out.resources["eks-role-autoscaler"].object["spec"]["forProvider"];
    assert_eq!(role["assumedBy"], "pods.eks.amazonaws.com");
    let policy: Value = serde_json::from_str(role["inlinePolicy"].as_str().unwrap()).unwrap();
    // Resizing reaches only the node groups EKS tagged as this cluster's; reading reaches everything.
    let resize = policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["Action"].to_string().contains("autoscaling:SetDesiredCapacity"))
        .unwrap();
    assert_eq!(
        resize["Condition"]["StringEquals"]["aws:ResourceTag/k8s.io/cluster-autoscaler/us-east"], "owned",
        "{policy}"
    );
    assert!(!resize["Action"].to_string().contains("Describe"), "{policy}");
}
