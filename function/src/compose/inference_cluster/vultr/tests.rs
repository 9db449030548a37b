//! The Vultr composer through the InferenceCluster composer: what each stage composes given what is observed,
//! what a resource that exists keeps, the deletion order, and every refusal by field name.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::super::{compose, provision};
use super::{KEY_CLUSTER, KEY_VPC, node_pool_key, storage};
use crate::{
    api::inference_cluster::InferenceClusterSpec,
    compose::{ComposeError, Output, fixtures},
    wire::RawStruct,
};

fn l40s() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass", "metadata": {"name": "vultr-l40s-1x"},
           "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                                 "count": 1, "capacity": {"memory": {"value": "46068Mi"}}}],
                    "provisioning": {"provider": "Vultr", "vultr": {"plan": "vcg-l40s-16c-180g-48vram",
                                     "accelerator": {"type": "nvidia-l40s", "count": 1}}}}})
}

fn vultr(stack: &str) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "ewr"},
           "spec": {"stack": stack,
                    "cluster": {"source": "Vultr", "vultr": {"region": "ewr"}},
                    "taints": [{"key": "team", "value": "ml", "effect": "NoExecute"}],
                    "nodePools": [{"name": "gpu", "className": "vultr-l40s-1x", "nodeCount": 2,
                                   "minNodeCount": 1, "maxNodeCount": 4}]}})
}

fn compose_observed(xr: &Value, observed: &[(String, Value)]) -> Output {
    let req = fixtures::cluster_request(xr, &[l40s()], observed).build();
    compose(&req, &RawStruct::from_value(xr).unwrap()).unwrap()
}

/// What Vultr and Crossplane would report for a composed resource once it is Ready: the IDs later stages read.
fn observed_ready(object: &Value) -> Value {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let at_provider = match object["kind"].as_str().unwrap_or_default() {
        "VPC" => json!({"id": format!("vpc-of-{name}")}),
        "Kubernetes" => json!({"id": format!("vke-of-{name}")}),
        "KubernetesNodePool" => json!({"id": format!("np-of-{name}")}),
        _ => json!({}),
    };
    fixtures::ready_at_provider(object, at_provider)
}

fn all_ready(out: &Output) -> Vec<(String, Value)> {
    fixtures::observe_all(out, observed_ready)
}

fn only(observed: &[(String, Value)], keep: &[&str]) -> Vec<(String, Value)> {
    observed
        .iter()
        .filter(|(k, _)| !keep.contains(&k.as_str()))
        .cloned()
        .collect()
}

fn vultr_keys(out: &Output) -> BTreeSet<String> {
    out.resources
        .keys()
        .filter(|k| k.starts_with("vultr-"))
        .cloned()
        .collect()
}

fn object(out: &Output, key: &str) -> Value {
    Value::Object(out.resources[key].object.to_map())
}

/// The whole cluster, every stage observed Ready.
fn run(xr: &Value) -> Output {
    stages(xr).pop().unwrap()
}

/// Every stage until nothing new is composed.
fn stages(xr: &Value) -> Vec<Output> {
    fixtures::stages(compose_observed(xr, &[]), |out| {
        compose_observed(xr, &all_ready(out))
    })
}

fn error(xr: &Value, class: Value) -> ComposeError {
    fixtures::run(compose, &fixtures::cluster_request(xr, &[class], &[]).build()).unwrap_err()
}

#[test]
fn a_stock_cluster_comes_up_vpc_then_cluster_then_pools_and_nfs_then_the_storage_class() {
    let xr = vultr("Standard");
    let outs = stages(&xr);
    assert!(outs[0].resources.contains_key("activation-policy"));
    let stages: Vec<_> = outs[..outs.len() - 1].iter().map(vultr_keys).collect();
    let expected: [&[&str]; 6] = [
        &[],
        &["vultr-vpc"],
        &["vultr-cluster"],
        &[
            "vultr-nodepool-gpu",
            "vultr-object-nfs-namespace",
            "vultr-release-csi-driver-nfs",
        ],
        &[
            "vultr-object-nfs-server",
            "vultr-object-nfs-service",
            "vultr-object-nfs-volume",
        ],
        &["vultr-object-storageclass-nfs"],
    ];
    let mut before = BTreeSet::new();
    for (i, (stage, want)) in stages.iter().zip(expected).enumerate() {
        let new: BTreeSet<&str> = stage.difference(&before).map(String::as_str).collect();
        assert_eq!(new, want.iter().copied().collect(), "stage {i}");
        before = stage.clone();
    }
    assert_eq!(stages.len(), expected.len(), "{stages:#?}");
}

#[test]
fn nothing_of_the_provider_is_composed_before_the_activation_policy_is_seen() {
    let out = compose_observed(&vultr("Dynamo"), &[]);
    assert_eq!(vultr_keys(&out), BTreeSet::new());
    let policy = object(&out, "activation-policy");
    assert_eq!(policy["metadata"]["name"], "ewr-provider-upjet-vultr");
    assert_eq!(
        policy["spec"]["activate"],
        json!([
            "vpcs.network.vultr.m.upbound.io",
            "kubernetes.vke.vultr.m.upbound.io",
            "kubernetesnodepools.vke.vultr.m.upbound.io"
        ])
    );
    assert!(!out.resources.keys().any(|k| k.starts_with("release-")));
}

#[test]
fn the_cluster_is_built_in_the_observed_vpc_with_its_system_pool_inline() {
    let out = run(&vultr("Standard"));
    let cluster = object(&out, KEY_CLUSTER);
    assert_eq!(cluster["apiVersion"], "vke.vultr.m.upbound.io/v1beta1");
    assert_eq!(cluster["metadata"]["namespace"], "modelplane-system");
    assert_eq!(
        cluster["spec"]["providerConfigRef"],
        json!({"kind": "ClusterProviderConfig", "name": "default"})
    );
    assert_eq!(
        cluster["spec"]["writeConnectionSecretToRef"],
        json!({"name": "ewr-kubeconfig"})
    );
    let params = &cluster["spec"]["forProvider"];
    assert_eq!(params["vpcId"], "vpc-of-ewr");
    assert_eq!(
        (&params["label"], &params["region"], &params["version"]),
        (&json!("ewr"), &json!("ewr"), &json!("v1.36.1+3"))
    );
    assert_eq!(params["haControlplanes"], true);
    let system = &params["nodePools"];
    assert_eq!(system["label"], "system");
    assert_eq!(system["plan"], "vc2-6c-16gb");
    assert_eq!(
        (&system["nodeQuantity"], &system["minNodes"], &system["maxNodes"]),
        (&json!(2), &json!(2), &json!(3))
    );
    assert_eq!(
        system["labels"],
        json!([{"key": "modelplane.ai/pool", "value": "system"}])
    );
    assert!(
        system.get("taints").is_none(),
        "the system pool takes no GPU taint"
    );
    let vpc = object(&out, KEY_VPC);
    assert_eq!(vpc["kind"], "VPC");
    assert_eq!(vpc["spec"]["forProvider"]["region"], "ewr");
}

#[test]
fn a_gpu_pool_gets_its_class_plan_the_pool_range_labels_and_taints() {
    let out = run(&vultr("Standard"));
    let pool = object(&out, &node_pool_key("gpu"));
    assert_eq!(pool["metadata"]["name"], "ewr-gpu");
    let params = &pool["spec"]["forProvider"];
    assert_eq!(params["clusterId"], "vke-of-ewr");
    assert_eq!(params["plan"], "vcg-l40s-16c-180g-48vram");
    assert_eq!(params["label"], "gpu");
    assert_eq!(
        (
            &params["nodeQuantity"],
            &params["autoScaler"],
            &params["minNodes"],
            &params["maxNodes"]
        ),
        (&json!(2), &json!(true), &json!(1), &json!(4))
    );
    assert_eq!(
        params["labels"],
        json!([{"key": "modelplane.ai/gpu", "value": "nvidia-l40s"},
               {"key": "modelplane.ai/pool", "value": "gpu"}])
    );
    assert_eq!(
        params["taints"],
        json!([{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
               {"key": "team", "value": "ml", "effect": "NoExecute"}])
    );
}

#[test]
fn a_pool_without_a_range_stays_at_its_node_count() {
    let mut xr = vultr("Standard");
    xr["spec"]["nodePools"][0] = json!({"name": "gpu", "className": "vultr-l40s-1x", "nodeCount": 3});
    let params = object(&run(&xr), &node_pool_key("gpu"))["spec"]["forProvider"].clone();
    assert_eq!(params["autoScaler"], false);
    assert_eq!(params["nodeQuantity"], 3);
    assert!(
        params.get("minNodes").is_none() && params.get("maxNodes").is_none(),
        "{params:#}"
    );
}

#[test]
fn what_exists_stays_composed_with_its_own_inputs_when_what_it_was_built_from_is_not_observed() {
    let xr = vultr("Dynamo");
    let observed = all_ready(&run(&xr));
    let mut down = only(&observed, &[KEY_VPC]);
    fixtures::not_ready(&mut down, KEY_CLUSTER);
    let out = compose_observed(&xr, &down);
    let cluster = object(&out, KEY_CLUSTER);
    assert_eq!(
        cluster["spec"]["forProvider"]["vpcId"], "vpc-of-ewr",
        "the cluster keeps the VPC it was made in"
    );
    let pool = object(&out, &node_pool_key("gpu"));
    assert_eq!(
        pool["spec"]["forProvider"]["clusterId"], "vke-of-ewr",
        "the pool keeps the cluster it is attached to"
    );
    assert_eq!(vultr_keys(&out), vultr_keys(&run(&xr)), "nothing is dropped");
    assert_eq!(out.ready, Some(false));
}

#[test]
fn caches_are_offered_only_once_the_storage_class_is_ready() {
    let xr = vultr("Standard");
    let observed = all_ready(&run(&xr));
    let done = compose_observed(&xr, &observed);
    assert_eq!(done.ready, Some(true));
    assert_eq!(done.status["cacheStorageClass"], "modelplane-rwx-fs");
    assert_eq!(done.status["pools"][0]["name"], "gpu");

    let mut class_down = observed.clone();
    fixtures::not_ready(&mut class_down, storage::KEY_STORAGE_CLASS);
    let waiting = compose_observed(&xr, &class_down);
    assert!(
        waiting.status.get("cacheStorageClass").is_none(),
        "{:?}",
        waiting.status
    );

    let mut pool_down = observed;
    fixtures::not_ready(&mut pool_down, &node_pool_key("gpu"));
    assert_eq!(compose_observed(&xr, &pool_down).status["pools"], json!([]));
}

#[test]
fn the_storage_class_serves_the_in_cluster_nfs_server_through_csi_driver_nfs() {
    let out = run(&vultr("Standard"));
    let class = object(&out, storage::KEY_STORAGE_CLASS);
    let manifest = &class["spec"]["forProvider"]["manifest"];
    assert_eq!(manifest["metadata"]["name"], "modelplane-rwx-fs");
    assert_eq!(manifest["provisioner"], "nfs.csi.k8s.io");
    assert_eq!(
        manifest["parameters"]["server"],
        "nfs-server.modelplane-nfs.svc.cluster.local"
    );
    let server = object(&out, storage::KEY_SERVER);
    let pod = &server["spec"]["forProvider"]["manifest"]["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"], json!({"modelplane.ai/pool": "system"}));
    let volume = object(&out, storage::KEY_VOLUME);
    assert_eq!(
        volume["spec"]["forProvider"]["manifest"]["spec"]["storageClassName"],
        "vultr-block-storage"
    );
    let driver = object(&out, storage::KEY_DRIVER);
    assert_eq!(
        driver["spec"]["forProvider"]["values"]["node"]["tolerations"],
        json!([{"operator": "Exists"}]),
        "the node plugin must run on tainted GPU nodes, where caches mount"
    );
}

#[test]
fn the_provider_configs_read_the_kubeconfig_secret_with_no_identity() {
    let out = compose_observed(&vultr("Standard"), &[]);
    for key in ["providerconfig-kubernetes", "providerconfig-helm"] {
        assert_eq!(
            object(&out, key)["spec"],
            json!({"credentials": {"source": "Secret", "secretRef": {
                "name": "ewr-kubeconfig", "namespace": "modelplane-system", "key": "kubeconfig"}}}),
            "{key}"
        );
    }
}

#[test]
fn deletion_runs_pools_and_workloads_then_the_cluster_then_the_vpc() {
    let spec: InferenceClusterSpec = serde_json::from_value(vultr("Standard")["spec"].clone()).unwrap();
    let cloud = provision::provisioner(&spec).unwrap();
    let table = [
        ("KubernetesNodePool", "vultr-nodepool-gpu", vec![KEY_CLUSTER]),
        ("Release", "release-cert-manager", vec![KEY_CLUSTER]),
        ("Release", storage::KEY_DRIVER, vec![KEY_CLUSTER]),
        ("Object", storage::KEY_STORAGE_CLASS, vec![KEY_CLUSTER]),
        ("Kubernetes", KEY_CLUSTER, vec![KEY_VPC]),
        ("VPC", KEY_VPC, vec![]),
        ("ClusterProviderConfig", "providerconfig-helm", vec![]),
    ];
    for (kind, key, used) in table {
        assert_eq!(cloud.uses(kind, key), used, "{kind} {key}");
    }
    let out = run(&vultr("Standard"));
    for usage in [
        "usage-vultr-cluster-vultr-vpc",
        "usage-vultr-nodepool-gpu-vultr-cluster",
        "usage-vultr-object-nfs-volume-vultr-cluster",
        "usage-release-cert-manager-vultr-cluster",
    ] {
        assert!(out.resources.contains_key(usage), "{usage}");
    }
    assert_eq!(cloud.pool_key("system").as_deref(), Some(KEY_CLUSTER));
    assert_eq!(cloud.pool_key("gpu").as_deref(), Some("vultr-nodepool-gpu"));
}

#[test]
fn the_dynamo_stack_adds_grove_kai_and_one_model_express_on_vultr() {
    let out = run(&vultr("Dynamo"));
    assert_eq!(out.ready, Some(true));
    for key in [
        "release-grove",
        "release-kai-scheduler",
        "object-modelexpress-server-deployment",
    ] {
        assert!(out.resources.contains_key(key), "{key}");
    }
    assert!(
        !out.resources.contains_key("release-cluster-autoscaler"),
        "VKE scales its own pools"
    );
}

/// `xr` with `edit` applied to its first pool.
fn pool_with(edit: Value) -> Value {
    let mut xr = vultr("Standard");
    for (k, v) in edit.as_object().unwrap() {
        xr["spec"]["nodePools"][0][k] = v.clone();
    }
    xr
}

fn class_with(plan: &str, accelerator: &str) -> Value {
    let mut class = l40s();
    class["spec"]["provisioning"]["vultr"] =
        json!({"plan": plan, "accelerator": {"type": accelerator, "count": 1}});
    class
}

#[test]
fn bad_input_is_refused_by_field_name_before_anything_is_composed() {
    let mut version = vultr("Standard");
    version["spec"]["cluster"]["vultr"]["kubernetesVersion"] = json!("1.36");
    let cases = [
        (
            version,
            l40s(),
            "spec.cluster.vultr.kubernetesVersion",
            "build suffix",
        ),
        (
            pool_with(json!({"zones": ["ewr-1"]})),
            l40s(),
            "spec.nodePools[0].zones",
            "no zones",
        ),
        (
            pool_with(json!({"nodeCount": 0, "minNodeCount": 0})),
            l40s(),
            "spec.nodePools[0].nodeCount",
            "at least one node",
        ),
        (
            pool_with(json!({"nodeCount": 1, "minNodeCount": 0})),
            l40s(),
            "spec.nodePools[0].minNodeCount",
            "at least one node",
        ),
        (
            vultr("Standard"),
            class_with("vc2-6c-16gb", "nvidia-l40s"),
            "spec.nodePools[0].className",
            "not a GPU plan",
        ),
        (
            vultr("Standard"),
            class_with("vcg-a100-3c-30g-20vram", "nvidia-l40s"),
            "spec.nodePools[0].className",
            "carries a100 GPUs",
        ),
    ];
    for (xr, class, path, says) in cases {
        let err = error(&xr, class);
        assert_eq!(err.path, path, "{err}");
        assert!(err.to_string().contains(says), "{path}: {err}");
    }
}

#[test]
fn a_class_of_another_cloud_is_refused_by_name() {
    let eks = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass",
                     "metadata": {"name": "vultr-l40s-1x"},
                     "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com",
                                           "deviceClassName": "gpu.nvidia.com", "count": 1}],
                              "provisioning": {"eks": {"instanceType": "g6e.xlarge"}}}});
    let err = error(&vultr("Standard"), eks);
    assert_eq!(err.path, "spec.nodePools[0].className");
    assert!(err.to_string().contains("provisioning.vultr"), "{err}");
}

#[test]
fn plans_match_their_accelerators_by_model() {
    use crate::api::inference_class::{Accelerator, VultrProvisioning};
    let class = |plan: &str, type_: &str| VultrProvisioning {
        plan: plan.into(),
        accelerator: Accelerator {
            type_: type_.into(),
            count: 1,
        },
    };
    assert!(super::check::plan_fits(&class("vcg-l40s-16c-180g-48vram", "nvidia-l40s")).is_ok());
    assert!(super::check::plan_fits(&class("vcg-h100-1c-10g-80vram", "nvidia-h100-sxm")).is_ok());
    assert!(super::check::plan_fits(&class("vcg-a16-2c-8g-2vram", "nvidia-l40s")).is_err());
    assert!(super::check::plan_fits(&class("vbm-8c-132gb", "nvidia-l40s")).is_err());
    assert!(super::check::vke_version("v1.36.1+3"));
    for bad in ["1.36.1+3", "v1.36.1", "v1.36+3", "v1.36.1+", "v1.x.1+3"] {
        assert!(!super::check::vke_version(bad), "{bad}");
    }
}
