//! The objects one placed replica needs on its cluster, each wrapped in a provider-kubernetes `Object`.

use std::collections::BTreeMap;

use crate::compose::ComposedObject;
use crate::wire::tree::{Tree, tree};

use crate::{
    api::{
        ledger, model_cache,
        model_deployment::{Engine, ModelDeploymentSpec, Role},
    },
    compose::remote,
    schedule::{self, EnginePlacement, Placement, cluster},
    stack::{CacheUse, EngineWorkload, ServingStack, serving_stack},
    workload::{
        engine_metrics, names::child_name, pod, pod_report, replica_routing, well_known::SERVING_LABEL,
    },
};

pub use crate::api::ledger::{CLUSTER_ANNOTATION, REPLICA_ANNOTATION};
pub const ENGINE_ANNOTATION: &str = "modelplane.ai/engine";
pub const POOL_ANNOTATION: &str = "modelplane.ai/pool";

/// Kubernetes' limit for most object names (DNS subdomain).
const NAME_LIMIT: usize = 253;

/// One object to compose: its composition resource name, the Object, and whether it is readiness-bearing.
pub struct Desired {
    pub key: String,
    pub object: ComposedObject,
    /// Whether the replica serves only once this object is ready. Metrics collection is not serving: a cluster
    /// without Prometheus' CRDs (an Existing one that provides its own components) still serves.
    pub gates_ready: bool,
}

/// Where composed objects go and what they are called.
pub struct ReplicaContext<'a> {
    pub xr_name: &'a str,
    pub xr_namespace: &'a str,
    pub replica: u32,
    pub spec: &'a ModelDeploymentSpec,
    pub cache: Option<&'a CacheUse<'a>>,
    /// The replica's routing objects are observed on the cluster it is placed on: they stay composed.
    pub routed: bool,
}

/// The composed-resource key of a replica's engine workload. It names the cluster, so a replica that moves
/// gets new Objects (pointed at the new cluster) instead of re-pointing the old ones, which would leave the old
/// cluster's workload running.
pub fn engine_key(replica: u32, cluster: &str, engine: &str) -> String {
    format!("replica-{replica}-{cluster}-{engine}")
}

fn namespace_key(replica: u32, cluster: &str) -> String {
    format!("replica-{replica}-{cluster}-namespace")
}

/// Every Object for one replica placed at `placement`.
pub fn objects(ctx: &ReplicaContext, placement: &Placement) -> Vec<Desired> {
    let stack = serving_stack(placement.cluster.status.stack);
    let mut out = vec![namespace(ctx, placement)];
    for (engine, engine_placement) in ctx.spec.template.spec.engines.iter().zip(&placement.engines) {
        out.extend(engine_objects(ctx, placement, stack, engine, engine_placement));
    }
    // A replica is routed only where the cluster gateway has an address (a cluster that provides its own
    // components may have no gateway, or no InferencePool API, to route with) and requires a client
    // certificate, unless its routing already runs there.
    if super::endpoint::routable(placement.cluster) || ctx.routed {
        out.extend(routing_objects(ctx, placement));
    }
    out
}

/// What the composed-resource keys of replica `replica`'s routing objects on `cluster` start with.
pub fn routing_key_prefix(replica: u32, cluster: &str) -> String {
    format!("routing-{replica}-{cluster}-")
}

/// The replica's InferencePool, endpoint picker and HTTPRoute on its cluster. They are part of the replica:
/// it is Ready (and gets its endpoint) only once its picker is Available too.
fn routing_objects(ctx: &ReplicaContext, placement: &Placement) -> Vec<Desired> {
    let cluster = &placement.cluster.metadata.name;
    let serving_name = replica_routing::serving_name(ctx.xr_name, ctx.replica);
    let key_prefix = routing_key_prefix(ctx.replica, cluster);
    replica_routing::replica_objects(ctx.xr_namespace, &serving_name, ctx.spec)
        .into_iter()
        .map(|o| {
            let metadata = tree!({
                "namespace": ctx.xr_namespace,
                "annotations": {REPLICA_ANNOTATION: ctx.replica.to_string(), CLUSTER_ANNOTATION: cluster},
            });
            let pc = &placement.cluster.status.provider_config_name;
            let ready_query = o.available.then_some(crate::stack::AVAILABLE_QUERY);
            let object = remote::Object::new(o.manifest, pc)
                .metadata(metadata)
                .ready_on(ready_query)
                .build();
            Desired {
                key: [key_prefix.as_str(), o.suffix].concat(),
                object: object.into(),
                gates_ready: true,
            }
        })
        .collect()
}

fn engine_objects(
    ctx: &ReplicaContext,
    placement: &Placement,
    stack: &dyn ServingStack,
    engine: &Engine,
    at: &EnginePlacement,
) -> Vec<Desired> {
    let replica = ctx.replica.to_string();
    let gang = engine.members.iter().any(|m| m.role == Role::Leader);
    let budget = if gang {
        stack.workload_name_budget(engine)
    } else {
        NAME_LIMIT.min(63)
    };
    let name = child_name(&[ctx.xr_name, &replica, &engine.name], budget);
    let claim_templates: Vec<Option<String>> = engine
        .members
        .iter()
        .zip(&at.binding.members)
        .map(|(member, devices)| {
            devices
                .iter()
                .any(Option::is_some)
                .then(|| child_name(&[&name, member.role.as_str()], NAME_LIMIT))
        })
        .collect();
    let w = EngineWorkload {
        name: name.clone(),
        serving_name: replica_routing::serving_name(ctx.xr_name, ctx.replica),
        namespace: ctx.xr_namespace,
        engine,
        phase: engine.phase.filter(|_| ctx.spec.template.spec.disaggregated()),
        cluster: placement.cluster,
        pool: at.pool,
        metadata: &ctx.spec.template.metadata,
        claim_templates: claim_templates.clone(),
        cache_pvc: ctx.cache.map(|c| model_cache::pvc_name(c.name)),
        cache: ctx.cache,
        additions: stack.engine_additions(placement.cluster, at.pool, ctx.cache),
        tolerations: pod::tolerations(
            cluster::relied_on(&ctx.spec.template.spec.tolerations, placement.cluster)
                .map(cluster::pod_toleration),
        ),
    };
    let key = engine_key(ctx.replica, &placement.cluster.metadata.name, &engine.name);
    let wrapped = |manifest: Tree, readiness: Option<&'static str>| {
        wrap(ctx, placement, engine, at, manifest)
            .ready_on(readiness)
            .build()
    };
    let (workload, ready_query) = if gang {
        (stack.gang_workload(&w), stack.gang_ready_query())
    } else {
        (pod::deployment(&w), crate::stack::AVAILABLE_QUERY)
    };
    let mut out = vec![Desired {
        key: key.clone(),
        object: wrapped(workload, Some(ready_query)).into(),
        gates_ready: true,
    }];
    for (m, template) in claim_templates.iter().enumerate() {
        if let Some(template) = template {
            let role = engine.members[m].role.as_str();
            let rct = pod::resource_claim_template(&w, m, template, &at.binding.members[m]);
            out.push(Desired {
                key: format!("{key}-{role}-claims"),
                object: wrapped(rct, None).into(),
                gates_ready: true,
            });
        }
    }
    // Why the workload's pods are not ready, as the cluster's pod reporter wrote it: read, never written.
    let report = tree!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": pod_report::report_name(ctx.xr_namespace, &name), "namespace": pod_report::REPORT_NAMESPACE,
    }});
    out.push(Desired {
        key: report_key(&key),
        object: wrap(ctx, placement, engine, at, report)
            .observe_only()
            .build()
            .into(),
        gates_ready: false,
    });
    let service = pod::service(&w, &child_name(&[&name, "serve"], 63));
    out.push(Desired {
        key: format!("{key}-service"),
        object: wrapped(service, None).into(),
        gates_ready: true,
    });
    let collect = ctx.spec.template.spec.observability.metrics.enabled;
    if let Some(port) = pod::metrics_port(&w).filter(|_| collect) {
        let labels = engine_metrics::ScrapeLabels {
            cluster: &placement.cluster.metadata.name,
            deployment: ctx.xr_name,
            replica: &replica,
        };
        let monitor = engine_metrics::pod_monitor(
            &child_name(&[&name, "metrics"], 63),
            ctx.xr_namespace,
            tree!({SERVING_LABEL: &name}),
            port,
            &labels,
        );
        out.push(Desired {
            key: format!("{key}-metrics"),
            object: wrapped(monitor, None).into(),
            gates_ready: false,
        });
    }
    out
}

/// The composed-resource key of the pod report of the engine workload composed under `engine_key`.
pub fn report_key(engine_key: &str) -> String {
    format!("{engine_key}-pods")
}

/// Wraps a manifest in a provider-kubernetes Object that reaches the placement's cluster, annotated with the
/// placement it belongs to.
fn wrap(
    ctx: &ReplicaContext,
    placement: &Placement,
    engine: &Engine,
    at: &EnginePlacement,
    manifest: Tree,
) -> remote::Object {
    let metadata = tree!({
        "namespace": ctx.xr_namespace,
        "annotations": {
            REPLICA_ANNOTATION: ctx.replica.to_string(),
            CLUSTER_ANNOTATION: &placement.cluster.metadata.name,
            ENGINE_ANNOTATION: &engine.name,
            POOL_ANNOTATION: &at.pool.name,
        },
    });
    remote::Object::new(manifest, &placement.cluster.status.provider_config_name).metadata(metadata)
}

/// Nodes the replica's engines hold at `placement`, by pool.
fn held_nodes(spec: &ModelDeploymentSpec, placement: &Placement) -> BTreeMap<String, u64> {
    let mut nodes = BTreeMap::new();
    for (engine, at) in spec.template.spec.engines.iter().zip(&placement.engines) {
        let held = nodes.entry(at.pool.name.clone()).or_insert(0u64);
        *held = held.saturating_add(schedule::engine_nodes(engine));
    }
    nodes
}

/// The workload namespace on the cluster, named like the deployment's own so that tenancy carries over and a
/// ModelCache's claim is found by name. It is never deleted: other deployments and caches share it. It is also
/// the replica's entry in its cluster's placement ledger (docs/scheduling.md), which exists as soon as the
/// replica is placed, even while it waits for its cache.
pub fn namespace(ctx: &ReplicaContext, placement: &Placement) -> Desired {
    let cluster = &placement.cluster.metadata.name;
    let metadata = tree!({
        "namespace": ctx.xr_namespace,
        "labels": {ledger::CLUSTER_LABEL: cluster},
        "annotations": {
            REPLICA_ANNOTATION: ctx.replica.to_string(),
            CLUSTER_ANNOTATION: cluster,
            ledger::DEPLOYMENT_ANNOTATION: ctx.xr_name,
            ledger::NODES_ANNOTATION: ledger::format_nodes(&held_nodes(ctx.spec, placement)),
        },
    });
    let object = remote::namespace(ctx.xr_namespace, &placement.cluster.status.provider_config_name)
        .metadata(metadata)
        .build();
    Desired {
        key: namespace_key(ctx.replica, &placement.cluster.metadata.name),
        object: object.into(),
        gates_ready: true,
    }
}
