//! What both stacks build the same way: the engine pod spec, the Standalone Deployment, the DRA claim
//! templates and the Service in front of the serving pods.
//!
//! The user's container is copied as written. Modelplane only adds env ahead of the user's (so the user's env
//! and command can refer to it), mounts, a DRA claim reference and probes; it never touches image, command or
//! args. Under PrefillDecode serving the decode engine's serving pod also gets the disaggregation sidecar.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::wire::tree::{Fields, Text, Tree, tree};

use super::{
    disaggregation,
    well_known::{INFERENCE_POOL_LABEL, ROLE_LABEL, SERVING_LABEL, SERVING_PORT, WORKLOAD_LABEL},
};
use crate::api::{
    inference_class::Device,
    inference_cluster::{GPU_TAINT_EFFECT, GPU_TAINT_KEY, POOL_LABEL},
    model_cache,
    model_deployment::{Member, Phase, Role},
};
use crate::stack::EngineWorkload;

/// The pod's one claim, covering every device request of its member.
const CLAIM_NAME: &str = "devices";
/// Engines share tensors between processes through /dev/shm; the container default of 64 MiB is too small.
const SHM_VOLUME: &str = "dshm";
const CACHE_VOLUME: &str = "model-cache";
/// The engine's health endpoint (vLLM and SGLang serve it on the serving port), which answers 200 only once
/// the weights are loaded and the server takes requests.
const HEALTH_PATH: &str = "/health";
const PROBE_PERIOD_SECONDS: u64 = 10;
/// Starting beyond loading weights: CUDA graph capture, compilation, the server coming up.
const STARTUP_BASE_SECONDS: u64 = 600;
/// Loading from a shared file system at about 256 MiB/s: 4 s per GiB of weights.
const STARTUP_SECONDS_PER_GIB: u64 = 4;
/// When the weights' size is unknown (no ModelCache, or one that states no size): an hour.
const STARTUP_UNKNOWN_SECONDS: u64 = 3600;

/// Pod labels for `role`: the user's, then ours (ours win, and the XRD keeps users out of our prefix).
pub fn pod_labels(w: &EngineWorkload, member: &Member) -> Fields {
    let mut labels: BTreeMap<&str, &str> = BTreeMap::new();
    for (k, v) in w.metadata.labels.iter().chain(&member.template.metadata.labels) {
        labels.insert(k, v);
    }
    labels.insert(WORKLOAD_LABEL, &w.name);
    if serves(member) {
        labels.insert(SERVING_LABEL, &w.name);
        labels.insert(INFERENCE_POOL_LABEL, &w.serving_name);
        if let Some(phase) = w.phase {
            labels.insert(ROLE_LABEL, disaggregation::role(phase));
        }
    }
    string_fields(labels)
}

/// A map of strings as fields. Built from the map's entries, each key once, rather than by [`Fields::insert`],
/// which looks for the key first: a user's thousand annotations cost a thousand steps, not half a million.
fn string_fields(map: BTreeMap<&str, &str>) -> Fields {
    Fields::from_entries(
        map.into_iter()
            .map(|(k, v)| (Text::Owned(k.to_owned()), Tree::from(v)))
            .collect(),
    )
}

/// Whether `member`'s pods answer requests: a Standalone pod, or a gang's leader (its workers hold the rest of
/// the model and answer none).
fn serves(member: &Member) -> bool {
    matches!(member.role, Role::Standalone | Role::Leader)
}

pub fn pod_annotations(w: &EngineWorkload, member: &Member) -> Fields {
    let mut annotations: BTreeMap<&str, &str> = BTreeMap::new();
    for (k, v) in w
        .metadata
        .annotations
        .iter()
        .chain(&member.template.metadata.annotations)
    {
        annotations.insert(k, v);
    }
    string_fields(annotations)
}

/// A pod template for one member: its labels and annotations, and [`pod_spec`] with `env`.
pub fn pod_template(w: &EngineWorkload, m: usize, env: Vec<Tree>) -> Tree {
    let member = &w.engine.members[m];
    tree!({
        "metadata": {"labels": pod_labels(w, member), "annotations": pod_annotations(w, member)},
        "spec": pod_spec(w, m, env),
    })
}

/// The pod spec for one member: its engine container with `env` ahead of the user's, pinned to the pool.
pub fn pod_spec(w: &EngineWorkload, m: usize, env: Vec<Tree>) -> Fields {
    let member = &w.engine.members[m];
    let claim = w.claim_templates[m].as_deref();
    let mut volumes = vec![tree!({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}})];
    let mut mounts = vec![tree!({"name": SHM_VOLUME, "mountPath": "/dev/shm"})];
    let mut env = env;
    env.extend(w.additions.env.iter().cloned());
    if w.phase.is_some() {
        env.extend(disaggregation::nixl_env());
    }
    if let Some(pvc) = &w.cache_pvc {
        volumes.push(tree!({"name": CACHE_VOLUME, "persistentVolumeClaim": {"claimName": pvc}}));
        mounts.push(tree!({"name": CACHE_VOLUME, "mountPath": model_cache::MOUNT_PATH}));
        env.push(tree!({"name": "HF_HUB_CACHE", "value": model_cache::MOUNT_PATH}));
    }
    // Behind the sidecar, a decode engine listens on a port of its own; its probes follow it there.
    let sidecar_for = |c: &Map<String, Value>| {
        (serves(member) && w.phase == Some(Phase::Decode)).then(|| disaggregation::decode_engine_port(c))
    };
    let mut containers = Vec::new();
    for (i, container) in member.template.spec.containers.iter().enumerate() {
        let engine_port = sidecar_for(container);
        let port = engine_port.unwrap_or(SERVING_PORT);
        let ours = Additions {
            env: &env,
            mounts: &mounts,
            claims: claim.is_some(),
            capabilities: &w.additions.capabilities,
            probes: serves(member).then(|| Probes {
                startup_seconds: startup_seconds(w.cache.and_then(|c| c.size_gib)),
                port,
            }),
            // The engine is the first container; its port is declared so its metrics can be scraped by number.
            declared_port: (serves(member) && i == 0).then_some(port),
        };
        containers.push(Tree::Map(engine_container(container, &ours)));
        containers.extend(engine_port.map(disaggregation::sidecar));
    }
    let mut spec = Fields::with_capacity(8);
    spec.insert("nodeSelector", tree!({POOL_LABEL: &w.pool.name}));
    spec.insert("containers", containers);
    spec.insert("volumes", volumes);
    spec.insert("affinity", node_to_itself());
    spec.insert("tolerations", w.tolerations.clone());
    if let Some(template) = claim {
        spec.insert(
            "resourceClaims",
            tree!([{"name": CLAIM_NAME, "resourceClaimTemplateName": template}]),
        );
    }
    if !member.template.spec.image_pull_secrets.is_empty() {
        let secrets: Vec<Tree> = member
            .template
            .spec
            .image_pull_secrets
            .iter()
            .map(Tree::from)
            .collect();
        spec.insert("imagePullSecrets", secrets);
    }
    spec
}

/// The node label that tells nodes apart: one engine pod per value.
const NODE_TOPOLOGY_KEY: &str = "kubernetes.io/hostname";

/// A node to the engine pod alone: no other engine pod of any deployment, in any namespace, shares it. The fleet
/// scheduler counts a node per pod in each pool (`schedule::engine_nodes`, and the ledger other deployments read),
/// so kube-scheduler must not pack two onto one node's spare devices: the count would then say a pool is full
/// while its nodes stand idle, and where the fleet scheduler refused a replica for want of nodes the pods could
/// still have landed.
fn node_to_itself() -> Tree {
    tree!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchExpressions": [{"key": WORKLOAD_LABEL, "operator": "Exists"}]},
        "namespaceSelector": {},
        "topologyKey": NODE_TOPOLOGY_KEY,
    }]}})
}

/// The tolerations every engine pod gets: the GPU nodes' taint, then each of `theirs` (the deployment's, as
/// Kubernetes writes them) that the scheduler relied on to place the replica on this cluster.
pub fn tolerations(theirs: impl IntoIterator<Item = Value>) -> Vec<Tree> {
    let mut all = vec![tree!({"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT})];
    all.extend(theirs.into_iter().map(Tree::from));
    all
}

/// What Modelplane adds to an engine container.
struct Additions<'a> {
    env: &'a [Tree],
    mounts: &'a [Tree],
    claims: bool,
    capabilities: &'a [&'static str],
    /// For a serving container: the probes to write where the user wrote none.
    probes: Option<Probes>,
    /// For the serving engine: the port it answers (and serves `/metrics`) on, declared unless the user did.
    declared_port: Option<u16>,
}

struct Probes {
    startup_seconds: u64,
    /// The port the engine listens on.
    port: u16,
}

/// How long a serving engine may take to start: a base plus the time to read its weights when their size is
/// known.
pub fn startup_seconds(size_gib: Option<u64>) -> u64 {
    size_gib.map_or(STARTUP_UNKNOWN_SECONDS, |gib| {
        STARTUP_BASE_SECONDS.saturating_add(gib.saturating_mul(STARTUP_SECONDS_PER_GIB))
    })
}

/// Readiness on the engine's health endpoint, and a startup probe on the same endpoint that holds liveness and
/// readiness checks off for the startup budget. Every field is written out (Kubernetes' defaults included) so
/// provider-kubernetes sees no drift.
fn probes(p: &Probes) -> (Tree, Tree) {
    (
        health_check(p.port, p.startup_seconds.div_ceil(PROBE_PERIOD_SECONDS)),
        health_check(p.port, 3),
    )
}

/// A probe of the health endpoint on `port`.
pub fn health_check(port: u16, failure_threshold: u64) -> Tree {
    tree!({
        "httpGet": {"path": HEALTH_PATH, "port": port, "scheme": "HTTP"},
        "periodSeconds": PROBE_PERIOD_SECONDS,
        "timeoutSeconds": 5,
        "successThreshold": 1,
        "failureThreshold": failure_threshold,
    })
}

fn engine_container(user: &Map<String, Value>, ours: &Additions) -> Fields {
    // Env and mounts are put together below, from the user's and ours; the rest is copied as written (from the
    // entries, each key once: see `string_fields`).
    let mut container = Fields::from_entries(
        user.iter()
            .filter(|(key, _)| *key != "env" && *key != "volumeMounts")
            .map(|(key, value)| (Text::Owned(key.clone()), Tree::from(value)))
            .collect(),
    );
    let theirs = match user.get("env") {
        Some(Value::Array(theirs)) => theirs.as_slice(),
        _ => &[],
    };
    // A name the user sets is theirs: a duplicate would be rejected by Grove and is ambiguous everywhere else.
    let user_names: Vec<&str> = theirs.iter().filter_map(|e| e.get("name")?.as_str()).collect();
    let mut all_env: Vec<Tree> = ours
        .env
        .iter()
        .filter(|e| {
            e.get("name")
                .and_then(Tree::as_str)
                .is_none_or(|n| !user_names.contains(&n))
        })
        .cloned()
        .collect();
    all_env.extend(theirs.iter().map(Tree::from));
    if !all_env.is_empty() {
        container.insert("env", all_env);
    } else if let Some(env) = user.get("env") {
        container.insert("env", env);
    }
    let mut all_mounts: Vec<Tree> = match user.get("volumeMounts") {
        Some(Value::Array(theirs)) => theirs.iter().map(Tree::from).collect(),
        _ => Vec::new(),
    };
    all_mounts.extend(ours.mounts.iter().cloned());
    container.insert("volumeMounts", all_mounts);
    if ours.claims {
        let resources = container.entry_or_insert_with("resources", || tree!({}));
        if let Tree::Map(resources) = resources {
            let list = resources.entry_or_insert_with("claims", || tree!([]));
            if let Tree::List(list) = list {
                list.push(tree!({"name": CLAIM_NAME}));
            }
        }
    }
    if !ours.capabilities.is_empty() {
        add_capabilities(&mut container, ours.capabilities);
    }
    if let Some(port) = ours.declared_port {
        declare_port(&mut container, port);
    }
    if let Some(p) = &ours.probes {
        // The user's own probes are kept as written.
        let (startup, readiness) = probes(p);
        container.entry_or_insert_with("startupProbe", || startup);
        container.entry_or_insert_with("readinessProbe", || readiness);
    }
    container
}

/// Declares `port` on the container unless one of its ports already is it. Unnamed, so it can clash with no name
/// the user gave another port; Prometheus finds it by number ([`metrics_port`]).
fn declare_port(container: &mut Fields, port: u16) {
    let ports = container.entry_or_insert_with("ports", || tree!([]));
    let Tree::List(ports) = ports else {
        return;
    };
    if !ports
        .iter()
        .any(|p| p.get("containerPort").and_then(Tree::as_u64) == Some(u64::from(port)))
    {
        ports.push(tree!({"containerPort": port, "protocol": "TCP"}));
    }
}

/// The port the workload's serving engine answers and serves `/metrics` on (its first container's, behind the
/// disaggregation sidecar for a decode engine); none when no member serves.
pub fn metrics_port(w: &EngineWorkload) -> Option<u16> {
    let member = w.engine.members.iter().find(|m| serves(m))?;
    let engine = member.template.spec.containers.first()?;
    Some(if w.phase == Some(Phase::Decode) {
        disaggregation::decode_engine_port(engine)
    } else {
        SERVING_PORT
    })
}

/// Adds `capabilities` to `securityContext.capabilities.add`, keeping whatever the user set there.
fn add_capabilities(container: &mut Fields, capabilities: &[&'static str]) {
    let context = container.entry_or_insert_with("securityContext", || tree!({}));
    let Tree::Map(context) = context else {
        return;
    };
    let caps = context.entry_or_insert_with("capabilities", || tree!({}));
    let Tree::Map(caps) = caps else {
        return;
    };
    let add = caps.entry_or_insert_with("add", || tree!([]));
    let Tree::List(add) = add else {
        return;
    };
    for capability in capabilities {
        if !add.iter().any(|c| c.as_str() == Some(capability)) {
            add.push(Tree::String(Text::Borrowed(capability)));
        }
    }
}

/// A Standalone engine on either stack: `copies` identical pods.
pub fn deployment(w: &EngineWorkload) -> Tree {
    tree!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": &w.name, "namespace": w.namespace, "labels": {WORKLOAD_LABEL: &w.name}},
        "spec": {
            "replicas": w.engine.copies,
            "selector": {"matchLabels": {WORKLOAD_LABEL: &w.name}},
            // Each copy holds a node of its own (`node_to_itself`) and the fleet scheduler counts exactly `copies`
            // nodes, so a rollout has no node to surge onto: it replaces one copy at a time instead.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": pod_template(w, 0, Vec::new()),
        },
    })
}

/// The ResourceClaimTemplate for a member's DRA devices; requests served by synthetic devices are left out,
/// as nothing on the node can claim them.
pub fn resource_claim_template(w: &EngineWorkload, m: usize, name: &str, devices: &[Option<usize>]) -> Tree {
    let pool_devices: &[Device] = &w.pool.devices;
    let requests: Vec<Tree> = w.engine.members[m]
        .device_requests()
        .iter()
        .zip(devices)
        .filter_map(|(request, device)| {
            let device = pool_devices.get((*device)?)?;
            let selectors: Vec<Tree> = request
                .selectors
                .iter()
                .map(|s| tree!({"cel": {"expression": &s.cel}}))
                .collect();
            let mut exactly = Fields::with_capacity(3);
            exactly.insert("deviceClassName", &device.device_class_name);
            exactly.insert("count", request.count);
            if !selectors.is_empty() {
                exactly.insert("selectors", selectors);
            }
            Some(tree!({"name": &request.name, "exactly": exactly}))
        })
        .chain(w.additions.claim_requests.iter().cloned())
        .collect();
    tree!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": w.namespace},
        "spec": {"spec": {"devices": {"requests": requests}}},
    })
}

/// The Service in front of the serving pods. Its name must differ from a LeaderWorkerSet's, whose headless
/// Service LWS creates only when no Service of that name exists.
pub fn service(w: &EngineWorkload, name: &str) -> Tree {
    tree!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": w.namespace, "labels": {WORKLOAD_LABEL: &w.name}},
        "spec": {
            "selector": {SERVING_LABEL: &w.name},
            "ports": [{"name": "http", "port": SERVING_PORT, "targetPort": SERVING_PORT, "protocol": "TCP"}],
        },
    })
}
