//! The objects inside the benchmark requests, shaped as a Kubernetes API server returns them: the spec and status
//! the composers read, plus the metadata a real object carries (uid, resourceVersion, managedFields, Crossplane's
//! composition fields). That noise is most of a fleet request's bytes, which is why it is here: a decoder that
//! reads only what the scheduler needs must skip it cheaply.
//!
//! Everything is derived from indices, so the same call always builds the same object.

use modelplane_function::workload::cluster_gateway::tls;
use serde_json::{Value, json};

/// A GPU node shape, as an InferenceClass describes it.
pub struct GpuClass {
    pub name: &'static str,
    instance_type: &'static str,
    product: &'static str,
    architecture: &'static str,
    compute_capability: &'static str,
    memory: &'static str,
    gpus: u32,
    efa_interfaces: u32,
}

/// The classes a fleet's pools point at. The first is `examples/classes/eks-h200-8x.yaml`.
pub const GPU_CLASSES: [GpuClass; 4] = [
    GpuClass {
        name: "eks-h200-8x",
        instance_type: "p5en.48xlarge",
        product: "NVIDIA H200",
        architecture: "Hopper",
        compute_capability: "9.0.0",
        memory: "141Gi",
        gpus: 8,
        efa_interfaces: 16,
    },
    GpuClass {
        name: "eks-h100-8x",
        instance_type: "p5.48xlarge",
        product: "NVIDIA H100 80GB HBM3",
        architecture: "Hopper",
        compute_capability: "9.0.0",
        memory: "80Gi",
        gpus: 8,
        efa_interfaces: 32,
    },
    GpuClass {
        name: "eks-l40s-4x",
        instance_type: "g6e.12xlarge",
        product: "NVIDIA L40S",
        architecture: "Ada Lovelace",
        compute_capability: "8.9.0",
        memory: "48Gi",
        gpus: 4,
        efa_interfaces: 0,
    },
    GpuClass {
        name: "eks-a10g-1x",
        instance_type: "g5.2xlarge",
        product: "NVIDIA A10G",
        architecture: "Ampere",
        compute_capability: "8.6.0",
        memory: "24Gi",
        gpus: 1,
        efa_interfaces: 0,
    },
];

/// The CA every cluster gateway publishes here (a test CA whose key was never kept).
const GATEWAY_CA: &str = include_str!("../../fixtures/tls/cluster-gateway-ca.pem");

const REGIONS: [&str; 4] = ["us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1"];
const TEAMS: [&str; 5] = ["search", "ads", "assistant", "research", "platform"];

/// splitmix64's finalizer: a well-spread, reproducible number per seed.
pub fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A version-4-shaped UUID, as the API server assigns to every object.
fn uid(seed: u64) -> String {
    let (a, b) = (mix(seed), mix(seed ^ 0x5555));
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

fn timestamp(seed: u64) -> String {
    let n = mix(seed);
    format!(
        "2026-10-{:02}T{:02}:{:02}:{:02}Z",
        1 + n % 28,
        (n >> 8) % 24,
        (n >> 16) % 60,
        (n >> 24) % 60
    )
}

fn resource_version(seed: u64) -> String {
    (40_000_000 + mix(seed) % 9_000_000).to_string()
}

/// The devices of one node of `class`, as the NVIDIA DRA driver publishes them.
pub fn devices(class: &GpuClass) -> Value {
    json!([{
        "name": "gpu",
        "claim": "DRA",
        "driver": "gpu.nvidia.com",
        "deviceClassName": "gpu.nvidia.com",
        "count": class.gpus,
        "attributes": {
            "productName": {"string": class.product},
            "architecture": {"string": class.architecture},
            "brand": {"string": "Nvidia"},
            "cudaComputeCapability": {"version": class.compute_capability},
            "cudaDriverVersion": {"version": "12.8.0"},
        },
        "capacity": {"memory": {"value": class.memory}},
    }])
}

pub fn inference_class(index: usize) -> Value {
    let class = &GPU_CLASSES[index % GPU_CLASSES.len()];
    let seed = 1_000 + index as u64;
    json!({
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {
            "name": class.name,
            "uid": uid(seed),
            "resourceVersion": resource_version(seed),
            "generation": 1,
            "creationTimestamp": timestamp(seed),
        },
        "spec": {
            "description": format!("AWS {}, {}x {}", class.instance_type, class.gpus, class.product),
            "devices": devices(class),
            "provisioning": {"eks": {
                "instanceType": class.instance_type,
                "amiType": "AL2023_x86_64_NVIDIA",
                "diskSizeGiB": 1024,
                "efaInterfaces": class.efa_interfaces,
            }},
        },
        "status": {"conditions": [condition("Ready", "Available", seed), condition("Synced", "ReconcileSuccess", seed)]},
    })
}

fn condition(type_: &str, reason: &str, seed: u64) -> Value {
    json!({
        "type": type_, "status": "True", "reason": reason,
        "lastTransitionTime": timestamp(seed ^ 0x77), "observedGeneration": 3,
    })
}

/// Cluster `index` of a fleet: `pools` node pools over the GPU classes, half the fleet on each stack.
pub fn inference_cluster(index: usize, pools: usize) -> Value {
    let seed = index as u64;
    let region = REGIONS[index % REGIONS.len()];
    let team = TEAMS[index % TEAMS.len()];
    let name = format!("fleet-{region}-{index:03}");
    let dynamo = index % 2 == 1;
    let stack = if dynamo { "Dynamo" } else { "Standard" };
    let pool_specs: Vec<Value> = (0..pools).map(|p| node_pool(index, p, region)).collect();
    let pool_status: Vec<Value> = (0..pools).map(|p| pool_status(index, p)).collect();
    // Every few clusters is reserved for one team, so placement has taints to honour.
    let taints = if index % 4 == 3 {
        json!([{"key": "modelplane.ai/dedicated", "value": team, "effect": "NoSchedule"}])
    } else {
        json!([])
    };
    let mut status = json!({
        "stack": stack,
        "providerConfigName": name,
        "cacheStorageClass": "efs-sc",
        "pools": pool_status,
        "components": components(dynamo),
        // A Ready cluster's gateway has an address, has published the CA its certificate chains to, and requires
        // the fleet's client certificate.
        "gateway": {
            "address": format!("10.{}.{}.10", index / 250, index % 250),
            "serverName": tls::SERVER_NAME,
            "caCertificate": GATEWAY_CA,
            "admits": "FleetGateways",
        },
        "conditions": [condition("Ready", "Available", seed), condition("Synced", "ReconcileSuccess", seed)],
    });
    if dynamo {
        status["modelExpressAddress"] = json!("modelplane-modelexpress.modelplane-system.svc:8001");
        status["kaiQueue"] = json!("modelplane");
    }
    json!({
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {
            "name": name,
            "uid": uid(seed),
            "resourceVersion": resource_version(seed),
            "generation": 3,
            "creationTimestamp": timestamp(seed),
            "labels": {"modelplane.ai/region": region, "modelplane.ai/team": team, "environment": "production"},
            "finalizers": ["composite.apiextensions.crossplane.io"],
            "managedFields": managed_fields(seed),
        },
        "spec": {
            "stack": stack,
            "cluster": {"source": "EKS", "eks": {"region": region, "networking": {
                "vpcCidr": format!("10.{}.0.0/16", index % 250),
                "endpointPublicAccess": true,
            }}},
            "nodePools": pool_specs,
            "taints": taints,
            "crossplane": {
                "compositionRef": {"name": "inference-cluster"},
                "compositionRevisionRef": {"name": "inference-cluster-8d3c1f0"},
                "compositionUpdatePolicy": "Automatic",
                "resourceRefs": [
                    {"apiVersion": "eks.aws.m.upbound.io/v1beta1", "kind": "Cluster", "name": name},
                    {"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "ProviderConfig", "name": name},
                    {"apiVersion": "helm.m.crossplane.io/v1beta1", "kind": "Release", "name": format!("{name}-stack")},
                ],
            },
        },
        "status": status,
    })
}

fn class_of(cluster: usize, pool: usize) -> &'static GpuClass {
    &GPU_CLASSES[(cluster + pool) % GPU_CLASSES.len()]
}

fn node_count(cluster: usize, pool: usize) -> u32 {
    1 + ((cluster * 3 + pool) % 4) as u32
}

fn node_pool(cluster: usize, pool: usize, region: &str) -> Value {
    let class = class_of(cluster, pool);
    let fabric = if class.efa_interfaces > 0 { "EFA" } else { "None" };
    json!({
        "name": format!("pool-{pool}"),
        "className": class.name,
        "nodeCount": node_count(cluster, pool),
        "zones": [format!("{region}a")],
        "fabric": {"type": fabric},
    })
}

fn pool_status(cluster: usize, pool: usize) -> Value {
    pool_status_of(
        class_of(cluster, pool),
        &format!("pool-{pool}"),
        node_count(cluster, pool),
    )
}

/// A pool of `nodes` nodes of `class`, as its cluster's status lists it.
pub fn pool_status_of(class: &GpuClass, name: &str, nodes: u32) -> Value {
    json!({"name": name, "className": class.name, "nodeCount": nodes, "devices": devices(class)})
}

fn components(dynamo: bool) -> Value {
    let serving = if dynamo {
        json!([{"name": "grove", "version": "v0.1.0-alpha.6"}, {"name": "kai-scheduler", "version": "v0.9.3"}])
    } else {
        json!([{"name": "lws", "version": "v0.7.0"}])
    };
    let mut all = json!([
        {"name": "gpu-operator", "version": "v25.10.0"},
        {"name": "nvidia-dra-driver-gpu", "version": "25.8.0"},
        {"name": "envoy-gateway", "version": "v1.5.1"},
    ]);
    if let (Some(all), Some(serving)) = (all.as_array_mut(), serving.as_array()) {
        all.extend(serving.iter().cloned());
    }
    all
}

/// What `kubectl apply --server-side` and Crossplane leave in `metadata.managedFields`.
fn managed_fields(seed: u64) -> Value {
    json!([
        {
            "manager": "kubectl", "operation": "Apply", "apiVersion": "modelplane.ai/v1alpha1",
            "time": timestamp(seed), "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:cluster": {}, "f:nodePools": {}, "f:stack": {}, "f:taints": {}}},
        },
        {
            "manager": "apiextensions.crossplane.io/composite", "operation": "Apply",
            "apiVersion": "modelplane.ai/v1alpha1", "time": timestamp(seed ^ 0x77), "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:conditions": {}, "f:pools": {}, "f:components": {}}},
            "subresource": "status",
        },
    ])
}

/// The qwen3-coder ModelDeployment from the v0.4 announcement: a 480B model as a two-node Leader/Worker gang.
pub fn model_deployment(replicas: u32) -> Value {
    let seed = 9_000;
    json!({
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {
            "name": "qwen3-coder",
            "namespace": "ml-team",
            "uid": uid(seed),
            "resourceVersion": resource_version(seed),
            "generation": 1,
            "creationTimestamp": timestamp(seed),
            "finalizers": ["composite.apiextensions.crossplane.io"],
        },
        "spec": {
            "replicas": replicas,
            "template": {"spec": {
                "modelCacheRef": {"name": "qwen3-coder"},
                "engines": [{"name": "qwen3-coder", "members": [
                    gang_member("Leader", 0),
                    gang_member("Worker", 1),
                ]}],
            }},
            "crossplane": {
                "compositionRef": {"name": "model-deployment"},
                "compositionRevisionRef": {"name": "model-deployment-41aa9e2"},
                "compositionUpdatePolicy": "Automatic",
            },
        },
    })
}

fn gang_member(role: &str, rank: u32) -> Value {
    let mut command = format!(
        "exec vllm serve Qwen/Qwen3-Coder-480B-A35B-Instruct --served-model-name=qwen3-coder \
         --tensor-parallel-size=8 --pipeline-parallel-size=2 --distributed-executor-backend=mp \
         --nnodes=2 --node-rank={rank} --master-addr=$(MODELPLANE_LEADER_ADDRESS)"
    );
    command.push_str(if rank == 0 {
        " --max-model-len=32768 --port=8000"
    } else {
        " --headless --max-model-len=32768"
    });
    let mut member = json!({
        "role": role,
        "nodeSelector": {"devices": [{
            "name": "gpu",
            "count": 8,
            "selectors": [{"cel": "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"120Gi\")) >= 0\n"}],
        }]},
        "template": {"spec": {"containers": [{
            "name": "engine",
            "image": "vllm/vllm-openai:v0.23.0",
            "command": ["/bin/sh", "-c", command],
        }]}},
    });
    if role == "Worker" {
        member["worker"] = json!({"nodes": 1});
    }
    member
}

/// The smallest composite this function serves: a class with one synthetic device.
pub fn tiny_class() -> Value {
    json!({
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "cpu"},
        "spec": {"devices": [{"name": "cpu", "claim": "Synthetic", "count": 1}]},
    })
}
