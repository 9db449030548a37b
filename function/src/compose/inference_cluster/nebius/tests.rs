//! The Nebius composer: what each stage composes given what is observed, where every ID comes from, what
//! deletion waits for, which identity reaches the cluster, and every refusal by field name.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::compose::inference_cluster::provision::KEY_ACTIVATION_POLICY;

use super::super::{Output, class_requirement, compose as compose_cluster};
use super::*;
use crate::{compose::fixtures, render::RequestBuilder, wire::RawStruct};

fn h100() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass", "metadata": {"name": "nebius-h100-8x"},
           "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                                 "count": 8, "capacity": {"memory": {"value": "81559Mi"}}}],
                    "provisioning": {"provider": "Nebius", "nebius": {
                        "platform": "gpu-h100-sxm", "preset": "8gpu-128vcpu-1600gb", "diskSizeGb": 1024,
                        "accelerator": {"type": "nvidia-h100", "count": 8}}}}})
}

fn nebius(stack: &str) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "eu-north"},
           "spec": {"stack": stack, "cluster": {"source": "Nebius", "nebius": {}},
                    "taints": [{"key": "team", "value": "ml", "effect": "NoExecute"}],
                    "nodePools": [{"name": "gpu", "className": "nebius-h100-8x", "nodeCount": 2,
                                   "minNodeCount": 1, "maxNodeCount": 4,
                                   "fabric": {"type": "InfiniBand", "infiniband": {"fabric": "fabric-3"}}}]}})
}

/// The ClusterProviderConfig named default, as upstream's getting started writes it.
fn provider_config() -> Value {
    json!({"apiVersion": "nebius.m.upbound.io/v1beta1", "kind": "ClusterProviderConfig",
           "metadata": {"name": "default"},
           "spec": {"identity": {"type": "ServiceAccount"}, "projectID": "project-e00example",
                    "credentials": {"source": "Secret", "secretRef": {
                        "namespace": "crossplane-system", "name": "nebius-credentials", "key": "credentials.json"}}}})
}

fn request(
    xr: &Value,
    class: &Value,
    config: Option<&Value>,
    observed: &[(String, Value)],
) -> RequestBuilder {
    let found: Vec<Value> = config.into_iter().cloned().collect();
    fixtures::cluster_request(xr, std::slice::from_ref(class), observed)
        .required(credentials::REQUIREMENT, &found)
}

fn compose_with(xr: &Value, class: &Value, config: Option<&Value>, observed: &[(String, Value)]) -> Output {
    let req = request(xr, class, config, observed).build();
    fixtures::run(compose_cluster, &req).unwrap()
}

fn refused(xr: &Value, class: &Value, config: Option<&Value>) -> ComposeError {
    let req = request(xr, class, config, &[]).build();
    fixtures::run(compose_cluster, &req).unwrap_err()
}

/// What the provider would report once a composed resource is Ready: an ID named after its kind and name.
fn observed_ready(object: &Value) -> Value {
    let id = format!(
        "{}-{}",
        object["kind"].as_str().unwrap().to_lowercase(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    );
    fixtures::ready_at_provider(object, json!({"id": id}))
}

fn all_ready(out: &Output) -> Vec<(String, Value)> {
    fixtures::observe_all(out, observed_ready)
}

/// Every stage until nothing new is composed.
fn stages(xr: &Value) -> Vec<Output> {
    let config = provider_config();
    let first = compose_with(xr, &h100(), Some(&config), &[]);
    fixtures::stages(first, |last| {
        compose_with(xr, &h100(), Some(&config), &all_ready(last))
    })
}

fn done(xr: &Value) -> Output {
    stages(xr).pop().unwrap()
}

/// The keys of the cloud's own resources (not components, provider configs or Usages).
fn cloud_keys(out: &Output) -> BTreeSet<String> {
    out.resources
        .keys()
        .filter(|k| {
            k.starts_with(KEY_PREFIX)
                || [KEY_ACTIVATION_POLICY, KEY_CSI_DRIVER, KEY_STORAGE_CLASS].contains(&k.as_str())
        })
        .cloned()
        .collect()
}

fn for_provider<'a>(out: &'a Output, key: &str) -> &'a Value {
    &out.resources[key].object["spec"]["forProvider"]
}

#[test]
fn a_stock_cluster_comes_up_network_then_subnet_then_cluster_then_what_runs_on_it() {
    let outs = stages(&nebius("Dynamo"));
    let keys: Vec<BTreeSet<String>> = outs.iter().map(cloud_keys).collect();
    let added: Vec<BTreeSet<String>> = std::iter::once(keys[0].clone())
        .chain(keys.windows(2).map(|w| w[1].difference(&w[0]).cloned().collect()))
        .filter(|s: &BTreeSet<String>| !s.is_empty())
        .collect();
    let expected: [&[&str]; 6] = [
        &["activation-policy"],
        &[
            "nebius-cloud-init",
            "nebius-filesystem",
            "nebius-gpucluster-fabric-3",
            "nebius-network",
        ],
        &["nebius-subnet"],
        &["nebius-cluster"],
        &[
            "nebius-nodegroup-gpu",
            "nebius-nodegroup-system",
            "release-csi-mounted-fs-path",
        ],
        &["object-storageclass-fs"],
    ];
    let expected: Vec<BTreeSet<String>> = expected
        .iter()
        .map(|s| s.iter().map(|k| (*k).to_owned()).collect())
        .collect();
    assert_eq!(added, expected);
    let last = outs.last().unwrap();
    assert_eq!(last.ready, Some(true));
    assert_eq!(last.status["pools"][0]["name"], "gpu");
}

#[test]
fn nothing_of_the_provider_is_composed_before_the_activation_policy_is_observed() {
    let out = compose_with(&nebius("Standard"), &h100(), Some(&provider_config()), &[]);
    assert_eq!(cloud_keys(&out), BTreeSet::from(["activation-policy".to_owned()]));
    let policy = &out.resources[KEY_ACTIVATION_POLICY].object;
    assert_eq!(policy["metadata"]["name"], "eu-north-provider-upjet-nebius");
    assert_eq!(policy["spec"]["activate"], json!(CRDS));
    assert!(!out.resources.keys().any(|k| k.starts_with("release-")));
    assert_eq!(out.ready, Some(false));
}

#[test]
fn every_id_comes_from_the_observed_status_of_the_stage_before() {
    let out = done(&nebius("Standard"));
    assert_eq!(for_provider(&out, KEY_SUBNET)["networkId"], "network-eu-north");
    assert_eq!(
        for_provider(&out, KEY_CLUSTER)["controlPlane"]["subnetId"],
        "subnet-eu-north"
    );
    let gpu = for_provider(&out, &node_group_key("gpu"));
    assert_eq!(gpu["parentId"], "cluster-eu-north");
    let template = &gpu["template"];
    assert_eq!(template["networkInterfaces"][0]["subnetId"], "subnet-eu-north");
    assert_eq!(
        template["filesystems"][0]["existingFilesystem"]["id"],
        "filesystem-eu-north-cache"
    );
    assert_eq!(template["gpuCluster"]["id"], "gpucluster-eu-north-fabric-3");
    assert_eq!(
        out.resources[KEY_CLUSTER].object["spec"]["writeConnectionSecretToRef"]["name"],
        "eu-north-kubeconfig"
    );
}

#[test]
fn a_gpu_pool_gets_its_class_hardware_range_labels_and_taints() {
    let out = done(&nebius("Standard"));
    let gpu = for_provider(&out, &node_group_key("gpu"));
    assert_eq!(gpu["autoscaling"], json!({"minNodeCount": 1, "maxNodeCount": 4}));
    assert!(gpu.get("fixedNodeCount").is_none(), "mk8s takes one or the other");
    let template = &gpu["template"];
    assert_eq!(
        template["resources"],
        json!({"platform": "gpu-h100-sxm", "preset": "8gpu-128vcpu-1600gb"})
    );
    assert_eq!(
        template["bootDisk"],
        json!({"sizeGibibytes": 1024, "type": "NETWORK_SSD"})
    );
    assert_eq!(template["gpuSettings"]["driversPreset"], "cuda13.0");
    assert_eq!(
        template["metadata"]["labels"],
        json!({"modelplane.ai/pool": "gpu", "modelplane.ai/gpu": "nvidia-h100"})
    );
    assert_eq!(
        template["taints"],
        json!([{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"},
               {"key": "team", "value": "ml", "effect": "NO_EXECUTE"}])
    );
    assert_eq!(template["filesystems"][0]["mountTag"], "modelplane-cache");
    assert_eq!(
        template["cloudInitUserDataSecretRef"],
        json!({"name": "eu-north-cloud-init", "key": "userData"})
    );
    let system = for_provider(&out, &node_group_key("system"));
    assert_eq!(
        system["autoscaling"],
        json!({"minNodeCount": 2, "maxNodeCount": 3})
    );
    assert_eq!(system["template"]["resources"]["platform"], "cpu-d3");
    assert!(system["template"].get("taints").is_none());
}

#[test]
fn a_pool_without_a_range_keeps_its_node_count() {
    let mut xr = nebius("Standard");
    xr["spec"]["nodePools"][0] = json!({"name": "gpu", "className": "nebius-h100-8x", "nodeCount": 3});
    let out = done(&xr);
    let gpu = for_provider(&out, &node_group_key("gpu"));
    assert_eq!(gpu["fixedNodeCount"], 3);
    assert!(gpu.get("autoscaling").is_none());
    assert!(gpu["template"].get("gpuCluster").is_none());
    assert!(!out.resources.keys().any(|k| k.starts_with("nebius-gpucluster-")));
}

#[test]
fn a_resource_that_exists_keeps_its_inputs_when_its_source_is_not_observed() {
    let xr = nebius("Standard");
    let full = done(&xr);
    // Only the node group, the cluster and the subnet are observed, none of them Ready.
    let kept: Vec<(String, Value)> = [
        node_group_key("gpu"),
        KEY_CLUSTER.to_owned(),
        KEY_SUBNET.to_owned(),
    ]
    .into_iter()
    .map(|k| (k.clone(), Value::Object(full.resources[&k].object.to_map())))
    .collect();
    let out = compose_with(&xr, &h100(), Some(&provider_config()), &kept);
    for key in [
        node_group_key("gpu"),
        KEY_CLUSTER.to_owned(),
        KEY_SUBNET.to_owned(),
    ] {
        assert_eq!(for_provider(&out, &key), for_provider(&full, &key), "{key}");
    }
    assert!(
        !out.resources.contains_key(&node_group_key("system")),
        "never composed, nothing to keep"
    );
}

#[test]
fn the_cache_storage_class_is_reported_once_its_object_is_ready() {
    let xr = nebius("Standard");
    let outs = stages(&xr);
    let before = &outs[outs.len() - 2];
    assert!(before.resources.contains_key(KEY_STORAGE_CLASS));
    assert_eq!(before.status.get("cacheStorageClass"), None);
    let last = outs.last().unwrap();
    assert_eq!(last.status["cacheStorageClass"], FS_STORAGE_CLASS);
    let manifest = &last.resources[KEY_STORAGE_CLASS].object["spec"]["forProvider"]["manifest"];
    assert_eq!(manifest["provisioner"], "mounted-fs-path.csi.nebius.ai");
    assert_eq!(manifest["metadata"]["name"], "modelplane-rwx-fs");
    let csi = for_provider(last, KEY_CSI_DRIVER);
    assert_eq!(csi["values"]["tolerations"], json!([{"operator": "Exists"}]));
}

#[test]
fn deletion_runs_pools_and_workloads_then_cluster_then_subnet_then_network() {
    let out = done(&nebius("Dynamo"));
    let usages: BTreeSet<(String, String)> = out
        .resources
        .values()
        .filter(|c| c.object["kind"] == "Usage")
        .map(|c| {
            let spec = &c.object["spec"];
            let name = |side: &str| spec[side]["resourceRef"]["name"].as_str().unwrap().to_owned();
            (name("by"), name("of"))
        })
        .collect();
    let pair = |by: &str, of: &str| (by.to_owned(), of.to_owned());
    for expected in [
        pair("eu-north-gpu", "eu-north"),
        pair("eu-north-gpu", "eu-north-cache"),
        pair("eu-north-gpu", "eu-north-cloud-init"),
        pair("eu-north-gpu", "eu-north-fabric-3"),
        pair("eu-north-system", "eu-north-cache"),
        pair("eu-north-csi-mounted-fs-path", "eu-north"),
        pair("eu-north-storageclass-fs", "eu-north"),
        pair("eu-north-grove", "eu-north"),
    ] {
        assert!(usages.contains(&expected), "{expected:?} in {usages:#?}");
    }
    // The cluster's and subnet's Usages name the same MR names as the network's: check them by kind.
    let of_kind = |by: &str, of: &str| {
        out.resources.values().any(|c| {
            c.object["kind"] == "Usage"
                && c.object["spec"]["by"]["kind"] == by
                && c.object["spec"]["of"]["kind"] == of
        })
    };
    assert!(of_kind("Cluster", "Subnet") && of_kind("Subnet", "Network"));
    assert!(!usages.contains(&pair("eu-north-system", "eu-north-fabric-3")));
}

#[test]
fn the_deletion_table_by_kind() {
    let cluster = NebiusCluster::default();
    let nebius = Nebius::new(&cluster, BTreeMap::new());
    assert_eq!(nebius.uses("Subnet", KEY_SUBNET), [KEY_NETWORK]);
    assert_eq!(nebius.uses("Cluster", KEY_CLUSTER), [KEY_SUBNET]);
    assert_eq!(nebius.uses("Release", "release-x"), [KEY_CLUSTER]);
    assert_eq!(nebius.uses("Object", "object-x"), [KEY_CLUSTER]);
    assert_eq!(
        nebius.uses("NodeGroup", &node_group_key("system")),
        [KEY_CLUSTER, KEY_FILESYSTEM, KEY_CLOUD_INIT]
    );
    for kind in ["Network", "Filesystem", "GpuCluster", "Secret"] {
        assert!(nebius.uses(kind, "any").is_empty(), "{kind}");
    }
}

#[test]
fn provider_kubernetes_authenticates_as_the_provider_configs_service_account() {
    let out = done(&nebius("Standard"));
    let config = &out.resources["providerconfig-kubernetes"].object["spec"];
    assert_eq!(
        config["identity"],
        json!({"type": "NebiusServiceAccountCredentials", "source": "Secret",
               "secretRef": {"name": "nebius-credentials", "namespace": "crossplane-system",
                             "key": "credentials.json"}})
    );
    assert_eq!(config["credentials"]["secretRef"]["name"], "eu-north-kubeconfig");
    assert_eq!(
        out.resources["providerconfig-helm"].object["spec"]["identity"],
        config["identity"]
    );
    let selector = &out.requirements[credentials::REQUIREMENT];
    assert_eq!(
        (selector.kind.as_str(), selector.namespace.as_deref()),
        ("ClusterProviderConfig", None)
    );
}

#[test]
fn a_namespaced_provider_config_is_looked_up_where_the_mrs_are() {
    let mut xr = nebius("Standard");
    xr["spec"]["cluster"]["nebius"]["credentials"] = json!({"type": "ProviderConfig", "name": "team"});
    let mut config = provider_config();
    config["kind"] = json!("ProviderConfig");
    config["metadata"] = json!({"name": "team", "namespace": "modelplane-system"});
    config["spec"]["credentials"]["secretRef"] = json!({"name": "team-key", "key": "sa.json"});
    let out = compose_with(&xr, &h100(), Some(&config), &[]);
    let selector = &out.requirements[credentials::REQUIREMENT];
    assert_eq!(selector.namespace.as_deref(), Some("modelplane-system"));
    assert_eq!(
        out.resources["providerconfig-kubernetes"].object["spec"]["identity"]["secretRef"],
        json!({"name": "team-key", "namespace": "modelplane-system", "key": "sa.json"})
    );
    let network = compose_with(&xr, &h100(), Some(&config), &all_ready(&out));
    assert_eq!(
        network.resources[KEY_NETWORK].object["spec"]["providerConfigRef"],
        json!({"kind": "ProviderConfig", "name": "team"})
    );
}

#[test]
fn a_missing_provider_config_is_refused_by_field_even_once_the_cluster_exists() {
    let xr = nebius("Standard");
    let observed = all_ready(&done(&xr));
    let req = request(&xr, &h100(), None, &observed).build();
    let error = fixtures::run(compose_cluster, &req).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("spec.cluster.nebius.credentials: ClusterProviderConfig"),
        "{error}"
    );
    // Asked for but not answered yet: composed, without an identity it cannot know.
    let first = RequestBuilder::new(&xr)
        .required(&class_requirement("nebius-h100-8x"), &[h100()])
        .build();
    let out = fixtures::run(compose_cluster, &first).unwrap();
    assert!(
        out.resources["providerconfig-kubernetes"].object["spec"]
            .get("identity")
            .is_none()
    );
}

#[test]
fn requirements_settle_once_the_provider_config_is_asked_for() {
    let xr = nebius("Standard");
    let req = RequestBuilder::new(&xr)
        .answered_from(&[h100(), provider_config()])
        .build();
    let out = compose_cluster(&req, &RawStruct::from_value(&xr).unwrap()).unwrap();
    let again = compose_cluster(&req, &RawStruct::from_value(&xr).unwrap()).unwrap();
    assert_eq!(out.requirements, again.requirements);
    assert!(out.requirements.contains_key(credentials::REQUIREMENT));
    assert!(out.resources.contains_key(KEY_ACTIVATION_POLICY));
}

/// A refusal names `field` and composes nothing.
fn assert_refused(err: &ComposeError, field: &str, says: &str) {
    assert_eq!(err.path, field, "{err}");
    assert!(err.reason.contains(says), "{err}");
}

#[test]
fn a_pool_with_zones_is_refused() {
    let mut xr = nebius("Standard");
    xr["spec"]["nodePools"][0]["zones"] = json!(["eu-north1-a"]);
    assert_refused(
        &refused(&xr, &h100(), Some(&provider_config())),
        "spec.nodePools[0].zones",
        "one region",
    );
}

#[test]
fn a_kubernetes_version_mk8s_does_not_take_is_refused() {
    let mut xr = nebius("Standard");
    xr["spec"]["cluster"]["nebius"]["kubernetesVersion"] = json!("1.34.2");
    assert_refused(
        &refused(&xr, &h100(), Some(&provider_config())),
        "spec.cluster.nebius.kubernetesVersion",
        "<major>.<minor>",
    );
}

#[test]
fn a_fabric_that_cannot_name_a_gpu_cluster_is_refused() {
    let mut xr = nebius("Standard");
    xr["spec"]["nodePools"][0]["fabric"]["infiniband"]["fabric"] = json!("Fabric_3");
    assert_refused(
        &refused(&xr, &h100(), Some(&provider_config())),
        "spec.nodePools[0].fabric.infiniband.fabric",
        "not a Nebius fabric name",
    );
}

#[test]
fn a_class_whose_preset_or_platform_cannot_carry_its_accelerator_is_refused() {
    let cases = [
        ("/platform", json!("cpu-d3"), "carries no GPU"),
        ("/accelerator/type", json!("nvidia-l40s"), "carries h100 GPUs"),
        ("/accelerator/count", json!(4), "has 8 GPUs"),
        ("/preset", json!("128vcpu-1600gb"), "not a GPU preset"),
    ];
    for (pointer, value, says) in cases {
        let mut class = h100();
        *class
            .pointer_mut(&format!("/spec/provisioning/nebius{pointer}"))
            .unwrap() = value;
        let err = refused(&nebius("Standard"), &class, Some(&provider_config()));
        assert_refused(&err, "spec.nodePools[0].className", says);
    }
}

#[test]
fn an_infiniband_pool_of_a_class_without_infiniband_hosts_is_refused() {
    let mut class = h100();
    class["spec"]["provisioning"]["nebius"]["preset"] = json!("1gpu-16vcpu-200gb");
    class["spec"]["provisioning"]["nebius"]["accelerator"]["count"] = json!(1);
    class["spec"]["devices"][0]["count"] = json!(1);
    let err = refused(&nebius("Standard"), &class, Some(&provider_config()));
    assert_refused(&err, "spec.nodePools[0].fabric.type", "8-GPU presets");
    let mut xr = nebius("Standard");
    xr["spec"]["nodePools"][0]
        .as_object_mut()
        .unwrap()
        .remove("fabric");
    assert!(
        fixtures::run(
            compose_cluster,
            &request(&xr, &class, Some(&provider_config()), &[]).build()
        )
        .is_ok()
    );
}

#[test]
fn a_provider_config_that_cannot_lend_its_identity_is_refused() {
    let mut config = provider_config();
    config["spec"]["credentials"] = json!({"source": "InjectedIdentity"});
    assert_refused(
        &refused(&nebius("Standard"), &h100(), Some(&config)),
        "spec.cluster.nebius.credentials",
        "source: Secret",
    );
    config["spec"]["credentials"] = json!({"source": "Secret"});
    assert_refused(
        &refused(&nebius("Standard"), &h100(), Some(&config)),
        "spec.cluster.nebius.credentials",
        "names no credentials Secret",
    );
}

#[test]
fn a_class_of_another_cloud_is_refused() {
    let mut class = h100();
    class["spec"]["provisioning"] = json!({"provider": "EKS", "eks": {"instanceType": "p5.48xlarge"}});
    let err = refused(&nebius("Standard"), &class, Some(&provider_config()));
    assert_refused(&err, "spec.nodePools[0].className", "no provisioning.nebius");
}

#[test]
fn composing_twice_gives_the_same_output() {
    for xr in [nebius("Dynamo"), nebius("Standard")] {
        assert_eq!(done(&xr), done(&xr));
    }
}
