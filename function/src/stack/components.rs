//! The version-locked component table: what every cluster of a cloud runs, and what each serving stack adds.
//!
//! This is the one place versions live. A cluster's spec carries none; a release of Modelplane installs exactly
//! these, tested together, the way NVIDIA AI Cluster Runtime (AICR) publishes one recipe per cloud. Where AICR
//! has a pin that fits EKS's AL2023 NVIDIA AMI (driver on the host, no GPU Operator) we take it; each row says
//! why it is pinned where it is.

use crate::wire::tree::{Tree, fields, tree};

use crate::api::{
    inference_class::Provider,
    inference_cluster::{GPU_TAINT_EFFECT, GPU_TAINT_KEY, Taint},
};

/// Kubernetes minor version of the EKS clusters this table was validated with: DRA (`resource.k8s.io/v1`) is GA
/// from 1.34, and the scheduler's ResourceClaimTemplates use that API.
pub const EKS_KUBERNETES_VERSION: &str = "1.34";

/// Which cloud's table a cluster gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cloud {
    /// Provisioned by provider-eks: the common rows plus EKS's own (autoscaler, EFA).
    Eks,
    /// Provisioned by provider-upjet-gcp. GKE installs the NVIDIA driver and scales node pools itself.
    Gke,
    /// Provisioned by provider-upjet-azure. AKS scales node pools itself.
    Aks,
    /// Provisioned by provider-upjet-nebius. mk8s installs the drivers its preset names and scales node groups.
    Nebius,
    /// Provisioned by provider-upjet-vultr. VKE scales node pools itself.
    Vultr,
    /// A cluster Modelplane did not provision: only what any conformant GPU cluster needs.
    Generic,
}

impl Cloud {
    /// The cloud whose InferenceClasses a cluster here names; `None` for a cluster nobody provisions.
    pub fn provider(self) -> Option<Provider> {
        match self {
            Cloud::Eks => Some(Provider::Eks),
            Cloud::Gke => Some(Provider::Gke),
            Cloud::Aks => Some(Provider::Aks),
            Cloud::Nebius => Some(Provider::Nebius),
            Cloud::Vultr => Some(Provider::Vultr),
            Cloud::Generic => None,
        }
    }

    /// Where the NVIDIA driver lives on the cloud's GPU nodes, which the DRA driver's kubelet plugin loads it
    /// from: GKE installs it off the root filesystem, every other image at `/`.
    pub fn nvidia_driver_root(self) -> &'static str {
        match self {
            Cloud::Gke => "/home/kubernetes/bin/nvidia",
            Cloud::Eks | Cloud::Aks | Cloud::Nebius | Cloud::Vultr | Cloud::Generic => "/",
        }
    }
}

/// What Modelplane knows about a cluster when it renders chart values.
#[derive(Debug, Clone, Copy)]
pub struct ClusterFacts<'a> {
    /// The InferenceCluster's name, which is also the EKS cluster's name.
    pub name: &'a str,
    pub cloud: Cloud,
    pub region: Option<&'a str>,
    /// The cluster's taints, which every node of its pools carries.
    pub taints: &'a [Taint],
    /// The fleet's remote-write receiver for `modelplane_*` series, when the cluster names one and can write.
    pub remote_write: Option<RemoteWriteTarget<'a>>,
}

/// Where a cluster's Prometheus sends the `modelplane_*` series, and with what.
#[derive(Debug, Clone, Copy)]
pub struct RemoteWriteTarget<'a> {
    pub url: &'a str,
    /// The Secret beside the Prometheus holding `username` and `password`, once it holds them.
    pub basic_auth_secret: Option<&'a str>,
}

/// When a component is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Always,
    /// Only when some pool sets `fabric.type: EFA`.
    EfaPool,
    /// Only when a gateway on the cluster (its own, or a fleet gateway) takes its address from MetalLB.
    MetalLb,
}

/// How a component is installed.
#[derive(Debug, Clone, Copy)]
pub enum Install {
    /// A Helm chart, as a provider-helm Release.
    Chart {
        /// `https://...` chart repository or `oci://...` registry path.
        repository: &'static str,
        chart: &'static str,
        values: fn(&ClusterFacts) -> Tree,
    },
    /// Plain objects the stack builds (see `ServingStack::objects`), as provider-kubernetes Objects.
    Objects,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Component {
    /// Helm release name and the name reported in the InferenceCluster's status.
    pub name: &'static str,
    pub version: &'static str,
    /// Namespace on the workload cluster.
    pub namespace: &'static str,
    pub install: Install,
    pub needs: Needs,
    /// Why this component, and why this version.
    pub why: &'static str,
}

fn no_values(_: &ClusterFacts) -> Tree {
    tree!({})
}

/// Tolerations for a DaemonSet that must run on every GPU node: the GPU taint and each of the cluster's own
/// taints, exactly (a node agent that does not run there leaves the node without devices).
fn node_agent_tolerations(facts: &ClusterFacts) -> Tree {
    let mut tolerations =
        vec![tree!({"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT})];
    tolerations.extend(facts.taints.iter().map(|t| {
        if t.value.is_empty() {
            tree!({"key": &t.key, "operator": "Exists", "effect": t.effect.as_str()})
        } else {
            tree!({"key": &t.key, "operator": "Equal", "value": &t.value, "effect": t.effect.as_str()})
        }
    }));
    Tree::List(tolerations)
}

/// What a replica that claims devices cannot be placed without: the DRA driver publishing the GPUs, and the
/// node labels its kubelet plugin is scheduled by.
pub const DRA_COMPONENTS: [&str; 2] = [NODE_FEATURE_DISCOVERY.name, DRA_DRIVER_NVIDIA_GPU.name];

pub const CERT_MANAGER: Component = Component {
    name: "cert-manager",
    version: "v1.17.2",
    namespace: "cert-manager",
    install: Install::Chart {
        repository: "https://charts.jetstack.io",
        chart: "cert-manager",
        values: |_| tree!({"crds": {"enabled": true, "keep": false}}),
    },
    needs: Needs::Always,
    why: "webhook certificates for the gateway and scheduler controllers; AICR's EKS pin",
};

/// Installed where cert-manager runs: that namespace is its trust namespace (the chart's default), the only one
/// it reads source Secrets from, and where the cluster gateway's CA lives.
pub const TRUST_MANAGER: Component = Component {
    name: "trust-manager",
    version: "v0.25.0",
    namespace: CERT_MANAGER.namespace,
    install: Install::Chart {
        repository: "https://charts.jetstack.io",
        chart: "trust-manager",
        values: |_| tree!({"crds": {"enabled": true}}),
    },
    needs: Needs::Always,
    why: "publishes the cluster gateway CA's public certificate, and nothing of its key, for the fleet gateway to \
          trust; the release whose Bundle API (trust.cert-manager.io/v1alpha1) the tests validate against",
};

pub const NODE_FEATURE_DISCOVERY: Component = Component {
    name: "node-feature-discovery",
    version: "0.18.3",
    namespace: "node-feature-discovery",
    install: Install::Chart {
        repository: "oci://registry.k8s.io/nfd/charts",
        chart: "node-feature-discovery",
        values: |facts| tree!({"worker": {"tolerations": node_agent_tolerations(facts)}}),
    },
    needs: Needs::Always,
    why: "pci-10de node labels the DRA kubelet plugin is scheduled by; must tolerate the GPU taint to reach GPU nodes",
};

pub const DRA_DRIVER_NVIDIA_GPU: Component = Component {
    name: "dra-driver-nvidia-gpu",
    version: "0.4.1",
    namespace: "dra-driver-nvidia-gpu",
    install: Install::Chart {
        repository: "oci://registry.k8s.io/dra-driver-nvidia/charts",
        chart: "dra-driver-nvidia-gpu",
        values: |facts| {
            tree!({
                "nvidiaDriverRoot": facts.cloud.nvidia_driver_root(),
                "gpuResourcesEnabledOverride": true,
                "resources": {"gpus": {"enabled": true}, "computeDomains": {"enabled": false}},
                "kubeletPlugin": {"tolerations": node_agent_tolerations(facts)},
            })
        },
    },
    needs: Needs::Always,
    why: "publishes GPUs as DRA devices (the gpu.nvidia.com DeviceClass classes name); 0.4.1 is AICR's GA pin and \
          fixes 0.4.0's duplicate label; driver root where each cloud's image puts the driver; no ComputeDomains \
          (no multi-node NVLink on p5/g6)",
};

pub const AWS_DRANET: Component = Component {
    name: "aws-dranet",
    version: "1.0.0",
    namespace: "kube-system",
    install: Install::Chart {
        repository: "https://aws.github.io/eks-charts",
        chart: "aws-dranet",
        values: |facts| tree!({"tolerations": node_agent_tolerations(facts)}),
    },
    needs: Needs::EfaPool,
    why: "EFA interfaces as DRA devices next to the GPUs, AWS's recommendation from Kubernetes 1.34",
};

/// The autoscaler's service account, named so an EKS Pod Identity association can give it its IAM role.
pub const CLUSTER_AUTOSCALER_SERVICE_ACCOUNT: &str = "cluster-autoscaler";

pub const CLUSTER_AUTOSCALER: Component = Component {
    name: "cluster-autoscaler",
    version: "9.57.0",
    namespace: "kube-system",
    install: Install::Chart {
        repository: "https://kubernetes.github.io/autoscaler",
        chart: "cluster-autoscaler",
        values: |facts| {
            tree!({
                "autoDiscovery": {"clusterName": facts.name},
                "rbac": {"serviceAccount": {"name": CLUSTER_AUTOSCALER_SERVICE_ACCOUNT}},
                "awsRegion": facts.region.unwrap_or_default(),
                "extraArgs": {"balance-similar-node-groups": true},
            })
        },
    },
    needs: Needs::Always,
    why: "scales the managed node groups between min and max; Karpenter and Auto Mode cannot provision for DRA claims",
};

pub const KUBE_PROMETHEUS_STACK: Component = Component {
    name: "kube-prometheus-stack",
    version: "72.6.2",
    namespace: "monitoring",
    install: Install::Chart {
        repository: "https://prometheus-community.github.io/helm-charts",
        chart: "kube-prometheus-stack",
        values: |facts| {
            let mut prometheus_spec = fields!({
                "podMonitorSelectorNilUsesHelmValues": false,
                "serviceMonitorSelectorNilUsesHelmValues": false,
                "ruleSelectorNilUsesHelmValues": false,
            });
            if let Some(target) = facts.remote_write {
                // The recorded vocabulary only: engines' raw series and everything else stay on the cluster.
                let mut write = fields!({
                    "url": target.url,
                    "writeRelabelConfigs": [
                        {"sourceLabels": ["__name__"], "regex": "modelplane_.*", "action": "keep"},
                    ],
                });
                if let Some(secret) = target.basic_auth_secret {
                    write.insert(
                        "basicAuth",
                        tree!({
                            "username": {"name": secret, "key": "username"},
                            "password": {"name": secret, "key": "password"},
                        }),
                    );
                }
                prometheus_spec.insert("remoteWrite", tree!([write]));
            }
            tree!({
                "fullnameOverride": "prometheus",
                "grafana": {"enabled": false},
                "alertmanager": {"enabled": false},
                "prometheus": {"prometheusSpec": prometheus_spec},
            })
        },
    },
    needs: Needs::Always,
    why: "metrics for the endpoint picker and autoscaling; Modelplane's validated values (AICR's 82.x is a major bump)",
};

/// The node label node-feature-discovery puts on every node with an NVIDIA PCI device (vendor 0x10de).
const NVIDIA_PCI_NODE_LABEL: &str = "feature.node.kubernetes.io/pci-10de.present";

/// GPU utilisation and memory per device, attributed to the pod holding it, for the `modelplane_gpu_*` series
/// ([`crate::workload::engine_metrics`]). EKS only: its AL2023 NVIDIA AMI runs containers under the NVIDIA runtime, which
/// gives the exporter every GPU of its node (its image asks for all); the other clouds' images do not, and GKE
/// collects DCGM itself.
pub const DCGM_EXPORTER: Component = Component {
    name: "dcgm-exporter",
    version: "4.8.2",
    namespace: KUBE_PROMETHEUS_STACK.namespace,
    install: Install::Chart {
        repository: "https://nvidia.github.io/dcgm-exporter/helm-charts",
        chart: "dcgm-exporter",
        values: |facts| {
            tree!({
                // GPUs are allocated through DRA: the exporter resolves a claim's devices from the node's
                // ResourceSlices and the kubelet's PodResources API (on by default from Kubernetes 1.34) to
                // label each device's series with the pod, namespace and container that hold it.
                "kubernetesDRA": {"enabled": true},
                "nodeSelector": {NVIDIA_PCI_NODE_LABEL: "true"},
                "tolerations": node_agent_tolerations(facts),
                // The holder's `pod` and `namespace` win over the exporter's own target labels.
                "serviceMonitor": {"enabled": true, "honorLabels": true},
            })
        },
    },
    needs: Needs::Always,
    why: "per-pod GPU utilisation and memory on DRA-allocated GPUs; 4.8.2 is the chart whose `kubernetesDRA` \
          attributes them, scraped by the kube-prometheus-stack above",
};

/// The recording rules that give every engine's figures one name ([`crate::workload::engine_metrics`]), loaded by the
/// Prometheus above (its values select PrometheusRules from every namespace).
pub const ENGINE_METRICS: Component = Component {
    name: "engine-metrics",
    version: KUBE_PROMETHEUS_STACK.version,
    namespace: KUBE_PROMETHEUS_STACK.namespace,
    install: Install::Objects,
    needs: Needs::Always,
    why: "modelplane_* series from vLLM's, SGLang's and TensorRT-LLM's metrics, for status figures and autoscaling",
};

pub const ENVOY_GATEWAY: Component = Component {
    name: "envoy-gateway",
    version: "v1.8.1",
    namespace: "envoy-gateway-system",
    install: Install::Chart {
        repository: "oci://docker.io/envoyproxy",
        chart: "gateway-helm",
        values: |_| {
            tree!({"config": {"envoyGateway": {
                "extensionApis": {"enableBackend": true},
                "extensionManager": {
                    "hooks": {"xdsTranslator": {"post": ["HTTPListener", "Translation"]}},
                    "service": {"fqdn": {"hostname": "ai-gateway-controller.envoy-ai-gateway-system.svc.cluster.local",
                                         "port": 1063}},
                    "backendResources": [{"group": "inference.networking.k8s.io", "kind": "InferencePool",
                                          "version": "v1"}],
                },
            }}})
        },
    },
    needs: Needs::Always,
    why: "fronts every replica; InferencePool backends through the AI gateway's extension server",
};

/// Announces a gateway's address from a pool its spec names, on clusters without a cloud load balancer (kind, bare
/// metal, K3s). The pools themselves belong to the gateways ([`crate::workload::metallb`]).
pub const METALLB: Component = Component {
    name: "metallb",
    version: "0.16.1",
    namespace: "metallb-system",
    install: Install::Chart {
        repository: "https://metallb.github.io/metallb",
        chart: "metallb",
        values: no_values,
    },
    needs: Needs::MetalLb,
    why: "a LoadBalancer address for a gateway where no cloud controller gives one; 0.16.1 is the release whose \
          IPAddressPool CRD the tests vendor, and it reads serviceAllocation, which pins a pool to one gateway",
};

pub const AI_GATEWAY_CRDS: Component = Component {
    name: "ai-gateway-crds",
    version: "v0.7.0",
    namespace: "envoy-ai-gateway-system",
    install: Install::Chart {
        repository: "oci://docker.io/envoyproxy",
        chart: "ai-gateway-crds-helm",
        values: no_values,
    },
    needs: Needs::Always,
    why: "the AI gateway's APIs, released in lockstep with its controller",
};

pub const AI_GATEWAY: Component = Component {
    name: "ai-gateway",
    version: "v0.7.0",
    namespace: "envoy-ai-gateway-system",
    install: Install::Chart {
        repository: "oci://docker.io/envoyproxy",
        chart: "ai-gateway-helm",
        values: no_values,
    },
    needs: Needs::Always,
    why: "OpenAI-compatible routing onto InferencePools; the version Envoy Gateway v1.8 is tested with",
};

pub const INFERENCE_EXTENSION_CRDS: Component = Component {
    name: "inference-extension-crds",
    version: "v1.0.1",
    namespace: "",
    install: Install::Objects,
    needs: Needs::Always,
    why: "InferencePool v1, the backend every replica's route names (and the InferenceObjective the picker \
          watches); the release Envoy Gateway v1.8's InferencePool support and the v0.9 picker are built on",
};

pub const CLUSTER_GATEWAY: Component = Component {
    name: "cluster-gateway",
    version: ENVOY_GATEWAY.version,
    namespace: crate::workload::well_known::GATEWAY_NAMESPACE,
    install: Install::Objects,
    needs: Needs::Always,
    why: "the one Gateway every replica's route attaches to, served by this table's Envoy Gateway",
};

/// The plain objects of the common `Install::Objects` rows, keyed by component name.
pub fn common_objects() -> Vec<(&'static str, Vec<super::StackObject>)> {
    vec![
        (
            INFERENCE_EXTENSION_CRDS.name,
            crate::workload::cluster_gateway::inference_extension_crds(),
        ),
        (
            CLUSTER_GATEWAY.name,
            crate::workload::cluster_gateway::cluster_gateway(),
        ),
        (
            ENGINE_METRICS.name,
            vec![super::StackObject::created(
                "rules",
                crate::workload::engine_metrics::recording_rules(ENGINE_METRICS.namespace),
            )],
        ),
    ]
}

/// The rows every cloud's table has, in install order, with `$extra` (a cloud's own drivers) after the GPU driver
/// and `$monitoring` (its own exporters) after the Prometheus that scrapes them.
macro_rules! common_rows {
    ($($extra:expr),*; $($monitoring:expr),*) => {
        &[
            CERT_MANAGER,
            TRUST_MANAGER,
            NODE_FEATURE_DISCOVERY,
            DRA_DRIVER_NVIDIA_GPU,
            $($extra,)*
            KUBE_PROMETHEUS_STACK,
            ENGINE_METRICS,
            $($monitoring,)*
            METALLB,
            ENVOY_GATEWAY,
            AI_GATEWAY_CRDS,
            AI_GATEWAY,
            INFERENCE_EXTENSION_CRDS,
            CLUSTER_GATEWAY,
        ]
    };
}

/// What every EKS cluster runs, whatever its stack: the common rows, plus the EFA network driver, the cluster
/// autoscaler and the GPU exporter.
pub const EKS: &[Component] = common_rows!(AWS_DRANET, CLUSTER_AUTOSCALER; DCGM_EXPORTER);

/// What a cluster Modelplane did not provision runs, and what GKE, AKS, Nebius and Vultr clusters run: no
/// autoscaler of ours (each of those clouds scales its node pools between the min and max the pools set) and no
/// fabric driver.
pub const GENERIC: &[Component] = common_rows!(;);

/// The common rows of a cloud's table.
pub fn common(cloud: Cloud) -> &'static [Component] {
    match cloud {
        Cloud::Eks => EKS,
        Cloud::Gke | Cloud::Aks | Cloud::Nebius | Cloud::Vultr | Cloud::Generic => GENERIC,
    }
}

// Stack rows. They are the same on every cloud, so they live once, here, next to the common rows they are
// tested with.

pub const LEADER_WORKER_SET: Component = Component {
    name: "lws",
    version: "v0.8.0",
    namespace: "lws-system",
    install: Install::Chart {
        repository: "oci://registry.k8s.io/lws/charts",
        chart: "lws",
        values: no_values,
    },
    needs: Needs::Always,
    why: "Standard's multi-node engines; the release Modelplane validated on EKS",
};

pub const GROVE: Component = Component {
    name: "grove",
    version: "v0.1.0-alpha.6",
    namespace: "grove-system",
    install: Install::Chart {
        repository: "oci://ghcr.io/ai-dynamo/grove",
        chart: "grove-charts",
        values: no_values,
    },
    needs: Needs::Always,
    why: "Dynamo's PodCliqueSet gangs; the release validated with the leader address Modelplane derives itself",
};

pub const KAI_SCHEDULER: Component = Component {
    name: "kai-scheduler",
    version: "v0.16.8",
    namespace: "kai-scheduler",
    install: Install::Chart {
        repository: "oci://ghcr.io/kai-scheduler/kai-scheduler",
        chart: "kai-scheduler",
        // No GPU Operator, so no nvidia RuntimeClass: GPU pods keep the default runtime (as AICR sets it).
        values: |_| tree!({"admission": {"gpuPodRuntimeClassName": ""}}),
    },
    needs: Needs::Always,
    why: "all-or-nothing gang binding for Grove; the first release under the kai-scheduler organisation",
};

pub const KAI_QUEUES: Component = Component {
    name: "kai-queues",
    version: KAI_SCHEDULER.version,
    namespace: "",
    install: Install::Objects,
    needs: Needs::Always,
    why: "the queue Modelplane submits engines to, under its own root; versioned with the scheduler's Queue API",
};

pub const MODEL_EXPRESS: Component = Component {
    name: "modelexpress-server",
    version: super::model_express::VERSION,
    namespace: crate::workload::well_known::MODEL_EXPRESS_NAMESPACE,
    install: Install::Objects,
    needs: Needs::Always,
    why: "brokers GPU-to-GPU weight transfer between replicas; the release whose CRDs the server's Kubernetes \
          backend writes",
};
