//! One fixture of every kind the package defines, each broken in a way its XRD forbids, sent through the
//! function as Crossplane sends it: the FATAL names the field and carries the XRD's own message, read from the
//! XRD file, so the function refuses exactly what the API server would and says it in the same words.

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{fatal, read_documents, repo_root, xrd};
use modelplane_function::{render::RequestBuilder, run_function};
use serde_json::{Value, json};

fn example(path: &str) -> Value {
    read_documents(&repo_root().join("examples").join(path)).remove(0)
}

/// The `message` of the XRD rule whose `rule` text is `rule`, so a test fails if the two drift apart.
fn rule_message(file: &str, rule: &str) -> String {
    fn find(node: &Value, rule: &str) -> Option<String> {
        match node {
            Value::Object(map) => {
                if map.get("rule").and_then(Value::as_str) == Some(rule) {
                    return map.get("message").and_then(Value::as_str).map(str::to_owned);
                }
                map.values().find_map(|v| find(v, rule))
            }
            Value::Array(items) => items.iter().find_map(|v| find(v, rule)),
            _ => None,
        }
    }
    find(&xrd(file), rule).unwrap_or_else(|| panic!("{file} has no rule {rule:?}"))
}

struct Case {
    kind: &'static str,
    object: Value,
    path: &'static str,
    /// What the FATAL must say after the path: the XRD's rule message, or the schema keyword's finding.
    says: String,
}

fn cases() -> Vec<Case> {
    let mut class = example("classes/eks-h200-8x.yaml");
    class["spec"]["devices"][0]["count"] = json!(0);

    let mut cluster = example("clusters/existing-onprem.yaml");
    cluster["spec"]["cluster"]["eks"] = json!({"region": "us-east-1"});

    let mut gateway = example("services/fleet-gateway.yaml");
    gateway["spec"].as_object_mut().unwrap().remove("hostname");
    gateway["spec"]["tls"] = json!({"certificateRefs": [{"name": "fleet-tls"}]});

    let mut cache = example("caches/qwen3-coder.yaml");
    cache["spec"]["source"] = json!("Ftp");

    let mut deployment = example("deployments/qwen3-coder.yaml");
    let copy = deployment["spec"]["template"]["spec"]["engines"][0].clone();
    deployment["spec"]["template"]["spec"]["engines"]
        .as_array_mut()
        .unwrap()
        .push(copy);

    let mut endpoint = example("services/together-endpoint.yaml");
    endpoint["spec"]["url"] = json!("https://api.together.xyz/v1");

    let mut service = example("services/qwen3-coder.yaml");
    service["spec"]["endpoints"] = json!([]);

    vec![
        Case {
            kind: "InferenceClass",
            object: class,
            path: "spec.devices[0].count",
            says: "value is less than the minimum of 1".into(),
        },
        Case {
            kind: "InferenceCluster",
            object: cluster,
            path: "spec.cluster.eks",
            says: rule_message("inferenceclusters.yaml", "self.source == 'EKS' || !has(self.eks)"),
        },
        Case {
            kind: "InferenceGateway",
            object: gateway,
            path: "spec.tls",
            says: rule_message("inferencegateways.yaml", "!has(self.tls) || has(self.hostname)"),
        },
        Case {
            kind: "ModelCache",
            object: cache,
            path: "spec.source",
            says: "value is not one of \"HuggingFace\"".into(),
        },
        Case {
            kind: "ModelDeployment",
            object: deployment,
            path: "spec.template.spec.engines[1]",
            says: "duplicate".into(),
        },
        Case {
            kind: "ModelEndpoint",
            object: endpoint,
            path: "spec.origin",
            says: rule_message("modelendpoints.yaml", "has(self.origin) != has(self.url)"),
        },
        Case {
            kind: "ModelService",
            object: service,
            path: "spec.endpoints",
            says: "value has less than 1 item".into(),
        },
    ]
}

#[test]
fn every_kind_refuses_what_its_xrd_forbids_naming_the_field_in_the_xrds_words() {
    let cases = cases();
    let mut kinds: Vec<&str> = cases.iter().map(|c| c.kind).collect();
    kinds.sort_unstable();
    let shipped: Vec<String> = common::yaml_files(&repo_root().join("package/configuration/xrds"))
        .iter()
        .map(|file| {
            read_documents(file).remove(0)["spec"]["names"]["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(kinds, shipped, "one case for every kind the package defines");
    for case in cases {
        assert_eq!(case.object["kind"], case.kind);
        let messages = fatal(&run_function(RequestBuilder::new(&case.object).build()));
        let [message] = messages.as_slice() else {
            panic!("{}: expected one FATAL, got {messages:?}", case.kind);
        };
        let wanted = format!("{}: {}", case.path, case.says);
        assert!(
            message.contains(&wanted),
            "{}: {message:?} does not contain {wanted:?}",
            case.kind
        );
        assert!(
            message.contains("the XRD refuses this"),
            "{}: {message}",
            case.kind
        );
    }
}

#[test]
fn a_class_an_inference_cluster_reads_is_held_to_its_xrd_and_the_fatal_names_both_fields() {
    let cluster = example("clusters/eks-h200-us-east.yaml");
    let mut class = example("classes/eks-h200-8x.yaml");
    class["spec"]["devices"][0]["count"] = json!(0);
    let class_name = class["metadata"]["name"].as_str().unwrap().to_owned();
    let req = RequestBuilder::new(&cluster).answered_from(&[class]).build();
    let rsp = run_function(req);
    let messages = fatal(&rsp);
    let [message] = messages.as_slice() else {
        panic!("expected one FATAL, got {messages:?}");
    };
    let wanted = format!(
        "spec.nodePools[0].className: InferenceClass {class_name:?} is invalid: spec.devices[0].count: value is less \
         than the minimum of 1"
    );
    assert!(
        message.contains(&wanted),
        "{message:?} does not contain {wanted:?}"
    );
}

#[test]
fn an_object_of_another_kind_in_place_of_a_class_is_refused_not_waved_through() {
    let cluster = example("clusters/eks-h200-us-east.yaml");
    let mut class = example("classes/eks-h200-8x.yaml");
    class["spec"]["devices"][0]["count"] = json!(0);
    let mut req = RequestBuilder::new(&cluster)
        .answered_from(std::slice::from_ref(&class))
        .build();
    // What a hand-built request (not Crossplane, which selects by kind) could put under the class requirement.
    class["kind"] = json!("Gadget");
    for resources in req.required_resources.values_mut() {
        for item in &mut resources.items {
            if item
                .resource
                .as_ref()
                .and_then(|r| r.to_json().ok())
                .is_some_and(|o| o["kind"] == "InferenceClass")
            {
                item.resource = modelplane_function::wire::RawStruct::from_value(&class);
            }
        }
    }
    let messages = fatal(&run_function(req));
    assert!(
        messages
            .iter()
            .any(|m| m.contains("is a modelplane.ai/v1alpha1 Gadget, not an InferenceClass")),
        "{messages:?}"
    );
}

/// The one FATAL of `object`, which must name `path` and say `says`.
fn assert_refused(object: &Value, path: &str, says: &str) {
    let messages = fatal(&run_function(RequestBuilder::new(object).build()));
    let wanted = format!("{path}: {says}");
    assert!(
        messages.len() == 1 && messages[0].contains(&wanted),
        "{messages:?} does not contain {wanted:?}"
    );
}

#[test]
fn each_cloud_block_is_required_by_its_source_and_refused_under_another() {
    let cluster = example("clusters/eks-h200-us-east.yaml");
    for (source, field, block) in [
        ("GKE", "gke", json!({"region": "us-central1"})),
        ("AKS", "aks", json!({"location": "westeurope"})),
        ("Nebius", "nebius", json!({})),
        ("Vultr", "vultr", json!({"region": "ewr"})),
    ] {
        let mut missing = cluster.clone();
        missing["spec"]["cluster"] = json!({"source": source});
        let rule = format!("self.source != '{source}' || has(self.{field})");
        let path = format!("spec.cluster.{field}");
        assert_refused(&missing, &path, &rule_message("inferenceclusters.yaml", &rule));

        let mut misplaced = cluster.clone();
        misplaced["spec"]["cluster"][field] = block;
        let rule = format!("self.source == '{source}' || !has(self.{field})");
        assert_refused(&misplaced, &path, &rule_message("inferenceclusters.yaml", &rule));
    }
}

#[test]
fn a_class_block_of_another_cloud_than_its_provider_is_refused() {
    let mut class = example("classes/eks-h200-8x.yaml");
    class["spec"]["provisioning"]["gke"] = json!({
        "machineType": "a3-highgpu-8g", "accelerator": {"type": "nvidia-h100-80gb", "count": 8},
    });
    let rule = "!has(self.gke) || (has(self.provider) && self.provider == 'GKE')";
    assert_refused(
        &class,
        "spec.provisioning",
        &rule_message("inferenceclasses.yaml", rule),
    );
}

#[test]
fn an_infiniband_pool_needs_a_nebius_or_aks_cluster() {
    let mut cluster = example("clusters/eks-h200-us-east.yaml");
    cluster["spec"]["nodePools"][0]["fabric"] = json!({"type": "InfiniBand"});
    let rule = "self.cluster.source in ['Nebius', 'AKS'] || !has(self.nodePools) || \
                self.nodePools.all(p, !has(p.fabric) || p.fabric.type != 'InfiniBand')";
    assert_refused(
        &cluster,
        "spec.nodePools",
        &rule_message("inferenceclusters.yaml", rule),
    );
}

/// Upstream's gateway fields refuse what MetalLB, the listener or the backend could not take, naming the field,
/// before anything is composed: a refused edit leaves the gateway serving as it did.
#[test]
fn an_inference_gateway_refuses_a_bad_backend_port_or_address_pool_naming_the_field() {
    let file = "inferencegateways.yaml";
    let gateway = example("services/fleet-gateway.yaml");
    let with = |spec: Value| {
        let mut object = gateway.clone();
        for (field, value) in spec.as_object().unwrap() {
            object["spec"][field] = value.clone();
        }
        object
    };
    let pool_rule = "isCIDR(self.trim()) || (size(self.split('-')) == 2 && isIP(self.split('-')[0].trim()) && \
                     isIP(self.split('-')[1].trim()) && ip(self.split('-')[0].trim()).family() == \
                     ip(self.split('-')[1].trim()).family())";
    let metallb_rule = "!has(self.loadBalancer) || self.loadBalancer != 'MetalLB' || has(self.metallb)";
    for (spec, path, says) in [
        (
            json!({"envoyGateway": {"loadBalancer": "MetalLB", "metallb": {"addressPool": "172.18.255.200"}}}),
            "spec.envoyGateway.metallb.addressPool",
            rule_message(file, pool_rule),
        ),
        (
            json!({"backend": "Traefik", "traefik": {"version": "40.2.0", "loadBalancer": "MetalLB",
                                                      "metallb": {"addressPool": "10.0.0.1-fc00::1"}}}),
            "spec.traefik.metallb.addressPool",
            rule_message(file, pool_rule),
        ),
        (
            json!({"envoyGateway": {"loadBalancer": "MetalLB"}}),
            "spec.envoyGateway.metallb",
            rule_message(file, metallb_rule),
        ),
        (
            json!({"backend": "Traefik"}),
            "spec.traefik",
            rule_message(
                file,
                "!has(self.backend) || self.backend != 'Traefik' || has(self.traefik)",
            ),
        ),
        (
            json!({"traefik": {"version": "40.2.0"}}),
            "spec.traefik",
            rule_message(
                file,
                "!has(self.traefik) || (has(self.backend) && self.backend == 'Traefik')",
            ),
        ),
        (
            json!({"backend": "Nginx"}),
            "spec.backend",
            "value is not one of".into(),
        ),
        (
            json!({"gateway": {"port": 0}}),
            "spec.gateway.port",
            "value is less than the minimum of 1".into(),
        ),
        (
            json!({"gateway": {"port": 65536}}),
            "spec.gateway.port",
            "value is greater than the maximum".into(),
        ),
    ] {
        assert_refused(&with(spec), path, &says);
    }
}

/// An existing cluster's gateway takes its address from MetalLB only as the gateway's own pool says, and only
/// where Modelplane installs the gateway.
#[test]
fn an_existing_clusters_gateway_refuses_a_bad_pool_naming_the_field() {
    let file = "inferenceclusters.yaml";
    let cluster = example("clusters/existing-kind.yaml");
    let with = |gateway: Value, components: Option<&str>| {
        let mut object = cluster.clone();
        object["spec"]["cluster"]["existing"]["gateway"] = gateway;
        if let Some(components) = components {
            object["spec"]["cluster"]["existing"]["components"] = json!(components);
        }
        object
    };
    let at = "spec.cluster.existing.gateway";
    let pool_rule = "isCIDR(self.trim()) || (size(self.split('-')) == 2 && isIP(self.split('-')[0].trim()) && \
                     isIP(self.split('-')[1].trim()) && ip(self.split('-')[0].trim()).family() == \
                     ip(self.split('-')[1].trim()).family())";
    let metallb_rule = "!has(self.loadBalancer) || self.loadBalancer != 'MetalLB' || has(self.metallb)";
    let provided_rule = "!has(self.gateway) || !has(self.components) || self.components != 'Provided'";
    let metallb = json!({"loadBalancer": "MetalLB", "metallb": {"addressPool": "172.18.255.0/28"}});
    for (object, path, says) in [
        (
            with(
                json!({"loadBalancer": "MetalLB", "metallb": {"addressPool": "kind"}}),
                None,
            ),
            format!("{at}.metallb.addressPool"),
            rule_message(file, pool_rule),
        ),
        (
            with(json!({"loadBalancer": "MetalLB"}), None),
            format!("{at}.metallb"),
            rule_message(file, metallb_rule),
        ),
        (
            with(metallb, Some("Provided")),
            at.to_owned(),
            rule_message(file, provided_rule),
        ),
    ] {
        assert_refused(&object, &path, &says);
    }
}

/// A serving gateway edited to a pool MetalLB would refuse (a range whose first address is above its last: the
/// XRD cannot compare addresses, the function does) gets one FATAL naming the field and composes nothing, so
/// Crossplane leaves every object it composed before as it was and the gateway keeps answering.
#[test]
fn a_refused_pool_edit_leaves_a_serving_gateway_as_it_was() {
    let mut gateway = example("services/fleet-gateway-metallb.yaml");
    gateway["spec"]["envoyGateway"]["metallb"]["addressPool"] = json!("172.18.255.250-172.18.255.240");
    let serving = json!({"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
                         "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let req = RequestBuilder::new(&gateway)
        .observed("gateway", &serving)
        .observed("address-pool", &serving)
        .build();
    let rsp = run_function(req);
    let messages = fatal(&rsp);
    let wanted =
        "spec.envoyGateway.metallb.addressPool: \"172.18.255.250-172.18.255.240\" ends before it starts";
    assert!(
        messages.len() == 1 && messages[0].contains(wanted),
        "{messages:?}"
    );
    assert!(rsp.desired.iter().all(|d| d.resources.is_empty()));
}
