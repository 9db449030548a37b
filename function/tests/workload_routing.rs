//! Routing on a workload cluster, against the real schemas: every routing object a ModelDeployment puts on a
//! cluster whose gateway has an address (InferencePool, HTTPRoute) is accepted by every vendored release of its
//! CRD (`tests/crds/routing/`: structure, CEL, undeclared fields) on both stacks; only a gang's leader carries
//! the pool's label; an InferenceCluster composes the cluster gateway and the GAIE CRDs (verbatim) and reports
//! the gateway's observed address in its status; and the ModelEndpoint a Ready replica publishes is accepted by
//! its XRD and routed by the example ModelService (composed state handed from one composer to the next).

// Helpers outside #[test] functions are test code too; clippy.toml's test exemption does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;

use common::{problems, reachable_gateway, read_documents, repo_root};
use modelplane_function::{
    compose::{
        inference_cluster::class_requirement,
        model_deployment::{CACHE, CLUSTERS},
    },
    proto::v1::Severity,
    render::RequestBuilder,
    run_function,
};
use serde_json::{Value, json};

const POOL_LABEL: &str = "modelplane.ai/inference-pool";

fn document(path: &str) -> Value {
    read_documents(&repo_root().join(path)).remove(0)
}

/// Every served version's schema of every CRD under `tests/crds/routing/<dirs>` for (apiVersion, kind).
fn schemas_for(api_version: &str, kind: &str) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    for dir in [
        "gaie/v1.0.1",
        "gaie/v1.6.0",
        "gateway-api/v1.4.1",
        "gateway-api/v1.5.1",
    ] {
        for file in common::yaml_files(&repo_root().join("tests/crds/routing").join(dir)) {
            let crd = read_documents(&file).remove(0);
            if crd["spec"]["names"]["kind"] != kind {
                continue;
            }
            for version in crd["spec"]["versions"].as_array().unwrap() {
                let served = format!(
                    "{}/{}",
                    crd["spec"]["group"].as_str().unwrap(),
                    version["name"].as_str().unwrap()
                );
                if served == api_version {
                    found.push((
                        file.display().to_string(),
                        version["schema"]["openAPIV3Schema"].clone(),
                    ));
                }
            }
        }
    }
    found
}

fn assert_valid_everywhere(manifest: &Value, releases: usize) {
    let schemas = schemas_for(
        manifest["apiVersion"].as_str().unwrap(),
        manifest["kind"].as_str().unwrap(),
    );
    assert_eq!(schemas.len(), releases, "{}: vendored releases", manifest["kind"]);
    for (file, schema) in schemas {
        let found = problems(&schema, manifest, None);
        assert!(
            found.is_empty(),
            "{} against {file}: {found:#?}",
            manifest["kind"]
        );
    }
}

fn desired(req: modelplane_function::proto::v1::RunFunctionRequest) -> (BTreeMap<String, Value>, Value) {
    let rsp = run_function(req);
    let fatal: Vec<_> = rsp
        .results
        .iter()
        .filter(|r| r.severity == Severity::Fatal as i32)
        .collect();
    assert!(fatal.is_empty(), "{fatal:?}");
    let desired = rsp.desired.unwrap();
    let status = desired
        .composite
        .and_then(|c| c.resource)
        .map(|r| r.to_json().unwrap()["status"].clone())
        .unwrap_or(Value::Null);
    let objects = desired
        .resources
        .into_iter()
        .map(|(k, r)| (k, r.resource.unwrap().to_json().unwrap()))
        .collect();
    (objects, status)
}

fn manifest(object: &Value) -> &Value {
    &object["spec"]["forProvider"]["manifest"]
}

/// The deployment `path` placed on the `stack` fixture cluster, whose gateway answers at 203.0.113.7.
fn deployment_on(path: &str, stack: &str, cluster: &str) -> BTreeMap<String, Value> {
    let mut cluster_xr = document(&format!("tests/fixtures/clusters/{stack}/{cluster}.yaml"));
    cluster_xr["status"]["gateway"] = reachable_gateway("203.0.113.7");
    let cache = document(&format!("tests/fixtures/clusters/{stack}/qwen3-coder-cache.yaml"));
    let req = RequestBuilder::new(&document(path))
        .required(CLUSTERS, &[cluster_xr])
        .required(CACHE, &[cache])
        .build();
    desired(req).0
}

#[test]
fn every_routing_object_of_a_replica_is_accepted_by_every_vendored_release_on_both_stacks() {
    for (stack, cluster) in [("standard", "eks-h200-us-west"), ("dynamo", "eks-h200-us-east")] {
        for example in [
            "examples/deployments/qwen3-coder.yaml",
            "examples/deployments/qwen3-small.yaml",
        ] {
            let objects = deployment_on(example, stack, cluster);
            let routing: Vec<&Value> = objects
                .iter()
                .filter(|(k, _)| k.starts_with("routing-"))
                .map(|(_, o)| manifest(o))
                .collect();
            let kinds: Vec<&str> = routing.iter().map(|m| m["kind"].as_str().unwrap()).collect();
            assert_eq!(kinds.len(), 8, "{stack} {example}: {kinds:?}");
            for m in &routing {
                match m["kind"].as_str().unwrap() {
                    "InferencePool" | "HTTPRoute" => assert_valid_everywhere(m, 2),
                    _ => assert_eq!(m["metadata"]["namespace"], "ml-team"),
                }
            }
            let pool = routing.iter().find(|m| m["kind"] == "InferencePool").unwrap();
            let selected = pool["spec"]["selector"]["matchLabels"][POOL_LABEL]
                .as_str()
                .unwrap();
            let route = routing.iter().find(|m| m["kind"] == "HTTPRoute").unwrap();
            assert_eq!(
                route["spec"]["rules"][0]["timeouts"]["request"], "0s",
                "no deadline cuts a stream"
            );
            assert_eq!(route["spec"]["parentRefs"][0]["name"], "cluster-gateway");

            // Only the serving pods carry the pool's label: a Deployment's pods, a gang's leader, never a worker.
            let workload = objects
                .values()
                .map(manifest)
                .find(|m| {
                    ["Deployment", "LeaderWorkerSet", "PodCliqueSet"].contains(&m["kind"].as_str().unwrap())
                        && m["metadata"]["name"] != pool["spec"]["endpointPickerRef"]["name"]
                })
                .unwrap();
            let (serving, workers) = match workload["kind"].as_str().unwrap() {
                "Deployment" => (vec![&workload["spec"]["template"]["metadata"]["labels"]], vec![]),
                "LeaderWorkerSet" => {
                    let t = &workload["spec"]["leaderWorkerTemplate"];
                    (
                        vec![&t["leaderTemplate"]["metadata"]["labels"]],
                        vec![&t["workerTemplate"]["metadata"]["labels"]],
                    )
                }
                _ => {
                    let cliques = &workload["spec"]["template"]["cliques"];
                    (vec![&cliques[0]["labels"]], vec![&cliques[1]["labels"]])
                }
            };
            for labels in serving {
                assert_eq!(labels[POOL_LABEL], selected, "{stack} {example}: {labels}");
            }
            for labels in workers {
                assert!(
                    labels.get("modelplane.ai/workload").is_some(),
                    "{stack} {example}: {labels}"
                );
                assert!(
                    labels.get(POOL_LABEL).is_none(),
                    "{stack} {example}: a worker is selected: {labels}"
                );
            }
        }
    }
}

#[test]
fn a_cluster_composes_its_gateway_and_the_inference_extension_crds_and_reports_the_gateway_address() {
    for stack in ["Standard", "Dynamo"] {
        let xr = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "onprem"},
                        "spec": {"stack": stack, "cluster": {"source": "Existing", "existing": {
                                     "secretRef": {"name": "onprem-kubeconfig", "namespace": "platform"},
                                     "cache": {"storageClassName": "cephfs"}}},
                                 "nodePools": [{"name": "gpu", "className": "eks-h200-8x", "nodeCount": 4}]}});
        let class = document("examples/classes/eks-h200-8x.yaml");
        let build = |observed: Option<&Value>| {
            let mut req = RequestBuilder::new(&xr)
                .required(&class_requirement("eks-h200-8x"), std::slice::from_ref(&class));
            if let Some(gateway) = observed {
                req = req.observed("object-cluster-gateway-gateway", gateway);
            }
            req.build()
        };
        let (objects, status) = desired(build(None));
        assert!(status.get("gateway").is_none(), "{stack}: no address yet");
        let gateway = &objects["object-cluster-gateway-gateway"];
        assert_eq!(
            gateway["spec"]["readiness"]["policy"], "SuccessfulCreate",
            "{stack}: a cluster without a load balancer address still runs replicas"
        );
        for key in ["object-cluster-gateway-gateway", "object-cluster-gateway-class"] {
            assert_valid_everywhere(manifest(&objects[key]), 2);
        }
        for (key, file) in [
            (
                "object-inference-extension-crds-inferencepools",
                "inference.networking.k8s.io_inferencepools.yaml",
            ),
            (
                "object-inference-extension-crds-inferenceobjectives",
                "inference.networking.x-k8s.io_inferenceobjectives.yaml",
            ),
        ] {
            let mut vendored = document(&format!("tests/crds/routing/gaie/v1.0.1/{file}"));
            vendored.as_object_mut().unwrap().remove("status");
            assert_eq!(
                manifest(&objects[key]),
                &vendored,
                "{stack}: {key} is the vendored CRD"
            );
        }

        let mut observed = gateway.clone();
        observed["metadata"]["annotations"] =
            json!({"crossplane.io/composition-resource-name": "object-cluster-gateway-gateway"});
        observed["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}],
                                    "atProvider": {"manifest": {"status": {"addresses": [{"type": "IPAddress", "value": "198.51.100.4"}]}}}});
        let (_, status) = desired(build(Some(&observed)));
        // No client policy is observed on the cluster yet, so the status says the gateway admits anyone.
        assert_eq!(
            status["gateway"],
            json!({"address": "198.51.100.4", "admits": "Anyone"}),
            "{stack}"
        );
    }
}

/// The cluster gateway serves HTTPS only, with a certificate cert-manager issues on the cluster from the
/// cluster's own CA, and the CA's public certificate (published by trust-manager) reaches the status; every one
/// of those objects is accepted by its vendored CRD, and a ConfigMap holding anything but one CA certificate is
/// not trusted.
#[test]
fn the_cluster_gateway_serves_https_under_the_clusters_own_ca_and_reports_that_ca() {
    let xr = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": "onprem"},
                    "spec": {"stack": "Standard", "cluster": {"source": "Existing", "existing": {
                                 "secretRef": {"name": "onprem-kubeconfig", "namespace": "platform"},
                                 "cache": {"storageClassName": "cephfs"}}},
                             "nodePools": [{"name": "gpu", "className": "eks-h200-8x", "nodeCount": 4}]}});
    let class = document("examples/classes/eks-h200-8x.yaml");
    let with = |observed: &[(&str, Value)]| {
        let mut builder = RequestBuilder::new(&xr)
            .required(&class_requirement("eks-h200-8x"), std::slice::from_ref(&class));
        for (key, object) in observed {
            builder = builder.observed(key, object);
        }
        desired(builder.build())
    };
    let (objects, status) = with(&[]);
    let gateway = manifest(&objects["object-cluster-gateway-gateway"]);
    assert_eq!(
        gateway["spec"]["listeners"],
        json!([{"name": "https", "protocol": "HTTPS", "port": 443,
                "tls": {"mode": "Terminate", "certificateRefs": [{"group": "", "kind": "Secret", "name": "cluster-gateway-tls"}]},
                "allowedRoutes": {"namespaces": {"from": "All"}}}]),
    );
    assert!(status.get("gateway").is_none(), "{status}");
    for (key, file) in [
        (
            "object-cluster-gateway-issuer-selfsigned",
            "cert-manager/v1.17.2/crd-clusterissuers.yaml",
        ),
        (
            "object-cluster-gateway-issuer-ca",
            "cert-manager/v1.17.2/crd-clusterissuers.yaml",
        ),
        (
            "object-cluster-gateway-ca",
            "cert-manager/v1.17.2/crd-certificates.yaml",
        ),
        (
            "object-cluster-gateway-serving-certificate",
            "cert-manager/v1.17.2/crd-certificates.yaml",
        ),
        (
            "object-cluster-gateway-ca-bundle",
            "trust-manager/v0.25.0/trust.cert-manager.io_bundles.yaml",
        ),
    ] {
        let object = manifest(&objects[key]);
        let crd = document(&format!("tests/crds/{file}"));
        let schema = common::version_schema(&crd);
        assert_eq!(problems(&schema, object, None), Vec::<String>::new(), "{key}");
    }
    let serving = manifest(&objects["object-cluster-gateway-serving-certificate"]);
    assert_eq!(
        serving["spec"]["dnsNames"],
        json!(["cluster-gateway.modelplane.internal"])
    );
    let published = &objects["object-cluster-gateway-ca-published"];
    assert_eq!(published["spec"]["managementPolicies"], json!(["Observe"]));

    let observed_gateway = {
        let mut o = objects["object-cluster-gateway-gateway"].clone();
        o["status"] =
            json!({"atProvider": {"manifest": {"status": {"addresses": [{"value": "198.51.100.4"}]}}}});
        o
    };
    let observed_ca = |pem: &str| {
        let mut o = published.clone();
        o["status"] = json!({"atProvider": {"manifest": {"data": {"ca.crt": pem}}}});
        o
    };
    let ca = std::fs::read_to_string(repo_root().join("tests/fixtures/tls/cluster-gateway-ca.pem")).unwrap();
    let (_, status) = with(&[
        ("object-cluster-gateway-gateway", observed_gateway.clone()),
        ("object-cluster-gateway-ca-published", observed_ca(&ca)),
    ]);
    let mut reachable = reachable_gateway("198.51.100.4");
    reachable["admits"] = json!("Anyone");
    assert_eq!(status["gateway"], reachable);
    for hostile in [
        "not a certificate".to_owned(),
        format!("{ca}{ca}"),
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_owned(),
        "A".repeat(1 << 20),
    ] {
        let (_, status) = with(&[
            ("object-cluster-gateway-gateway", observed_gateway.clone()),
            ("object-cluster-gateway-ca-published", observed_ca(&hostile)),
        ]);
        assert_eq!(
            status["gateway"],
            json!({"address": "198.51.100.4", "admits": "Anyone"}),
            "{:.40}",
            hostile
        );
    }
}

#[test]
fn the_endpoint_a_ready_replica_publishes_is_accepted_by_its_xrd_and_routed_by_the_example_service() {
    let xr = document("examples/deployments/qwen3-coder.yaml");
    let mut cluster = document("tests/fixtures/clusters/standard/eks-h200-us-west.yaml");
    cluster["status"]["gateway"] = reachable_gateway("203.0.113.7");
    let fleet = [
        cluster,
        document("tests/fixtures/clusters/standard/qwen3-coder-cache.yaml"),
    ];
    let mut builder = RequestBuilder::new(&xr).answered_from(&fleet);
    // Placed, then everything it composed observed Ready: the replica serves and publishes its endpoint.
    for _ in 0..2 {
        let (objects, _) = desired(builder.build());
        builder = RequestBuilder::new(&xr);
        for (key, mut object) in objects {
            object["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
            builder = builder.observed(&key, &object);
        }
        builder = builder.answered_from(&fleet);
    }
    let (objects, _) = desired(builder.build());
    let endpoint = &objects["endpoint-0-eks-h200-us-west"];
    let xrd = common::version_schema(&document("package/configuration/xrds/modelendpoints.yaml"));
    assert_eq!(problems(&xrd, endpoint, None), Vec::<String>::new());
    assert_eq!(endpoint["spec"]["model"], "qwen3-coder");

    // The example ModelService routes it: one backend at the cluster gateway, under the replica's prefix, with
    // the engine's model name; the caller's `ml-team/qwen3-coder` is what the route matches.
    let mut routed = endpoint.clone();
    routed["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    let gateway = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceGateway", "metadata": {"name": "fleet"},
                         "spec": {"clusterName": "eks-h200-us-west"},
                         "status": {"clusterName": "eks-h200-us-west", "address": "198.51.100.9"}});
    let service = document("examples/services/qwen3-coder.yaml");
    let req = RequestBuilder::new(&service)
        .answered_from(&[routed, gateway, fleet[0].clone()])
        .build();
    let (objects, status) = desired(req);
    let backends: Vec<&Value> = objects
        .values()
        .map(manifest)
        .filter(|m| m["kind"] == "Backend" || m["kind"] == "AIServiceBackend")
        .collect();
    assert_eq!(backends.len(), 2, "{:?}", objects.keys());
    let backend = backends.iter().find(|m| m["kind"] == "Backend").unwrap();
    assert_eq!(
        backend["spec"]["endpoints"][0]["ip"],
        json!({"address": "203.0.113.7", "port": 443})
    );
    // TLS to the cluster gateway, trusting its cluster's CA alone (copied beside the Backend), for the name that
    // CA issued the gateway's certificate for.
    let name = backend["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        backend["spec"]["tls"],
        json!({"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": format!("{name}-ca")}],
               "sni": "cluster-gateway.modelplane.internal"})
    );
    let ca = objects
        .values()
        .map(manifest)
        .find(|m| m["kind"] == "ConfigMap")
        .expect("the CA copied to the gateway's cluster");
    assert_eq!(ca["metadata"]["name"], format!("{name}-ca"));
    assert_eq!(ca["data"]["ca.crt"], reachable_gateway("")["caCertificate"]);
    let backend_crd = document("tests/crds/routing/envoy-gateway/v1.8.1/gateway.envoyproxy.io_backends.yaml");
    assert_eq!(
        problems(&common::version_schema(&backend_crd), backend, None),
        Vec::<String>::new()
    );
    let service_backend = backends.iter().find(|m| m["kind"] == "AIServiceBackend").unwrap();
    assert_eq!(
        service_backend["spec"]["schema"]["prefix"],
        "/ml-team/qwen3-coder-0/v1"
    );
    let route = manifest(&objects["fleet-route"]);
    assert_eq!(
        route["spec"]["rules"][0]["matches"][0]["headers"][0]["value"],
        "ml-team/qwen3-coder"
    );
    assert_eq!(
        route["spec"]["rules"][0]["backendRefs"][0]["modelNameOverride"],
        "qwen3-coder"
    );
    assert_eq!(status["endpoints"]["ready"], 1);
}
