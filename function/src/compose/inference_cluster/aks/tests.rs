//! The AKS composer: what is composed at each stage given what is observed, where each stage's inputs come
//! from, what keeps a resource composed, the deletion order, and every refusal by field name.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::{api::inference_class::Provider, compose::inference_cluster::provision::KEY_ACTIVATION_POLICY};

use super::super::compose;
use super::*;
use crate::compose::crossplane::EXTERNAL_NAME;
use crate::{
    compose::{ComposeError, Output, fixtures},
    proto::v1::RunFunctionRequest,
    render::simulate,
    wire::RawStruct,
};

fn h100() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass", "metadata": {"name": "aks-h100-8x"},
           "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                                 "count": 8, "capacity": {"memory": {"value": "81559Mi"}}}],
                    "provisioning": {"provider": "AKS", "aks": {"vmSize": "Standard_ND96isr_H100_v5",
                        "diskSizeGb": 1024, "accelerator": {"type": "nvidia-h100", "count": 8}}}}})
}

fn class_with(vm_size: &str, accelerator: &str) -> Value {
    let mut class = h100();
    class["spec"]["provisioning"]["aks"]["vmSize"] = json!(vm_size);
    class["spec"]["provisioning"]["aks"]["accelerator"]["type"] = json!(accelerator);
    class
}

fn aks(stack: &str) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "west"},
           "spec": {"stack": stack,
                    "cluster": {"source": "AKS", "aks": {"location": "westeurope"}},
                    "nodePools": [{"name": "gpuh100", "className": "aks-h100-8x", "nodeCount": 2,
                                   "minNodeCount": 1, "maxNodeCount": 4, "zones": ["1"],
                                   "fabric": {"type": "InfiniBand"}}],
                    "taints": [{"key": "team", "value": "ml", "effect": "NoExecute"}]}})
}

fn request(xr: &Value, class: &Value) -> RunFunctionRequest {
    fixtures::cluster_request(xr, std::slice::from_ref(class), &[]).build()
}

fn compose_observed(xr: &Value, observed: &[(String, Value)]) -> Output {
    let req = fixtures::cluster_request(xr, &[h100()], observed).build();
    compose(&req, &RawStruct::from_value(xr).unwrap()).unwrap()
}

/// Every composed resource observed Ready, with what provider-upjet-azure reports (the simulation's IDs).
fn all_ready(out: &Output) -> Vec<(String, Value)> {
    fixtures::observe_all(out, simulate::observe)
}

/// Each stage's newly composed provider-upjet-azure keys, until nothing new is composed; and the last output.
fn stages(xr: &Value) -> (Vec<BTreeSet<String>>, Output) {
    let mut outs = fixtures::stages(compose_observed(xr, &[]), |out| {
        compose_observed(xr, &all_ready(out))
    });
    let last = outs.pop().unwrap();
    let mut seen = BTreeSet::new();
    let stages = outs
        .iter()
        .map(|out| {
            let keys: BTreeSet<String> = out
                .resources
                .keys()
                .filter(|k| k.starts_with("aks-") || k.as_str() == KEY_STORAGE_CLASS)
                .filter(|k| !seen.contains(*k))
                .cloned()
                .collect();
            seen.extend(keys.iter().cloned());
            keys
        })
        .collect();
    (stages, last)
}

fn run(xr: &Value) -> (Vec<(String, Value)>, Output) {
    let (_, out) = stages(xr);
    let observed = all_ready(&out);
    let done = compose_observed(xr, &observed);
    (observed, done)
}

fn object<'a>(out: &'a Output, key: &str) -> &'a serde_json::Map<String, Value> {
    &out.resources[key].object
}

fn for_provider(out: &Output, key: &str) -> Value {
    object(out, key)["spec"]["forProvider"].clone()
}

fn error(xr: &Value, class: &Value) -> ComposeError {
    fixtures::run(compose, &request(xr, class)).unwrap_err()
}

#[test]
fn nothing_of_the_provider_is_composed_before_the_activation_policy_is_observed() {
    let out = compose_observed(&aks("Standard"), &[]);
    let policy = &object(&out, KEY_ACTIVATION_POLICY)["spec"]["activate"];
    assert_eq!(policy, &json!(CRDS));
    assert_eq!(
        object(&out, KEY_ACTIVATION_POLICY)["metadata"]["name"],
        "west-provider-upjet-azure"
    );
    let azure: Vec<&String> = out.resources.keys().filter(|k| k.starts_with("aks-")).collect();
    assert!(azure.is_empty(), "{azure:?}");
    assert!(!out.resources.keys().any(|k| k.starts_with("release-")));
    assert_eq!(out.ready, Some(false));
}

#[test]
fn a_stock_cluster_comes_up_group_network_and_identity_subnet_role_cluster_then_pools() {
    let (stages, _) = stages(&aks("Dynamo"));
    let expected: [&[&str]; 7] = [
        &[],
        &[KEY_RESOURCE_GROUP],
        &[KEY_IDENTITY, KEY_NETWORK],
        &[KEY_SUBNET],
        &[KEY_SUBNET_ROLE],
        &[KEY_CLUSTER],
        &["aks-nodepool-gpuh100", KEY_STORAGE_CLASS],
    ];
    let expected: Vec<BTreeSet<String>> = expected
        .iter()
        .map(|s| s.iter().map(|k| (*k).to_owned()).collect())
        .collect();
    assert_eq!(stages[..7], expected[..], "{stages:#?}");
    assert!(stages[7..].iter().all(BTreeSet::is_empty), "{stages:#?}");
}

#[test]
fn every_stage_reads_the_names_and_ids_azure_reported_for_the_stage_before() {
    let xr = aks("Standard");
    let policy = compose_observed(&xr, &[]);
    let mut observed = all_ready(&policy);
    let group = compose_observed(&xr, &observed);
    // Azure knows the group by a name other than ours: the network must be put in Azure's.
    let mut rg = simulate::observe(&Value::Object(object(&group, KEY_RESOURCE_GROUP).clone()));
    rg["metadata"]["annotations"][EXTERNAL_NAME] = json!("rg-in-azure");
    observed.push((KEY_RESOURCE_GROUP.to_owned(), rg));
    let next = compose_observed(&xr, &observed);
    assert_eq!(
        for_provider(&next, KEY_NETWORK)["resourceGroupName"],
        "rg-in-azure"
    );
    assert_eq!(
        for_provider(&next, KEY_IDENTITY)["resourceGroupName"],
        "rg-in-azure"
    );

    let (_, done) = run(&xr);
    let subnet_id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/west/providers/\
                     Microsoft.Network/virtualNetworks/west/subnets/west-nodes";
    let role = for_provider(&done, KEY_SUBNET_ROLE);
    assert_eq!(role["scope"], subnet_id);
    assert_eq!(role["roleDefinitionName"], "Network Contributor");
    let cluster = for_provider(&done, KEY_CLUSTER);
    assert_eq!(cluster["defaultNodePool"]["vnetSubnetId"], subnet_id);
    assert!(
        cluster["identity"]["identityIds"][0]
            .as_str()
            .unwrap()
            .ends_with("/userAssignedIdentities/west-control-plane")
    );
    let pool = for_provider(&done, "aks-nodepool-gpuh100");
    assert!(
        pool["kubernetesClusterId"]
            .as_str()
            .unwrap()
            .ends_with("/managedClusters/west")
    );
    assert_eq!(pool["vnetSubnetId"], subnet_id);
}

#[test]
fn the_cluster_waits_for_its_role_on_the_subnet() {
    let xr = aks("Standard");
    let (observed, _) = run(&xr);
    let without_cluster: Vec<(String, Value)> = observed
        .iter()
        .filter(|(k, _)| !k.starts_with("aks-cluster") && !k.starts_with("aks-nodepool-"))
        .filter(|(k, _)| !k.starts_with("release-") && !k.starts_with("object-") && !k.starts_with("usage-"))
        .map(|(k, v)| {
            let mut v = v.clone();
            if k == KEY_SUBNET_ROLE {
                v["status"]["conditions"][0]["status"] = json!("False");
            }
            (k.clone(), v)
        })
        .collect();
    let out = compose_observed(&xr, &without_cluster);
    assert!(out.resources.contains_key(KEY_SUBNET_ROLE));
    assert!(!out.resources.contains_key(KEY_CLUSTER));
}

#[test]
fn a_resource_that_exists_stays_composed_from_its_own_spec_when_its_source_is_not_observed() {
    let xr = aks("Standard");
    let (observed, done) = run(&xr);
    // Everything but the resource group, network, subnet and identity is still observed; the cluster is not
    // Ready (an upgrade), so its ID is unknown too.
    let gone = [KEY_RESOURCE_GROUP, KEY_NETWORK, KEY_SUBNET, KEY_IDENTITY];
    let partial: Vec<(String, Value)> = observed
        .iter()
        .filter(|(k, _)| !gone.contains(&k.as_str()))
        .map(|(k, v)| {
            let mut v = v.clone();
            if k == KEY_CLUSTER {
                v["status"]["conditions"][0]["status"] = json!("False");
            }
            (k.clone(), v)
        })
        .collect();
    let out = compose_observed(&xr, &partial);
    for key in [
        KEY_CLUSTER,
        KEY_SUBNET_ROLE,
        "aks-nodepool-gpuh100",
        KEY_STORAGE_CLASS,
    ] {
        assert!(out.resources.contains_key(key), "{key} left out");
        assert_eq!(
            for_provider(&out, key),
            for_provider(&done, key),
            "{key} composed differently"
        );
    }
    assert_eq!(out.ready, Some(false));
}

#[test]
fn a_gpu_pool_carries_its_class_its_zones_labels_taints_and_the_autoscaler_range() {
    let (_, done) = run(&aks("Dynamo"));
    let pool = object(&done, "aks-nodepool-gpuh100");
    assert_eq!(pool["metadata"]["annotations"][EXTERNAL_NAME], "gpuh100");
    assert_eq!(pool["metadata"]["name"], "west-gpuh100");
    let spec = &pool["spec"];
    assert_eq!(spec["initProvider"], json!({"nodeCount": 2}));
    assert_eq!(
        spec["managementPolicies"],
        json!(["Observe", "Create", "Update", "Delete"])
    );
    let params = &spec["forProvider"];
    assert_eq!(params["vmSize"], "Standard_ND96isr_H100_v5");
    assert_eq!(params["osDiskSizeGb"], 1024);
    assert_eq!(params["gpuDriver"], "Install");
    assert_eq!(params["mode"], "User");
    assert_eq!(params["zones"], json!(["1"]));
    assert_eq!(
        (
            &params["autoScalingEnabled"],
            &params["minCount"],
            &params["maxCount"]
        ),
        (&json!(true), &json!(1), &json!(4))
    );
    assert!(params.get("nodeCount").is_none(), "the autoscaler owns the count");
    assert_eq!(
        params["nodeLabels"],
        json!({"modelplane.ai/pool": "gpuh100", "modelplane.ai/gpu": "nvidia-h100"})
    );
    assert_eq!(
        params["nodeTaints"],
        json!(["nvidia.com/gpu=true:NoSchedule", "team=ml:NoExecute"])
    );
    let system = &for_provider(&done, KEY_CLUSTER)["defaultNodePool"];
    assert_eq!(system["name"], "system");
    assert_eq!(system["nodeLabels"], json!({"modelplane.ai/pool": "system"}));
    assert_eq!((&system["minCount"], &system["maxCount"]), (&json!(2), &json!(3)));
}

#[test]
fn a_pool_without_a_range_is_fixed_at_its_node_count() {
    let mut xr = aks("Standard");
    xr["spec"]["nodePools"][0] = json!({"name": "gpu", "className": "aks-h100-8x", "nodeCount": 3});
    let (_, done) = run(&xr);
    let params = for_provider(&done, "aks-nodepool-gpu");
    assert_eq!(params["autoScalingEnabled"], false);
    assert_eq!(params["nodeCount"], 3);
    assert!(params.get("zones").is_none());
    assert!(
        object(&done, "aks-nodepool-gpu")["spec"]
            .get("initProvider")
            .is_none()
    );
}

#[test]
fn the_cluster_is_ready_its_pools_offered_and_its_cache_class_reported_only_once_all_is_ready() {
    let xr = aks("Dynamo");
    let (mut observed, done) = run(&xr);
    assert_eq!(done.ready, Some(true));
    assert_eq!(done.status["cacheStorageClass"], AZURE_FILES_STORAGE_CLASS);
    assert_eq!(done.status["pools"][0]["name"], "gpuh100");

    let (_, class) = observed.iter_mut().find(|(k, _)| k == KEY_STORAGE_CLASS).unwrap();
    class["status"]["conditions"][0]["status"] = json!("False");
    let waiting = compose_observed(&xr, &observed);
    assert_eq!(waiting.status.get("cacheStorageClass"), None);

    let (mut observed, _) = run(&xr);
    let (_, pool) = observed
        .iter_mut()
        .find(|(k, _)| k == "aks-nodepool-gpuh100")
        .unwrap();
    pool["status"]["conditions"][0]["status"] = json!("False");
    let pool_down = compose_observed(&xr, &observed);
    assert_eq!(pool_down.status["pools"], json!([]));
}

#[test]
fn the_storage_class_is_azure_files_premium_with_symlinks() {
    let (_, done) = run(&aks("Standard"));
    let manifest = &for_provider(&done, KEY_STORAGE_CLASS)["manifest"];
    assert_eq!(manifest["metadata"]["name"], "modelplane-rwx-fs");
    assert_eq!(manifest["provisioner"], "file.csi.azure.com");
    assert_eq!(manifest["parameters"], json!({"skuName": "Premium_LRS"}));
    let options: Vec<&str> = manifest["mountOptions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(options.contains(&"mfsymlinks"), "{options:?}");
    assert_eq!(
        for_provider(&done, KEY_CLUSTER)["storageProfile"],
        json!({"fileDriverEnabled": true})
    );
}

#[test]
fn provider_kubernetes_and_helm_reach_the_cluster_with_its_kubeconfig_alone() {
    let (_, done) = run(&aks("Standard"));
    let cluster = object(&done, KEY_CLUSTER);
    assert_eq!(
        cluster["spec"]["writeConnectionSecretToRef"],
        json!({"name": "west-kubeconfig"})
    );
    assert_eq!(cluster["spec"]["forProvider"]["localAccountDisabled"], false);
    for key in ["providerconfig-kubernetes", "providerconfig-helm"] {
        assert_eq!(
            object(&done, key)["spec"],
            json!({"credentials": {"source": "Secret", "secretRef": {
                "name": "west-kubeconfig", "namespace": "modelplane-system", "key": "kubeconfig"}}}),
            "{key}"
        );
    }
}

#[test]
fn deletion_runs_in_reverse_through_usages() {
    let cluster = crate::api::inference_cluster::AksCluster::default();
    let aks = Aks { cluster: &cluster };
    let table = [
        ("KubernetesClusterNodePool", vec![KEY_CLUSTER, KEY_SUBNET]),
        ("Release", vec![KEY_CLUSTER]),
        ("Object", vec![KEY_CLUSTER]),
        (
            "KubernetesCluster",
            vec![KEY_SUBNET, KEY_IDENTITY, KEY_SUBNET_ROLE, KEY_RESOURCE_GROUP],
        ),
        ("RoleAssignment", vec![KEY_IDENTITY, KEY_SUBNET]),
        ("Subnet", vec![KEY_NETWORK]),
        ("VirtualNetwork", vec![KEY_RESOURCE_GROUP]),
        ("UserAssignedIdentity", vec![KEY_RESOURCE_GROUP]),
        ("ResourceGroup", vec![]),
    ];
    for (kind, used) in table {
        assert_eq!(aks.uses(kind, "any"), used, "{kind}");
    }

    let (_, done) = run(&aks_xr());
    let usages: BTreeSet<String> = done
        .resources
        .values()
        .filter(|c| c.object["kind"] == "Usage")
        .map(|c| c.object["spec"]["reason"].as_str().unwrap().to_owned())
        .collect();
    for reason in [
        "aks-nodepool-gpuh100 must be deleted before aks-cluster",
        "object-storageclass-azurefile must be deleted before aks-cluster",
        "release-cert-manager must be deleted before aks-cluster",
        "aks-cluster must be deleted before aks-role-subnet",
        "aks-role-subnet must be deleted before aks-identity",
        "aks-subnet must be deleted before aks-network",
        "aks-network must be deleted before aks-resource-group",
    ] {
        assert!(usages.contains(reason), "{reason} missing from {usages:#?}");
    }
}

fn aks_xr() -> Value {
    aks("Standard")
}

#[test]
fn the_pools_and_the_system_pool_are_gated_by_their_own_resources() {
    let cluster = crate::api::inference_cluster::AksCluster::default();
    let aks = Aks { cluster: &cluster };
    assert_eq!(aks.pool_key("system").as_deref(), Some(KEY_CLUSTER));
    assert_eq!(aks.pool_key("gpuh100").as_deref(), Some("aks-nodepool-gpuh100"));
    assert_eq!(aks.cloud(), Cloud::Aks);
    assert_eq!(aks.provider(), Some(Provider::Aks));
}

#[test]
fn each_refusal_names_its_field() {
    let with_pool = |pool: Value| {
        let mut xr = aks("Standard");
        xr["spec"]["nodePools"][0] = pool;
        xr
    };
    let cases = [
        (
            with_pool(json!({"name": "gpu-h100", "className": "aks-h100-8x"})),
            h100(),
            "spec.nodePools[0].name",
        ),
        (
            with_pool(json!({"name": "gpuh100pool99", "className": "aks-h100-8x"})),
            h100(),
            "spec.nodePools[0].name",
        ),
        (
            with_pool(json!({"name": "gpu", "className": "aks-h100-8x", "zones": ["1", "westeurope-2"]})),
            h100(),
            "spec.nodePools[0].zones[1]",
        ),
        (
            with_pool(json!({"name": "gpu", "className": "aks-h100-8x", "fabric": {"type": "InfiniBand"}})),
            class_with("Standard_NC24ads_A100_v4", "nvidia-a100"),
            "spec.nodePools[0].fabric.type",
        ),
        (
            with_pool(json!({"name": "gpu", "className": "aks-h100-8x"})),
            class_with("Standard_NC24ads_A100_v4", "nvidia-h100"),
            "spec.nodePools[0].className",
        ),
        (
            with_pool(json!({"name": "gpu", "className": "aks-h100-8x"})),
            class_with("Standard_D4s_v5", "nvidia-h100"),
            "spec.nodePools[0].className",
        ),
    ];
    for (xr, class, field) in cases {
        let e = error(&xr, &class);
        assert_eq!(e.path, field, "{e}");
    }
    let mut xr = aks("Standard");
    xr["spec"]["cluster"]["aks"]["kubernetesVersion"] = json!("v1.34");
    assert_eq!(error(&xr, &h100()).path, "spec.cluster.aks.kubernetesVersion");
}

#[test]
fn a_class_of_another_cloud_is_refused_by_name() {
    let eks = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass",
                     "metadata": {"name": "aks-h100-8x"},
                     "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com",
                                           "deviceClassName": "gpu.nvidia.com", "count": 8}],
                              "provisioning": {"provider": "EKS", "eks": {"instanceType": "p5.48xlarge"}}}});
    let e = error(&aks("Standard"), &eks);
    assert_eq!(e.path, "spec.nodePools[0].className", "{e}");
}

#[test]
fn a_well_formed_cluster_passes_every_check() {
    // A size that names no GPU model is taken at its class's word; one that names it must match.
    for (size, accelerator) in [
        ("Standard_ND96asr_v4", "nvidia-a100"),
        ("Standard_ND96isr_H200_v5", "nvidia-h200"),
    ] {
        let class = class_with(size, accelerator);
        let out = fixtures::run(compose, &request(&aks("Dynamo"), &class));
        assert!(
            out.is_ok_and(|o| o.resources.contains_key(KEY_ACTIVATION_POLICY)),
            "{size}"
        );
    }
}
