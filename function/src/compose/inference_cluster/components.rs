//! The workload-cluster half: provider-kubernetes and provider-helm `ClusterProviderConfig`s built from the
//! cluster's kubeconfig secret, then one provider-helm `Release` per chart and one provider-kubernetes `Object`
//! per plain object of the cluster's component list.

use crate::compose::shared::CONTROL_NAMESPACE;
use crate::{
    api::inference_cluster::{Components, FabricType, InferenceClusterSpec, Source},
    compose::{
        Output,
        crossplane::{self, Chart},
        remote,
    },
    stack::{Cloud, ClusterFacts, Component, Install, Lifecycle, Needs, Readiness, ServingStack, components},
    wire::tree::{Fields, Tree, fields},
};

pub const KEY_KUBERNETES_PROVIDER_CONFIG: &str = "providerconfig-kubernetes";
pub const KEY_HELM_PROVIDER_CONFIG: &str = "providerconfig-helm";
/// provider-kubernetes reports a wrapped Deployment ready once this holds on the remote object.
const DEPLOYMENT_AVAILABLE: &str =
    "object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')";

/// A component the cluster gets, and the composed resources that install it.
#[derive(Debug, Clone)]
pub struct Planned {
    pub component: Component,
    pub keys: Vec<String>,
}

/// The cluster's component list: its cloud's common rows (those it needs), then its stack's rows. Empty for an
/// existing cluster that provides its own. `metallb`: a gateway on the cluster takes its address from MetalLB.
pub fn plan(
    cloud: Cloud,
    stack: &dyn ServingStack,
    spec: &InferenceClusterSpec,
    metallb: bool,
) -> Vec<Planned> {
    let provided = spec
        .cluster
        .existing
        .as_ref()
        .is_some_and(|e| spec.cluster.source == Source::Existing && e.components == Components::Provided);
    if provided {
        return Vec::new();
    }
    let efa = spec.node_pools.iter().any(|p| p.fabric.type_ == FabricType::Efa);
    components::common(cloud)
        .iter()
        .chain(stack.components())
        .filter(|c| match c.needs {
            Needs::Always => true,
            Needs::EfaPool => efa,
            Needs::MetalLb => metallb,
        })
        .map(|component| Planned {
            component: *component,
            keys: Vec::new(),
        })
        .collect()
}

/// Whether any chart or object of the component list is already observed on the cluster.
pub fn any_installed(req: &crate::proto::v1::RunFunctionRequest) -> bool {
    req.observed.as_ref().is_some_and(|o| {
        o.resources
            .keys()
            .any(|k| k.starts_with("release-") || k.starts_with("object-"))
    })
}

/// The ClusterProviderConfig name (the same for provider-kubernetes and provider-helm) that reaches a cluster.
pub fn provider_config_name(cluster: &str) -> String {
    cluster.to_owned()
}

/// The provider-kubernetes and provider-helm ClusterProviderConfigs that reach the cluster, with `credentials` as
/// their `spec`.
pub fn compose_provider_configs(out: &mut Output, name: &str, credentials: Fields) {
    for (key, api_version) in [
        (KEY_KUBERNETES_PROVIDER_CONFIG, remote::OBJECT_API_VERSION),
        (KEY_HELM_PROVIDER_CONFIG, crossplane::HELM_API_VERSION),
    ] {
        let config = fields!({
            "apiVersion": api_version, "kind": "ClusterProviderConfig",
            "metadata": {"name": provider_config_name(name)},
            "spec": credentials.clone(),
        });
        out.compose(key, config, false);
    }
}

pub fn compose_components(
    out: &mut Output,
    name: &str,
    facts: &ClusterFacts,
    stack: &dyn ServingStack,
    plan: &mut [Planned],
) {
    let mut objects = stack.objects();
    objects.extend(components::common_objects());
    for planned in plan.iter_mut() {
        let component = planned.component;
        match component.install {
            Install::Chart {
                repository,
                chart,
                values,
            } => {
                let key = format!("release-{}", component.name);
                let release = release(name, &component, repository, chart, values(facts));
                out.compose(&key, release, false);
                planned.keys.push(key);
            }
            Install::Objects => {
                let owned = objects.iter().filter(|(owner, _)| *owner == component.name);
                for object in owned.flat_map(|(_, objects)| objects) {
                    let key = format!("object-{}-{}", component.name, object.suffix);
                    let wrapped = wrap(name, &format!("{}-{}", component.name, object.suffix), object);
                    out.compose(&key, wrapped, false);
                    planned.keys.push(key);
                }
            }
        }
    }
}

/// The key of one of the cluster gateway's objects, as the component's own are keyed.
pub fn gateway_object_key(suffix: &str) -> String {
    format!("object-{}-{suffix}", components::CLUSTER_GATEWAY.name)
}

/// Composes an object of the cluster gateway that the stack's list cannot hold, because it depends on other
/// composites (the fleet client CAs it requires): ready once created, deleted with the cluster.
pub fn compose_gateway_object(out: &mut Output, cluster: &str, suffix: &'static str, manifest: Tree) {
    let object = crate::stack::StackObject::created(suffix, manifest);
    let wrapped = wrap(
        cluster,
        &format!("{}-{suffix}", components::CLUSTER_GATEWAY.name),
        &object,
    );
    out.compose(gateway_object_key(suffix), wrapped, false);
}

fn release(cluster: &str, component: &Component, repository: &str, chart: &str, values: Tree) -> Fields {
    let chart = Chart {
        name: chart,
        repository,
        version: component.version,
    };
    let config = provider_config_name(cluster);
    crossplane::release(
        cluster,
        component.name,
        &config,
        chart,
        component.namespace,
        values,
    )
}

/// An Object on the cluster for a composed resource of the cluster-scoped InferenceCluster: it lives in
/// Modelplane's namespace on the control plane, as `<cluster>-<part>`, so many clusters never collide.
pub fn cluster_object(cluster: &str, part: &str, manifest: impl Into<Tree>) -> remote::Object {
    remote::Object::new(manifest, &provider_config_name(cluster))
        .named(format!("{cluster}-{part}"), CONTROL_NAMESPACE)
}

/// Wraps a manifest in a provider-kubernetes Object that reports the remote object's readiness.
fn wrap(cluster: &str, part: &str, object: &crate::stack::StackObject) -> Fields {
    let wrapped = cluster_object(cluster, part, object.manifest.clone());
    let wrapped = match object.readiness {
        Readiness::Created => wrapped.ready_once_created(),
        Readiness::Available => wrapped.ready_when(DEPLOYMENT_AVAILABLE),
        Readiness::Holds(query) => wrapped.ready_when(query),
    };
    let wrapped = match object.lifecycle {
        Lifecycle::Owned => wrapped,
        Lifecycle::Kept => wrapped.keep_on_delete(),
        Lifecycle::Observed => wrapped.observe_only(),
    };
    wrapped.build()
}
