//! The GKE stages: what is composed as what it needs is observed Ready (observations as the render
//! simulation makes them), what stays composed, and the deletion order.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::compose::inference_cluster::provision::KEY_ACTIVATION_POLICY;

use super::*;
use crate::{
    compose::inference_cluster::{
        class_requirement, compose as compose_cluster, provision::CREDENTIALS_REQUIREMENT,
    },
    render::{RequestBuilder, simulate},
    wire::RawStruct,
};

fn l4() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass", "metadata": {"name": "l4"},
           "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                                 "count": 1}],
                    "provisioning": {"provider": "GKE", "gke": {"machineType": "g2-standard-8", "diskSizeGb": 100,
                                     "accelerator": {"type": "nvidia-l4", "count": 1}}}}})
}

fn cluster() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "central"},
           "spec": {"cluster": {"source": "GKE", "gke": {"region": "us-central1"}},
                    "nodePools": [{"name": "gpu", "className": "l4", "nodeCount": 2, "maxNodeCount": 4,
                                   "zones": ["us-central1-a", "us-central1-b"]}]}})
}

fn provider_config() -> Value {
    json!({"apiVersion": "gcp.m.upbound.io/v1beta1", "kind": "ClusterProviderConfig", "metadata": {"name": "default"},
           "spec": {"projectID": "p", "credentials": {"source": "Secret"}}})
}

fn compose(observed: &[(String, Value)]) -> Output {
    let xr = cluster();
    let mut req = RequestBuilder::new(&xr)
        .required(&class_requirement("l4"), &[l4()])
        .required(CREDENTIALS_REQUIREMENT, &[provider_config()]);
    for (key, object) in observed {
        req = req.observed(key, object);
    }
    compose_cluster(&req.build(), &RawStruct::from_value(&xr).unwrap()).unwrap()
}

/// Each composed resource as its provider reports it once Ready, with Crossplane's composition key.
fn observe(out: &Output, keys: impl Fn(&str) -> bool) -> Vec<(String, Value)> {
    out.resources
        .iter()
        .filter(|(key, _)| keys(key))
        .map(|(key, c)| {
            let mut object = Value::Object(c.object.to_map());
            object["metadata"]["annotations"]["crossplane.io/composition-resource-name"] = json!(key);
            (key.clone(), simulate::observe(&object))
        })
        .collect()
}

fn gke_keys(out: &Output) -> BTreeSet<&str> {
    out.resources
        .keys()
        .map(String::as_str)
        .filter(|k| k.starts_with("gke-") || *k == KEY_STORAGE_CLASS || *k == KEY_ACTIVATION_POLICY)
        .collect()
}

/// Rounds of "observe everything Ready, compose again" until nothing new is composed.
fn settle() -> (Output, Vec<BTreeSet<String>>) {
    let mut out = compose(&[]);
    let mut stages = vec![gke_keys(&out).into_iter().map(str::to_owned).collect()];
    for _ in 0..12 {
        let next = compose(&observe(&out, |_| true));
        let keys: BTreeSet<String> = gke_keys(&next).into_iter().map(str::to_owned).collect();
        if Some(&keys) == stages.last() {
            return (next, stages);
        }
        stages.push(keys);
        out = next;
    }
    panic!("the GKE stages did not settle");
}

#[test]
fn each_stage_waits_for_the_one_before() {
    let (done, stages) = settle();
    let first_with = |key: &str| stages.iter().position(|s| s.contains(key)).unwrap();
    assert_eq!(stages[0], BTreeSet::from([KEY_ACTIVATION_POLICY.to_owned()]));
    assert!(first_with(&infra::api_key("container.googleapis.com")) == 1);
    assert!(first_with(KEY_NETWORK) > first_with(&infra::api_key("compute.googleapis.com")));
    assert!(first_with(KEY_SUBNET) > first_with(KEY_NETWORK));
    assert!(first_with(KEY_NODE_ROLE) > first_with(KEY_NODE_ACCOUNT));
    assert!(first_with(KEY_ADMIN_KEY) > first_with(KEY_ADMIN_ACCOUNT));
    assert!(first_with(KEY_CLUSTER) > first_with(KEY_SUBNET));
    assert!(first_with(&node_pool_key("gpu")) > first_with(KEY_CLUSTER));
    assert!(first_with(KEY_STORAGE_CLASS) > first_with(KEY_CLUSTER));
    assert!(
        done.resources.keys().any(|k| k.starts_with("release-")),
        "components once the cluster is Ready"
    );
}

#[test]
fn later_stages_are_built_from_what_the_stage_before_reported() {
    let (done, _) = settle();
    let spec = |key: &str| Value::Object(done.resources[key].object.to_map())["spec"]["forProvider"].clone();
    let network =
        "https://www.googleapis.com/compute/v1/projects/modelplane-simulated/global/networks/central";
    assert_eq!(spec(KEY_SUBNET)["network"], network);
    assert_eq!(spec(KEY_CLUSTER)["network"], network);
    assert!(
        spec(KEY_CLUSTER)["subnetwork"]
            .as_str()
            .unwrap()
            .ends_with("/regions/us-central1/subnetworks/central")
    );
    let email = format!(
        "{}@modelplane-simulated.iam.gserviceaccount.com",
        infra::account_id("central", "nodes")
    );
    assert_eq!(spec(KEY_NODE_ROLE)["member"], format!("serviceAccount:{email}"));
    assert_eq!(spec(&node_pool_key("gpu"))["nodeConfig"]["serviceAccount"], email);
    assert_eq!(
        spec(&node_pool_key("gpu"))["cluster"],
        "projects/modelplane-simulated/locations/us-central1/clusters/central"
    );
    let storage = &spec(KEY_STORAGE_CLASS)["manifest"];
    assert_eq!(storage["parameters"]["network"], "central");
    // Two zones, two nodes: one per zone to start with; the range is the pool's, in total.
    assert_eq!(spec(&node_pool_key("gpu"))["initialNodeCount"], 1);
    assert_eq!(spec(&node_pool_key("gpu"))["autoscaling"]["totalMaxNodeCount"], 4);
}

#[test]
fn a_composed_resource_keeps_its_inputs_when_what_it_was_built_from_is_not_observed() {
    let (done, _) = settle();
    // The network, subnetwork and node account being updated: observed, but not Ready, so their status is not
    // read.
    let mut observed = observe(&done, |_| true);
    for (key, object) in &mut observed {
        if [KEY_NETWORK, KEY_SUBNET, KEY_NODE_ACCOUNT].contains(&key.as_str()) {
            object["status"]["conditions"][0]["status"] = json!("False");
        }
    }
    let again = compose(&observed);
    for key in [
        KEY_SUBNET,
        KEY_CLUSTER,
        &node_pool_key("gpu"),
        KEY_NODE_ROLE,
        KEY_STORAGE_CLASS,
    ] {
        assert!(again.resources.contains_key(key), "{key} is no longer composed");
        assert_eq!(
            again.resources[key].object, done.resources[key].object,
            "{key} changed"
        );
    }
}

#[test]
fn deletion_runs_from_the_workloads_to_the_project() {
    let (done, _) = settle();
    let usages: BTreeSet<(String, String)> = done
        .resources
        .values()
        .filter(|c| c.object["kind"] == "Usage")
        .map(|c| {
            let reason = c.object["spec"]["reason"].as_str().unwrap();
            let (by, of) = reason.split_once(" must be deleted before ").unwrap();
            (by.to_owned(), of.to_owned())
        })
        .collect();
    let has = |by: &str, of: &str| usages.contains(&(by.to_owned(), of.to_owned()));
    assert!(has("release-cert-manager", KEY_CLUSTER));
    assert!(has(&node_pool_key("gpu"), KEY_CLUSTER));
    assert!(has(&node_pool_key("gpu"), KEY_NODE_ACCOUNT));
    assert!(
        has(KEY_CLUSTER, KEY_ADMIN_KEY),
        "the admin key outlives what reaches the cluster with it"
    );
    assert!(has(KEY_CLUSTER, KEY_SUBNET) && has(KEY_SUBNET, KEY_NETWORK));
    assert!(has(KEY_ADMIN_KEY, KEY_ADMIN_ACCOUNT) && has(KEY_ADMIN_ROLE, KEY_ADMIN_ACCOUNT));
    assert!(
        !usages.iter().any(|(_, of)| of.starts_with(API_PREFIX)),
        "APIs stay on and need no order"
    );
}

#[test]
fn the_provider_configs_reach_the_cluster_as_the_admin_account() {
    let (done, _) = settle();
    let config = &done.resources
        [crate::compose::inference_cluster::components::KEY_KUBERNETES_PROVIDER_CONFIG]
        .object["spec"];
    assert_eq!(config["credentials"]["secretRef"]["name"], "central-kubeconfig");
    assert_eq!(config["identity"]["type"], "GoogleApplicationCredentials");
    assert_eq!(
        config["identity"]["secretRef"]["name"],
        admin_key_secret("central")
    );
    let key = &done.resources[KEY_ADMIN_KEY].object["spec"]["writeConnectionSecretToRef"];
    assert_eq!(key["name"], admin_key_secret("central"));
}

#[test]
fn service_account_ids_fit_google_clouds_limits() {
    for cluster in ["a", "central", "a-forty-character-cluster-name-abcdefghi"] {
        for part in ["nodes", "admin"] {
            let id = infra::account_id(cluster, part);
            assert!((6..=30).contains(&id.len()), "{id}");
            assert!(
                id.starts_with(|c: char| c.is_ascii_lowercase()) && !id.ends_with('-'),
                "{id}"
            );
        }
    }
    assert_ne!(
        infra::account_id("a-forty-character-cluster-name-abcdefghi", "nodes"),
        infra::account_id("a-forty-character-cluster-name-abcdefghj", "nodes")
    );
}
