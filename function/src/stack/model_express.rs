//! The ModelExpress server a Dynamo cluster runs: exactly one per cluster, which remembers which replica holds
//! a model in GPU memory so later replicas pull weights from a peer instead of storage. It never touches the
//! weight bytes. With `MX_METADATA_BACKEND=kubernetes` it keeps that state in two CRDs in its own namespace.

use crate::wire::tree::{Fields, Text, Tree, tree};

use super::{CacheUse, EngineAdditions, StackObject};
use crate::api::inference_cluster::PoolStatus;
use crate::workload::well_known::{MODEL_EXPRESS_GRPC_PORT, MODEL_EXPRESS_IMAGE, MODEL_EXPRESS_NAMESPACE};

pub const VERSION: &str = "0.4.1";
pub const NAME: &str = "modelexpress-server";
const GROUP: &str = "modelexpress.nvidia.com";
/// The server's scratch space for model metadata; weights stay on the engines' own cache volumes.
const CACHE_DIR: &str = "/mnt/models";

/// `host:port` engines on any namespace of the cluster use.
pub fn address() -> String {
    format!("{NAME}.{MODEL_EXPRESS_NAMESPACE}.svc.cluster.local:{MODEL_EXPRESS_GRPC_PORT}")
}

/// The DRA DeviceClass AWS's DRA network driver (aws-dranet) publishes EFA interfaces under.
pub const EFA_DEVICE_CLASS: &str = "efa.networking.k8s.aws";

/// What a ModelExpress client in an engine needs, for an engine whose deployment loads from `cache`. Nothing
/// here makes the engine use ModelExpress: only the user's `--load-format` opts in.
pub fn client(address: &str, pool: &PoolStatus, cache: &CacheUse) -> EngineAdditions {
    let field = |path: &'static str| tree!({"fieldRef": {"fieldPath": Text::Borrowed(path)}});
    let mut env = vec![
        // MODEL_EXPRESS_URL is deprecated but wins when both are set (the TRT-LLM path reads only it), so set both.
        tree!({"name": "MX_SERVER_ADDRESS", "value": address}),
        tree!({"name": "MODEL_EXPRESS_URL", "value": address}),
        // Every cache mounts at the same path, and a P2P source is identified by path and revision: the
        // revision names the cache, so two caches never share a source and a peer serves only these weights.
        tree!({"name": "MX_MODEL_REVISION", "value": source_revision(cache)}),
        tree!({"name": "MX_P2P_METADATA", "value": "1"}),
        // The server's Kubernetes backend writes ModelMetadata owned by the engine pod.
        tree!({"name": "POD_NAME", "valueFrom": field("metadata.name")}),
        tree!({"name": "POD_UID", "valueFrom": field("metadata.uid")}),
        tree!({"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")}),
    ];
    let mut claim_requests = Vec::new();
    if pool.efa_interfaces > 0 {
        env.push(tree!({"name": "MX_NIXL_BACKEND", "value": "LIBFABRIC"}));
        // Every EFA interface of the node: one engine pod per node, and transfers stripe over all of them.
        claim_requests.push(
            tree!({"name": "efa", "exactly": {"deviceClassName": EFA_DEVICE_CLASS,
                                                              "allocationMode": "All"}}),
        );
    }
    EngineAdditions {
        env,
        // GPUDirect RDMA pins the memory it registers.
        capabilities: vec!["IPC_LOCK"],
        claim_requests,
    }
}

/// The revision a cache's weights are published under: its namespace and name, which no other cache shares
/// (`/` appears in neither).
pub fn source_revision(cache: &CacheUse) -> String {
    format!("{}/{}", cache.namespace, cache.name)
}

/// Everything the server needs, in the order an operator would apply it.
pub fn objects() -> Vec<StackObject> {
    vec![
        StackObject::created(
            "namespace",
            tree!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MODEL_EXPRESS_NAMESPACE, "labels": labels()},
            }),
        ),
        StackObject::created(
            "crd-modelmetadatas",
            crd(
                "ModelMetadata",
                "modelmetadatas",
                &["mxmeta"],
                &["modelName", "sourceType"],
                1,
            ),
        ),
        StackObject::created(
            "crd-modelcacheentries",
            crd(
                "ModelCacheEntry",
                "modelcacheentries",
                &["mxcache"],
                &["modelName", "provider"],
                2,
            ),
        ),
        StackObject::created(
            "serviceaccount",
            tree!({
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": NAME, "namespace": MODEL_EXPRESS_NAMESPACE, "labels": labels()},
            }),
        ),
        StackObject::created(
            "role",
            tree!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": NAME, "namespace": MODEL_EXPRESS_NAMESPACE, "labels": labels()},
                "rules": [
                    {"apiGroups": [GROUP],
                     "resources": ["modelmetadatas", "modelmetadatas/status", "modelcacheentries", "modelcacheentries/status"],
                     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                    // Tensor descriptors too large for a CR's status are kept in ConfigMaps the server owns.
                    {"apiGroups": [""], "resources": ["configmaps"],
                     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                ],
            }),
        ),
        StackObject::created(
            "rolebinding",
            tree!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": NAME, "namespace": MODEL_EXPRESS_NAMESPACE, "labels": labels()},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
                "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": MODEL_EXPRESS_NAMESPACE}],
            }),
        ),
        StackObject::created(
            "service",
            tree!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": NAME, "namespace": MODEL_EXPRESS_NAMESPACE, "labels": labels()},
                "spec": {
                    "selector": {"app.kubernetes.io/name": NAME},
                    "ports": [{"name": "grpc", "port": MODEL_EXPRESS_GRPC_PORT, "targetPort": "grpc", "protocol": "TCP",
                               "appProtocol": "grpc"}],
                },
            }),
        ),
        StackObject::available("deployment", deployment()),
    ]
}

/// The labels of every object of the server.
fn labels() -> Tree {
    tree!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "modelplane"})
}

fn deployment() -> Tree {
    let probe = tree!({"tcpSocket": {"port": "grpc"}, "periodSeconds": 10, "timeoutSeconds": 2});
    tree!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": MODEL_EXPRESS_NAMESPACE, "labels": labels()},
        "spec": {
            // One server per cluster: it is the single source of truth for which peer holds which model.
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    "serviceAccountName": NAME,
                    "containers": [{
                        "name": "server",
                        "image": format!("{MODEL_EXPRESS_IMAGE}:{VERSION}"),
                        "ports": [{"name": "grpc", "containerPort": MODEL_EXPRESS_GRPC_PORT, "protocol": "TCP"}],
                        "env": [
                            {"name": "MX_METADATA_BACKEND", "value": "kubernetes"},
                            {"name": "MODEL_EXPRESS_CACHE_DIRECTORY", "value": CACHE_DIR},
                            {"name": "HF_HUB_CACHE", "value": CACHE_DIR},
                            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                        ],
                        "readinessProbe": probe.clone(),
                        "livenessProbe": probe,
                        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
                        "volumeMounts": [{"name": "cache", "mountPath": CACHE_DIR}],
                    }],
                    "volumes": [{"name": "cache", "emptyDir": {}}],
                },
            },
        },
    })
}

/// A CRD for the server's Kubernetes metadata backend. Written here, not vendored: `spec` declares the server's
/// string fields (the first `required` of them required, as the server always sets them) and leaves the server's
/// own status free-form, so a newer server's extra fields are kept rather than pruned.
fn crd(kind: &str, plural: &str, short_names: &[&str], fields: &[&str], required: usize) -> Tree {
    let properties = Fields::from_entries(
        fields
            .iter()
            .map(|f| (Text::from((*f).to_owned()), tree!({"type": "string"})))
            .collect(),
    );
    let required = fields[..required.min(fields.len())].to_vec();
    tree!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}"),
                     "labels": {"app.kubernetes.io/name": "modelexpress", "app.kubernetes.io/component": "crd"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "shortNames": short_names.to_vec()},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Model", "type": "string", "jsonPath": ".spec.modelName"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": required,
                            "properties": properties,
                            "x-kubernetes-preserve-unknown-fields": true,
                        },
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            }],
        },
    })
}
