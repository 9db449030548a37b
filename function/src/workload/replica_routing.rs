//! How a replica is reached on its cluster, the same on both stacks (the cluster gateway it is reached through is
//! [`super::cluster_gateway`]): per replica an InferencePool over its serving pods, the endpoint picker that chooses among them, and an HTTPRoute from the
//! gateway to the pool under the replica's own path prefix. Only what differs between stacks is behind the
//! `ServingStack` trait; here nothing does: every stack labels its serving pods (a gang's leader only) with
//! [`super::well_known::INFERENCE_POOL_LABEL`] and serves on [`super::well_known::SERVING_PORT`].

use crate::wire::tree::{Tree, tree};

use super::{
    cluster_gateway::CLUSTER_GATEWAY,
    disaggregation, engine_flags,
    names::{child_name, short_hash},
    well_known::{ENDPOINT_PICKER_IMAGE, GATEWAY_NAMESPACE, INFERENCE_POOL_LABEL, SERVING_PORT},
};
use crate::api::model_deployment::{ModelDeploymentSpec, Phase, Role};

const INFERENCE_GROUP: &str = "inference.networking.k8s.io";
/// The endpoint picker's ext-proc port, which Envoy calls for every request to the pool.
const PICKER_PORT: u16 = 9002;
const PICKER_HEALTH_PORT: u16 = 9003;
const PICKER_CONFIG_FILE: &str = "epp-config.yaml";
/// Weights of the picker's scorers: a warm prefix cache saves more than a short queue costs.
const PREFIX_CACHE_WEIGHT: u32 = 2;
const QUEUE_WEIGHT: u32 = 1;
/// The engine's KV block size when its flags do not say (vLLM's default). The picker must hash prompts in the
/// engine's blocks, or prefix-aware picking silently degrades.
const DEFAULT_BLOCK_SIZE: u32 = 16;
const BLOCK_SIZE_FLAGS: [&str; 2] = ["--block-size", "--page-size"];
/// DNS-label limit: the serving name becomes object names and label values.
const LABEL_LIMIT: usize = 63;

/// The name a replica serves under on its cluster (its pool, picker and route, and its path prefix). The same on
/// every cluster: a replica that moves keeps its path, and each cluster's gateway only knows its own replicas.
pub fn serving_name(deployment: &str, replica: u32) -> String {
    // Room for the picker's "-epp" suffix inside a DNS label.
    child_name(&[deployment, &replica.to_string()], LABEL_LIMIT - 4)
}

/// The path prefix the cluster gateway routes to the replica, and strips before the engine sees the request.
pub fn path_prefix(namespace: &str, serving_name: &str) -> String {
    format!("/{namespace}/{serving_name}/")
}

/// What the picker may do with what it reads.
const READ_VERBS: [&str; 3] = ["get", "list", "watch"];

/// One routing object of a replica: a key suffix, the manifest, and whether it is ready only once Available.
pub struct ReplicaObject {
    pub suffix: &'static str,
    pub manifest: Tree,
    pub available: bool,
}

/// What reaches one replica on its cluster: its InferencePool, endpoint picker (ServiceAccount, Role and
/// RoleBinding, config, Deployment, Service) and HTTPRoute, all in the deployment's namespace.
pub fn replica_objects(
    namespace: &str,
    serving_name: &str,
    spec: &ModelDeploymentSpec,
) -> Vec<ReplicaObject> {
    let picker = format!("{serving_name}-epp");
    let meta = |name: &str| tree!({"name": name, "namespace": namespace});
    let config = if spec.template.spec.disaggregated() {
        disaggregation::picker_config(block_size(spec))
    } else {
        picker_config(block_size(spec))
    };
    let object = |suffix, manifest| ReplicaObject {
        suffix,
        manifest,
        available: false,
    };
    vec![
        object(
            "pool",
            tree!({
                "apiVersion": format!("{INFERENCE_GROUP}/v1"), "kind": "InferencePool", "metadata": meta(serving_name),
                "spec": {
                    "selector": {"matchLabels": {INFERENCE_POOL_LABEL: serving_name}},
                    "targetPorts": [{"number": SERVING_PORT}],
                    // A picker that is down must not take the replica down with it: Envoy then picks itself.
                    "endpointPickerRef": {"name": &picker, "port": {"number": PICKER_PORT}, "failureMode": "FailOpen"},
                },
            }),
        ),
        object(
            "route",
            tree!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": meta(serving_name),
                "spec": {
                    "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                    "name": CLUSTER_GATEWAY, "namespace": GATEWAY_NAMESPACE}],
                    "rules": [{
                        "matches": [{"path": {"type": "PathPrefix", "value": path_prefix(namespace, serving_name)}}],
                        "filters": [{"type": "URLRewrite",
                                     "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}],
                        "backendRefs": [{"group": INFERENCE_GROUP, "kind": "InferencePool", "name": serving_name}],
                        // 0s disables the request timeout: Envoy's default of 15 s would cut every long stream.
                        "timeouts": {"request": "0s"},
                    }],
                },
            }),
        ),
        object(
            "picker-account",
            tree!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(&picker)}),
        ),
        object(
            "picker-role",
            tree!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(&picker),
                "rules": [
                    {"apiGroups": [""], "resources": ["pods"], "verbs": READ_VERBS},
                    {"apiGroups": [INFERENCE_GROUP], "resources": ["inferencepools"], "verbs": READ_VERBS},
                    {"apiGroups": ["inference.networking.x-k8s.io"], "resources": ["inferenceobjectives"], "verbs": READ_VERBS},
                ],
            }),
        ),
        object(
            "picker-binding",
            tree!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(&picker),
                "subjects": [{"kind": "ServiceAccount", "name": &picker, "namespace": namespace}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": &picker},
            }),
        ),
        object(
            "picker-config",
            tree!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(&picker),
                   "data": {PICKER_CONFIG_FILE: &config}}),
        ),
        ReplicaObject {
            suffix: "picker",
            manifest: picker_deployment(namespace, serving_name, &picker, &config),
            available: true,
        },
        object(
            "picker-service",
            tree!({
                "apiVersion": "v1", "kind": "Service", "metadata": meta(&picker),
                "spec": {
                    "selector": {"app": &picker},
                    "ports": [{"name": "grpc-ext-proc", "port": PICKER_PORT, "targetPort": PICKER_PORT,
                               "protocol": "TCP", "appProtocol": "http2"}],
                },
            }),
        ),
    ]
}

fn picker_deployment(namespace: &str, pool: &str, picker: &str, config: &str) -> Tree {
    tree!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": picker, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": picker}},
            "template": {
                // A config change rolls the picker: it reads the file once, at start.
                "metadata": {"labels": {"app": picker},
                             "annotations": {"modelplane.ai/picker-config": short_hash(config.as_bytes())}},
                "spec": {
                    "serviceAccountName": picker,
                    "containers": [{
                        "name": "epp",
                        "image": ENDPOINT_PICKER_IMAGE,
                        "args": [
                            format!("--pool-name={pool}"),
                            format!("--pool-namespace={namespace}"),
                            format!("--pool-group={INFERENCE_GROUP}"),
                            format!("--config-file=/config/{PICKER_CONFIG_FILE}"),
                            format!("--grpc-port={PICKER_PORT}"),
                        ],
                        "ports": [
                            {"name": "grpc", "containerPort": PICKER_PORT, "protocol": "TCP"},
                            {"name": "grpc-health", "containerPort": PICKER_HEALTH_PORT, "protocol": "TCP"},
                        ],
                        "readinessProbe": {"tcpSocket": {"port": PICKER_PORT}, "periodSeconds": 5},
                        "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": true}],
                    }],
                    "volumes": [{"name": "config", "configMap": {"name": picker}}],
                },
            },
        },
    })
}

/// The picker's scheduling (in the config group of the llm-d router the picker image is built from): score every
/// serving pod by how much of the prompt its KV cache already holds
/// (estimated from the prompts it was sent) and by its queue depth, then take the best.
fn picker_config(block_size: u32) -> String {
    format!(
        "apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
{}schedulingProfiles:
- name: default
  plugins:
{}",
        scoring_plugins(block_size),
        scoring_refs()
    )
}

/// The plugins of [`picker_config`]'s scoring, as entries of its `plugins` list.
pub fn scoring_plugins(block_size: u32) -> String {
    format!(
        "- type: approx-prefix-cache-producer
  parameters:
    autoTune: false
    blockSizeTokens: {block_size}
    maxPrefixBlocksToMatch: 256
    lruCapacityPerServer: 31250
- type: prefix-cache-scorer
- type: queue-scorer
- type: max-score-picker
"
    )
}

/// The scoring of [`scoring_plugins`] with its weights, as entries of a scheduling profile's `plugins` list.
pub fn scoring_refs() -> String {
    format!(
        "  - pluginRef: prefix-cache-scorer
    weight: {PREFIX_CACHE_WEIGHT}
  - pluginRef: queue-scorer
    weight: {QUEUE_WEIGHT}
  - pluginRef: max-score-picker
"
    )
}

/// The KV block size the serving engine (under PrefillDecode, the decode engine) was started with, or the
/// default.
fn block_size(spec: &ModelDeploymentSpec) -> u32 {
    BLOCK_SIZE_FLAGS
        .iter()
        .find_map(|flag| serving_flag(spec, flag)?.parse().ok())
        .filter(|size| *size > 0)
        .unwrap_or(DEFAULT_BLOCK_SIZE)
}

/// The value of `flag` in the serving engine's command and args (see [`engine_flags::value`]): under
/// PrefillDecode serving the decode engine's, which answers callers; otherwise the first serving member's.
pub fn serving_flag(spec: &ModelDeploymentSpec, flag: &str) -> Option<String> {
    let replica = &spec.template.spec;
    let engines = match replica.phase_engine(Phase::Decode) {
        Some((_, decode)) => std::slice::from_ref(decode),
        None => replica.engines.as_slice(),
    };
    let member = engines
        .iter()
        .flat_map(|e| &e.members)
        .find(|m| matches!(m.role, Role::Standalone | Role::Leader))?;
    engine_flags::value(member.template.spec.containers.first()?, flag)
}
