use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::*;
use crate::{
    compose::{fixtures, shared::CONTROL_NAMESPACE},
    proto::v1::Resources,
};

fn h200() -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass", "metadata": {"name": "eks-h200-8x"},
           "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com",
                                 "count": 8, "capacity": {"memory": {"value": "141Gi"}}}],
                    "provisioning": {"eks": {"instanceType": "p5en.48xlarge", "amiType": "AL2023_x86_64_NVIDIA",
                                             "diskSizeGb": 1024, "efaInterfaces": 16}}}})
}

fn eks(stack: &str) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "us-east"},
           "spec": {"stack": stack,
                    "cluster": {"source": "EKS", "eks": {"region": "us-east-1",
                        "clusterRoleArn": "arn:aws:iam::123456789012:role/c",
                        "nodeRoleArn": "arn:aws:iam::123456789012:role/n"}},
                    "nodePools": [{"name": "gpu", "className": "eks-h200-8x", "nodeCount": 2, "maxNodeCount": 4,
                                   "zones": ["us-east-1a"],
                                   "capacityBlock": {"capacityReservationId": "cr-0abc"},
                                   "fabric": {"type": "EFA"}}]}})
}

fn existing(stack: &str) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "onprem"},
           "spec": {"stack": stack,
                    "cluster": {"source": "Existing", "existing": {
                        "secretRef": {"name": "onprem-kubeconfig", "namespace": "platform"},
                        "cache": {"storageClassName": "cephfs"}}},
                    "nodePools": [{"name": "gpu", "className": "eks-h200-8x", "nodeCount": 4}]}})
}

fn raw(value: &Value) -> RawStruct {
    RawStruct::from_value(value).unwrap()
}

/// A request as Crossplane sends it once the classes are fetched, with `observed` composed resources.
fn request(xr: &Value, classes: &[Value]) -> RunFunctionRequest {
    fixtures::cluster_request(xr, classes, &[]).build()
}

/// The first call, with nothing composed yet.
fn first(xr: &Value) -> Output {
    compose(&request(xr, &[h200()]), &raw(xr)).unwrap()
}

/// What AWS would report for a composed resource once it is Ready: IDs and ARNs later stages read.
fn observed_ready(object: &Value) -> Value {
    let mut observed = ready(object);
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let at_provider = match object["kind"].as_str().unwrap_or_default() {
        "Network" => {
            let zones = object["spec"]["forProvider"]["zones"].as_array().unwrap().clone();
            let subnets: Vec<Value> = zones
                .iter()
                .enumerate()
                .map(|(i, z)| json!({"zone": z, "id": format!("subnet-0{i}"), "cidrBlock": format!("10.0.{i}.0/24")}))
                .collect();
            json!({"vpcId": "vpc-01", "privateSubnets": subnets, "securityGroupId": "sg-0nodes"})
        }
        "Role" => json!({"arn": format!("arn:aws:iam::123456789012:role/{name}")}),
        "FileSystem" => json!({"fileSystemId": "fs-0123abcd"}),
        _ => json!({}),
    };
    observed["status"]["atProvider"] = at_provider;
    observed
}

/// Every composed resource observed Ready, as `observed_ready` reports it.
fn all_ready(out: &Output) -> Vec<(String, Value)> {
    fixtures::observe_all(out, observed_ready)
}

fn compose_observed(xr: &Value, observed: &[(String, Value)]) -> Output {
    compose(
        &fixtures::cluster_request(xr, &[h200()], observed).build(),
        &raw(xr),
    )
    .unwrap()
}

/// The composition once every stage before the last is observed Ready: the whole cluster.
fn run(xr: &Value) -> Output {
    let mut stages = fixtures::stages(first(xr), |out| compose_observed(xr, &all_ready(out)));
    stages.pop().unwrap()
}

/// The error a user sees: the composite checked against its XRD first, as `dispatch` does.
fn error(xr: &Value) -> ComposeError {
    fixtures::run(compose, &request(xr, &[h200()])).unwrap_err()
}

/// Every manifest wrapped in a provider-kubernetes Object.
fn manifests(out: &Output) -> Vec<&Value> {
    out.resources
        .values()
        .filter_map(|c| c.object.get("spec")?.get("forProvider")?.get("manifest"))
        .collect()
}

fn charts(out: &Output) -> BTreeSet<String> {
    out.resources
        .values()
        .filter(|c| c.object["kind"] == "Release")
        .map(|c| {
            c.object["spec"]["forProvider"]["chart"]["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// Fails unless some warning of `out` contains `text`.
fn assert_warned(out: &Output, text: &str) {
    assert!(
        out.warnings.iter().any(|w| w.contains(text)),
        "no warning contains {text:?}: {:?}",
        out.warnings
    );
}

fn component_names(out: &Output) -> BTreeSet<String> {
    out.status["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect()
}

fn ready(object: &Value) -> Value {
    let mut observed = object.clone();
    observed["status"] = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]});
    observed
}

/// A stock cluster: only the region, as upstream's examples write it.
fn stock() -> Value {
    let mut xr = eks("Standard");
    xr["spec"]["cluster"]["eks"] = json!({"region": "us-east-1"});
    xr
}

#[test]
fn first_call_asks_for_each_distinct_class_once_and_composes_nothing() {
    let mut xr = eks("Dynamo");
    let second = json!({"name": "gpu2", "className": "eks-h200-8x", "nodeCount": 1});
    xr["spec"]["nodePools"].as_array_mut().unwrap().push(second);
    let out = compose(&request(&xr, &[]), &raw(&xr)).unwrap();
    assert_eq!(
        out.requirements.keys().collect::<Vec<_>>(),
        ["class-eks-h200-8x", "gateways", "placement-ledger"]
    );
    let ledger = &out.requirements["placement-ledger"];
    assert_eq!(
        (ledger.kind.as_str(), ledger.namespace.as_deref()),
        ("Object", None),
        "the ledger is listed in every namespace"
    );
    let name = xr["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        ledger.r#match,
        Some(Match::MatchLabels(crate::proto::v1::MatchLabels {
            labels: [("modelplane.ai/cluster".to_owned(), name.to_owned())].into()
        }))
    );
    let selector = &out.requirements["class-eks-h200-8x"];
    assert_eq!(
        (selector.kind.as_str(), selector.api_version.as_str()),
        ("InferenceClass", "modelplane.ai/v1alpha1")
    );
    assert_eq!(selector.r#match, Some(Match::MatchName("eks-h200-8x".into())));
    assert!(out.resources.is_empty());
    assert_eq!(out.conditions[0].reason, "WaitingForClasses");
}

#[test]
fn requirements_are_the_same_before_and_after_the_classes_arrive() {
    let xr = eks("Standard");
    let before = compose(&request(&xr, &[]), &raw(&xr)).unwrap();
    assert_eq!(before.requirements, run(&xr).requirements);
}

#[test]
fn composing_twice_gives_the_same_output() {
    for xr in [eks("Dynamo"), eks("Standard"), existing("Dynamo")] {
        assert_eq!(run(&xr), run(&xr));
    }
}

#[test]
fn a_missing_class_is_fatal_and_names_the_pool_field() {
    let xr = eks("Standard");
    let mut req = request(&xr, &[]);
    req.required_resources
        .insert(class_requirement("eks-h200-8x"), Resources::default());
    let err = compose(&req, &raw(&xr)).unwrap_err();
    assert_eq!(err.path, "spec.nodePools[0].className");
    assert!(err.reason.contains("\"eks-h200-8x\" not found"), "{}", err.reason);
}

#[test]
fn dynamo_composes_grove_kai_and_exactly_one_model_express_server_and_no_lws() {
    let out = run(&eks("Dynamo"));
    let charts = charts(&out);
    assert!(
        charts.contains("grove-charts") && charts.contains("kai-scheduler"),
        "{charts:?}"
    );
    assert!(!charts.contains("lws"));
    let servers: Vec<_> = manifests(&out)
        .into_iter()
        .filter(|m| m["kind"] == "Deployment" && m["metadata"]["name"] == "modelexpress-server")
        .collect();
    assert_eq!(servers.len(), 1);
    let service = manifests(&out)
        .into_iter()
        .find(|m| m["kind"] == "Service")
        .unwrap();
    assert_eq!(service["spec"]["ports"][0]["port"], 8001);
    let queues: Vec<_> = manifests(&out)
        .into_iter()
        .filter(|m| m["kind"] == "Queue")
        .collect();
    assert_eq!(queues.len(), 2);
    assert_eq!(out.status["kaiQueue"], "modelplane");
    assert_eq!(
        out.status["modelExpressAddress"],
        "modelexpress-server.modelexpress-system.svc.cluster.local:8001"
    );
}

/// The values of the kube-prometheus-stack Release.
fn prometheus_values(out: &Output) -> Value {
    out.resources["release-kube-prometheus-stack"].object["spec"]["forProvider"]["values"].clone()
}

#[test]
fn a_cluster_naming_a_fleet_receiver_writes_only_the_modelplane_series_there() {
    let plain = run(&eks("Standard"));
    assert!(
        prometheus_values(&plain)["prometheus"]["prometheusSpec"]
            .get("remoteWrite")
            .is_none()
    );
    let mut xr = eks("Standard");
    xr["spec"]["metrics"] = json!({"remoteWrite": {"url": "https://metrics.fleet.example.com/api/v1/write"}});
    let values = prometheus_values(&run(&xr));
    let spec = &values["prometheus"]["prometheusSpec"];
    assert_eq!(
        spec["remoteWrite"],
        json!([{"url": "https://metrics.fleet.example.com/api/v1/write",
                "writeRelabelConfigs": [{"sourceLabels": ["__name__"], "regex": "modelplane_.*", "action": "keep"}]}])
    );
    assert_eq!(
        spec["ruleSelectorNilUsesHelmValues"], false,
        "the rules that make the series load"
    );
    let mut bad = eks("Standard");
    bad["spec"]["metrics"] = json!({"remoteWrite": {"url": "metrics.fleet.example.com"}});
    assert_eq!(error(&bad).path, "spec.metrics.remoteWrite.url");
}

#[test]
fn standard_composes_lws_and_nothing_of_dynamo() {
    let out = run(&eks("Standard"));
    let charts = charts(&out);
    assert!(charts.contains("lws"));
    assert!(!charts.contains("grove-charts") && !charts.contains("kai-scheduler"));
    let common = [
        "StorageClass",
        "CustomResourceDefinition",
        "Namespace",
        "GatewayClass",
        "Gateway",
        // The cluster gateway's certificates (cert-manager, trust-manager) and its published CA.
        "ClusterIssuer",
        "Certificate",
        "Bundle",
        "ConfigMap",
        // The cluster gateway's client validation, refusing every caller until a fleet CA is trusted.
        "ClientTrafficPolicy",
        // The engines' recording rules.
        "PrometheusRule",
    ];
    // Every cluster runs the pod reporter, whatever its stack.
    let stack_objects = out
        .resources
        .iter()
        .filter(|(key, _)| !key.starts_with("pod-reporter-"))
        .filter_map(|(_, c)| c.object.get("spec")?.get("forProvider")?.get("manifest"));
    assert!(
        stack_objects
            .clone()
            .all(|m| common.contains(&m["kind"].as_str().unwrap_or_default())),
        "Standard needs no plain objects besides the cache StorageClass and the routing every stack gets"
    );
    assert!(out.status.get("kaiQueue").is_none() && out.status.get("modelExpressAddress").is_none());
}

#[test]
fn both_stacks_share_every_common_component_and_differ_only_in_their_stack_rows() {
    for (standard, dynamo) in [
        (eks("Standard"), eks("Dynamo")),
        (existing("Standard"), existing("Dynamo")),
    ] {
        let standard = component_names(&run(&standard));
        let dynamo = component_names(&run(&dynamo));
        let only_standard: BTreeSet<_> = standard.difference(&dynamo).cloned().collect();
        let only_dynamo: BTreeSet<_> = dynamo.difference(&standard).cloned().collect();
        assert_eq!(only_standard, BTreeSet::from(["lws".to_owned()]));
        let dynamo_rows = ["grove", "kai-queues", "kai-scheduler", "modelexpress-server"];
        assert_eq!(only_dynamo, dynamo_rows.iter().map(|s| (*s).to_owned()).collect());
    }
}

#[test]
fn existing_clusters_compose_no_eks_objects_and_no_activation_policy() {
    let out = run(&existing("Dynamo"));
    for composed in out.resources.values() {
        let api_version = composed.object["apiVersion"].as_str().unwrap();
        assert!(!api_version.starts_with("eks.m.modelplane.ai"), "{api_version}");
        assert_ne!(composed.object["kind"], "ManagedResourceActivationPolicy");
    }
    let config = &out.resources["providerconfig-kubernetes"].object;
    assert_eq!(
        config["spec"]["credentials"]["secretRef"],
        json!({"name": "onprem-kubeconfig", "namespace": "platform", "key": "kubeconfig"})
    );
    assert!(!charts(&out).contains("cluster-autoscaler"));
    assert_eq!(out.status["cacheStorageClass"], "cephfs");
}

#[test]
fn eks_clusters_compose_a_per_cluster_activation_policy_for_provider_eks() {
    let out = run(&eks("Standard"));
    let policy = &out.resources["activation-policy"].object;
    assert_eq!(policy["metadata"]["name"], "us-east-provider-eks");
    assert_eq!(
        policy["spec"]["activate"],
        json!([
            "clusters.eks.m.modelplane.ai",
            "nodepools.eks.m.modelplane.ai",
            "networks.eks.m.modelplane.ai",
            "roles.eks.m.modelplane.ai",
            "addons.eks.m.modelplane.ai",
            "podidentityassociations.eks.m.modelplane.ai",
            "filesystems.eks.m.modelplane.ai"
        ])
    );
    assert!(
        policy["metadata"].get("namespace").is_none(),
        "the policy is cluster-scoped"
    );
    let config = &out.resources["providerconfig-helm"].object;
    assert_eq!(
        config["spec"]["credentials"]["secretRef"],
        json!({"name": "us-east-kubeconfig", "namespace": CONTROL_NAMESPACE, "key": "kubeconfig"})
    );
    let cluster = &out.resources["eks-cluster"].object;
    assert_eq!(
        cluster["spec"]["writeConnectionSecretToRef"]["name"],
        "us-east-kubeconfig"
    );
}

#[test]
fn a_gpu_pool_takes_its_hardware_from_the_class_and_its_placement_from_the_pool() {
    let out = run(&eks("Dynamo"));
    let pool = &out.resources["eks-nodepool-gpu"].object;
    assert_eq!(
        pool["metadata"],
        json!({"name": "us-east-gpu", "namespace": CONTROL_NAMESPACE})
    );
    let p = &pool["spec"]["forProvider"];
    assert_eq!(p["instanceTypes"], json!(["p5en.48xlarge"]));
    assert_eq!(
        (&p["amiType"], &p["diskSize"], &p["efaInterfaces"]),
        (&json!("AL2023_x86_64_NVIDIA"), &json!(1024), &json!(16))
    );
    assert_eq!(p["labels"], json!({"modelplane.ai/pool": "gpu"}));
    assert_eq!(
        p["taints"],
        json!([{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}])
    );
    assert_eq!(
        p["scaling"],
        json!({"minSize": 2, "maxSize": 4, "desiredSize": 2})
    );
    assert_eq!(
        (&p["capacityType"], &p["capacityReservationId"]),
        (&json!("CAPACITY_BLOCK"), &json!("cr-0abc"))
    );
    assert_eq!(p["zones"], json!(["us-east-1a"]));
    assert_eq!(p["clusterRef"], json!({"name": "us-east"}));
    let system = &out.resources["eks-nodepool-system"].object["spec"]["forProvider"];
    assert_eq!(system["labels"], json!({"modelplane.ai/pool": "system"}));
    assert!(
        system.get("taints").is_none(),
        "controllers must be able to run on the system pool"
    );
    assert!(
        charts(&out).contains("aws-dranet"),
        "an EFA pool brings the EFA DRA driver"
    );
}

#[test]
fn bad_pools_are_fatal_and_name_the_field() {
    let mut duplicate = eks("Standard");
    let copy = duplicate["spec"]["nodePools"][0].clone();
    duplicate["spec"]["nodePools"].as_array_mut().unwrap().push(copy);
    assert_eq!(error(&duplicate).path, "spec.nodePools");

    let mut efa = existing("Standard");
    efa["spec"]["nodePools"][0]["fabric"] = json!({"type": "EFA"});
    assert_eq!(error(&efa).path, "spec.nodePools");

    let mut unzoned = eks("Standard");
    unzoned["spec"]["nodePools"][0]
        .as_object_mut()
        .unwrap()
        .remove("zones");
    assert_eq!(error(&unzoned).path, "spec.nodePools[0].zones");

    let mut unknown = eks("Standard");
    unknown["spec"]["stack"] = json!("Triton");
    assert_eq!(error(&unknown).path, "spec.stack");

    let mut no_eks = eks("Standard");
    no_eks["spec"]["cluster"].as_object_mut().unwrap().remove("eks");
    assert_eq!(error(&no_eks).path, "spec.cluster.eks");

    let mut elsewhere = eks("Standard");
    elsewhere["spec"]["nodePools"][0]["zones"] = json!(["us-west-2a"]);
    let err = error(&elsewhere);
    assert_eq!(err.path, "spec.nodePools[0].zones[0]");
    assert!(err.reason.contains("us-east-1"), "{err}");

    for (cidr, why) in [
        ("10.0.0.0", "CIDR"),
        ("10.0.0.0/8", "/16"),
        ("10.0.0.1/16", "host bits"),
        ("ten/16", "CIDR"),
    ] {
        let mut bad = eks("Standard");
        bad["spec"]["cluster"]["eks"]["networking"] = json!({"vpcCidr": cidr});
        let err = error(&bad);
        assert_eq!(err.path, "spec.cluster.eks.networking.vpcCidr", "{cidr}");
        assert!(err.reason.contains(why), "{cidr}: {err}");
    }

    let mut closed = eks("Standard");
    closed["spec"]["cluster"]["eks"]["networking"] = json!({"endpointPublicAccess": false});
    assert_eq!(error(&closed).path, "spec.cluster.eks.networking");
}

#[test]
fn a_cluster_with_only_a_region_keeps_its_api_endpoint_public() {
    let mut xr = eks("Standard");
    xr["spec"]["cluster"]["eks"] = json!({"region": "us-east-1"});
    let out = run(&xr);
    let params = &out.resources["eks-cluster"].object["spec"]["forProvider"];
    assert_eq!(params["endpointPublicAccess"], true);
    assert_eq!(params["endpointPrivateAccess"], false);
}

#[test]
fn provided_components_install_nothing_on_an_existing_cluster() {
    let mut xr = existing("Standard");
    xr["spec"]["cluster"]["existing"]["components"] = json!("Provided");
    xr["spec"]["metrics"] = json!({"remoteWrite": {"url": "https://m.example.com/api/v1/write",
                                                   "basicAuth": {"secretRef": {"name": "fleet-writer"}}}});
    let out = run(&xr);
    assert_warned(&out, "spec.metrics.remoteWrite is not applied");
    let kinds: BTreeSet<&str> = out
        .resources
        .values()
        .map(|c| c.object["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, BTreeSet::from(["ClusterProviderConfig", "Object"]));
    // The only Objects are the pod reporter's and the reachability probe, Modelplane's own, not components.
    let reporter: BTreeSet<&str> = manifests(&out)
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        reporter,
        BTreeSet::from([
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Deployment"
        ])
    );
    assert!(out.resources.iter().all(|(key, c)| c.object["kind"] != "Object"
        || key.starts_with("pod-reporter-")
        || key == "reachability-probe"));
    assert_eq!(out.status["components"], json!([]));
}

#[test]
fn efa_on_an_instance_type_without_efa_is_refused() {
    let mut class = h200();
    class["spec"]["provisioning"]["eks"] = json!({"instanceType": "g6.xlarge"});
    let xr = eks("Standard");
    let err = compose(&request(&xr, &[class]), &raw(&xr)).unwrap_err();
    assert_eq!(err.path, "spec.nodePools[0].fabric.type");
}

#[path = "security_groups_tests.rs"]
mod security_groups;

#[path = "autoscaling_tests.rs"]
mod autoscaling;

#[path = "stages_tests.rs"]
mod stages;

#[test]
fn eks_clusters_export_gpu_figures_attributed_through_dra_and_other_clusters_do_not() {
    let out = run(&eks("Standard"));
    let release = &out.resources["release-dcgm-exporter"].object["spec"]["forProvider"];
    assert_eq!(release["chart"]["version"], "4.8.2");
    let values = &release["values"];
    assert_eq!(
        values["kubernetesDRA"]["enabled"], true,
        "claims name no GPU UUID"
    );
    assert_eq!(
        values["nodeSelector"],
        json!({"feature.node.kubernetes.io/pci-10de.present": "true"})
    );
    let tolerates_gpu_taint = values["tolerations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["key"] == crate::api::inference_cluster::GPU_TAINT_KEY);
    assert!(tolerates_gpu_taint, "{values}");
    assert_eq!(values["serviceMonitor"]["honorLabels"], true, "the holder's pod");
    assert!(component_names(&out).contains("dcgm-exporter"));
    assert!(!charts(&run(&existing("Standard"))).contains("dcgm-exporter"));
}

/// The remote-write credentials' copy as provider-kubernetes reports it once filled, with `--sanitize-secrets`.
fn filled_credentials() -> Value {
    json!({
        "metadata": {"finalizers": ["finalizer.managedresource.crossplane.io"], "generation": 2},
        "spec": {"references": [{"patchesFrom": {"name": "fleet-writer"}}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"},
                                  {"type": "Synced", "status": "True", "observedGeneration": 2}],
                   "atProvider": {"manifest": fixtures::sanitized_owned_secret("modelplane-remote-write-owner")}},
    })
}

#[test]
fn remote_write_credentials_are_copied_by_reference_and_nothing_is_written_before_they_arrive() {
    let mut xr = eks("Standard");
    xr["spec"]["metrics"] = json!({"remoteWrite": {"url": "https://metrics.fleet.example.com/api/v1/write",
                                                   "basicAuth": {"secretRef": {"name": "fleet-writer"}}}});
    let out = run(&xr);
    let copy = &out.resources["object-remote-write-credentials"].object;
    assert_eq!(copy["metadata"]["name"], "us-east-remote-write-credentials");
    let manifest = &copy["spec"]["forProvider"]["manifest"];
    assert_eq!(
        (&manifest["kind"], &manifest["metadata"]["namespace"]),
        (&json!("Secret"), &json!("monitoring"))
    );
    assert!(manifest.get("data").is_none() && copy["spec"].get("references").is_none());
    assert!(
        prometheus_values(&out)["prometheus"]["prometheusSpec"]
            .get("remoteWrite")
            .is_none(),
        "no write before its credentials are on the cluster"
    );
    assert_warned(&out, "modelplane-system/fleet-writer");
    assert!(
        !out.status["pools"].as_array().unwrap().is_empty(),
        "credentials on their way hold no pool back"
    );

    let mut observed = all_ready(&out);
    for (key, seen) in observed.iter_mut() {
        match key.as_str() {
            "object-remote-write-owner" => *seen = fixtures::observed_owner("modelplane-remote-write-owner"),
            "object-remote-write-credentials" => *seen = filled_credentials(),
            _ => {}
        }
    }
    let out = compose_observed(&xr, &observed);
    let copy = &out.resources["object-remote-write-credentials"].object;
    let fields: Vec<&Value> = copy["spec"]["references"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["patchesFrom"]["fieldPath"])
        .collect();
    assert_eq!(fields, [&json!("data.username"), &json!("data.password")]);
    assert_eq!(
        copy["spec"]["references"][0]["patchesFrom"]["namespace"],
        "modelplane-system"
    );
    let write = &prometheus_values(&out)["prometheus"]["prometheusSpec"]["remoteWrite"][0];
    assert_eq!(
        write["basicAuth"],
        json!({"username": {"name": "modelplane-remote-write", "key": "username"},
               "password": {"name": "modelplane-remote-write", "key": "password"}})
    );

    // Credentials dropped: the copy is retired (every policy, no references) so its deletion deletes the key.
    let mut applied = Value::Object(copy.to_map());
    applied["metadata"]["finalizers"] = filled_credentials()["metadata"]["finalizers"].clone();
    applied["status"] = filled_credentials()["status"].clone();
    for (key, seen) in observed.iter_mut() {
        if key == "object-remote-write-credentials" {
            *seen = applied.clone();
        }
    }
    xr["spec"]["metrics"]["remoteWrite"]
        .as_object_mut()
        .unwrap()
        .remove("basicAuth");
    let out = compose_observed(&xr, &observed);
    let retired = &out.resources["object-remote-write-credentials"].object;
    assert!(retired["spec"].get("references").is_none(), "{retired:?}");
    assert_eq!(retired["spec"]["managementPolicies"], json!(["*"]));
    assert!(!out.resources.contains_key("object-remote-write-owner"));
    let write = &prometheus_values(&out)["prometheus"]["prometheusSpec"]["remoteWrite"][0];
    assert!(write.get("basicAuth").is_none());

    let mut bad = eks("Standard");
    bad["spec"]["metrics"] = json!({"remoteWrite": {"url": "https://m.example.com/api/v1/write",
                                                    "basicAuth": {"secretRef": {"name": "../etc"}}}});
    assert_eq!(
        error(&bad).path,
        "spec.metrics.remoteWrite.basicAuth.secretRef.name"
    );
}
