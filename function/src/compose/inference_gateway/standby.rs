//! The standby server on the fleet gateway's cluster (`modelplane-function standby`, [`crate::standby`]): where
//! ModelServices send the model of a deployment scaled to zero. Its Deployment and Service, the PodMonitor that
//! carries its demand series to the cluster's Prometheus (and from there to the fleet's, with the other
//! `modelplane_*` series), and a NetworkPolicy that lets only the gateway's Envoy proxies and Prometheus reach it:
//! whoever else could call it could invent demand and start GPUs.
//!
//! None of it holds the gateway's readiness: callers are served without it, only a model with no replica waits.

use crate::wire::tree::{Tree, tree};

use crate::stack::components::{ENVOY_GATEWAY, KUBE_PROMETHEUS_STACK};
use crate::workload::well_known::{FUNCTION_IMAGE, GATEWAY_NAMESPACE, STANDBY_PORT, STANDBY_SERVICE};

/// The pod label the Service, the PodMonitor and the NetworkPolicy select.
const APP_LABEL: &str = "app.kubernetes.io/name";

/// The standby server's objects, by composed-resource key.
pub fn objects() -> [(&'static str, Tree); 4] {
    let selector = || tree!({APP_LABEL: STANDBY_SERVICE});
    let metadata = || tree!({"name": STANDBY_SERVICE, "namespace": GATEWAY_NAMESPACE});
    let from_namespace = |namespace: &'static str| tree!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}});
    [
        ("standby-deployment", deployment()),
        (
            "standby-service",
            tree!({
                "apiVersion": "v1", "kind": "Service", "metadata": metadata(),
                "spec": {"selector": selector(), "ports": [{"name": "http", "port": STANDBY_PORT, "targetPort": STANDBY_PORT}]},
            }),
        ),
        (
            "standby-monitor",
            tree!({
                "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor", "metadata": metadata(),
                "spec": {
                    "selector": {"matchLabels": selector()},
                    "podMetricsEndpoints": [{
                        "portNumber": STANDBY_PORT,
                        "path": "/metrics",
                        "interval": "15s",
                        // Its `namespace` and `deployment` name the deployment asked for, not the server's pod.
                        "honorLabels": true,
                        "metricRelabelings": [
                            {"sourceLabels": ["__name__"], "regex": "modelplane_standby_.+", "action": "keep"},
                        ],
                    }],
                },
            }),
        ),
        (
            "standby-network-policy",
            tree!({
                "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata(),
                "spec": {
                    "podSelector": {"matchLabels": selector()},
                    "policyTypes": ["Ingress"],
                    "ingress": [{
                        "from": [from_namespace(ENVOY_GATEWAY.namespace), from_namespace(KUBE_PROMETHEUS_STACK.namespace)],
                        "ports": [{"protocol": "TCP", "port": STANDBY_PORT}],
                    }],
                },
            }),
        ),
    ]
}

fn deployment() -> Tree {
    let selector = || tree!({APP_LABEL: STANDBY_SERVICE});
    let probe = tree!({"httpGet": {"path": "/healthz", "port": STANDBY_PORT}, "periodSeconds": 10});
    tree!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": STANDBY_SERVICE, "namespace": GATEWAY_NAMESPACE},
        "spec": {
            // One replica: a restart loses only when requests were last held, which callers' retries renew.
            "replicas": 1,
            "selector": {"matchLabels": selector()},
            "template": {
                "metadata": {"labels": selector()},
                "spec": {
                    "automountServiceAccountToken": false,
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 2000, "runAsGroup": 2000,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "standby",
                        "image": FUNCTION_IMAGE,
                        "args": ["standby", "--address", format!("0.0.0.0:{STANDBY_PORT}")],
                        "ports": [{"name": "http", "containerPort": STANDBY_PORT}],
                        "readinessProbe": probe.clone(),
                        "livenessProbe": probe,
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                            "capabilities": {"drop": ["ALL"]}},
                    }],
                },
            },
        },
    })
}
