//! The network's security group, wired through the stock cluster: the control plane and every node pool join
//! it, and the file system admits NFS from it alone.

use serde_json::json;

use super::*;

#[test]
fn the_network_group_reaches_the_cluster_the_pools_and_the_nfs_rule() {
    let out = run(&stock());
    let spec = |key: &str| out.resources[key].object["spec"]["forProvider"].clone();
    assert_eq!(
        spec("eks-cluster")["networking"]["securityGroupIds"],
        json!(["sg-0nodes"])
    );
    assert_eq!(
        spec("eks-nodepool-system")["securityGroupIds"],
        json!(["sg-0nodes"])
    );
    assert_eq!(spec("eks-nodepool-gpu")["securityGroupIds"], json!(["sg-0nodes"]));
    assert_eq!(
        spec("eks-filesystem")["nfsSecurityGroupIds"],
        json!(["sg-0nodes"])
    );
}

#[test]
fn a_cluster_made_before_the_network_had_a_group_is_not_asked_to_join_it() {
    let xr = stock();
    let full = run(&xr);
    let mut observed = all_ready(&full);
    // The cluster and the system pool exist without groups (composed by an earlier release).
    for (key, object) in observed.iter_mut() {
        match key.as_str() {
            "eks-cluster" => {
                object["spec"]["forProvider"]["networking"]
                    .as_object_mut()
                    .unwrap()
                    .remove("securityGroupIds");
            }
            "eks-nodepool-system" => {
                object["spec"]["forProvider"]
                    .as_object_mut()
                    .unwrap()
                    .remove("securityGroupIds");
            }
            _ => {}
        }
    }
    let out = compose_observed(&xr, &observed);
    let spec = |key: &str| out.resources[key].object["spec"]["forProvider"].clone();
    assert!(
        spec("eks-cluster")["networking"]
            .get("securityGroupIds")
            .is_none()
    );
    assert!(spec("eks-nodepool-system").get("securityGroupIds").is_none());
    // The file system's rule can change in place, so it follows the network.
    assert_eq!(
        spec("eks-filesystem")["nfsSecurityGroupIds"],
        json!(["sg-0nodes"])
    );
}
