//! Engines that behave on a real cluster: probes, taints, moves, capacity and the ModelExpress client.

use serde_json::{Value, json};

use super::{
    tests::{cache, compose_on, compose_with_cache, dynamo, env_names, manifest, seed, standard},
    *,
};
use crate::{
    api::{inference_cluster::Taint, model_deployment::Toleration},
    compose::fixtures::{request, run, with_observed, with_required},
    schedule::cluster::tolerates,
};

const WEST: &str = "eks-h200-us-west";
const EAST: &str = "eks-h200-us-east";

fn key(cluster: &str) -> String {
    format!("replica-0-{cluster}-qwen3-coder")
}

fn leader_container(out: &Output, cluster: &str, on_dynamo: bool) -> Value {
    let workload = manifest(out, &key(cluster));
    let pod = if on_dynamo {
        &workload["spec"]["template"]["cliques"][0]["spec"]["podSpec"]
    } else {
        &workload["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    };
    pod["containers"][0].clone()
}

fn worker_container(out: &Output, cluster: &str, on_dynamo: bool) -> Value {
    let workload = manifest(out, &key(cluster));
    let pod = if on_dynamo {
        &workload["spec"]["template"]["cliques"][1]["spec"]["podSpec"]
    } else {
        &workload["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    };
    pod["containers"][0].clone()
}

fn sized_cache(clusters: &[Value], size_gib: u32) -> Value {
    let mut c = cache(clusters, "Ready");
    c["spec"] = json!({"huggingFace": {"repo": "Qwen/Qwen3-Coder-480B-A35B-Instruct", "sizeGiB": size_gib}});
    c
}

// --- Probes ---

#[test]
fn serving_containers_get_startup_and_readiness_probes_on_both_stacks_and_workers_none() {
    for (cluster, on_dynamo) in [(standard(), false), (dynamo(), true)] {
        let name = cluster["metadata"]["name"].as_str().unwrap().to_owned();
        let out = compose_with_cache(
            seed(),
            std::slice::from_ref(&cluster),
            &[sized_cache(std::slice::from_ref(&cluster), 1024)],
        );
        let leader = leader_container(&out, &name, on_dynamo);
        assert_eq!(
            leader["readinessProbe"]["httpGet"],
            json!({"path": "/health", "port": 8000, "scheme": "HTTP"})
        );
        assert_eq!(
            leader["startupProbe"]["httpGet"],
            leader["readinessProbe"]["httpGet"]
        );
        // 10 minutes to start plus 4 s per GiB of a 1 TiB cache, in 10-second periods.
        assert_eq!(
            leader["startupProbe"]["failureThreshold"],
            (600 + 1024 * 4_u64).div_ceil(10),
            "{name}"
        );
        let worker = worker_container(&out, &name, on_dynamo);
        assert!(
            worker.get("readinessProbe").is_none() && worker.get("startupProbe").is_none(),
            "workers do not serve"
        );
    }
}

#[test]
fn the_startup_budget_is_an_hour_when_the_size_is_unknown_and_grows_with_the_cache() {
    let unknown = compose_on(seed(), &[standard()]);
    assert_eq!(
        leader_container(&unknown, WEST, false)["startupProbe"]["failureThreshold"],
        360
    );
    let small = compose_with_cache(seed(), &[standard()], &[sized_cache(&[standard()], 100)]);
    let big = compose_with_cache(seed(), &[standard()], &[sized_cache(&[standard()], 2048)]);
    let threshold = |out: &Output| {
        leader_container(out, WEST, false)["startupProbe"]["failureThreshold"]
            .as_u64()
            .unwrap()
    };
    assert!(threshold(&small) < threshold(&big));
}

#[test]
fn the_users_probes_are_kept_byte_for_byte() {
    let mut xr = seed();
    let theirs = json!({"tcpSocket": {"port": "http"}, "periodSeconds": 7, "failureThreshold": 9000});
    let liveness = json!({"httpGet": {"path": "/ping", "port": 8000}});
    let container =
        &mut xr["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"][0];
    container["startupProbe"] = theirs.clone();
    container["livenessProbe"] = liveness.clone();
    for (cluster, on_dynamo) in [(standard(), false), (dynamo(), true)] {
        let name = cluster["metadata"]["name"].as_str().unwrap().to_owned();
        let out = compose_on(xr.clone(), &[cluster]);
        let leader = leader_container(&out, &name, on_dynamo);
        assert_eq!(leader["startupProbe"], theirs);
        assert_eq!(leader["livenessProbe"], liveness);
        assert_eq!(
            leader["readinessProbe"]["httpGet"]["path"], "/health",
            "ours where they wrote none"
        );
    }
}

#[test]
fn a_malformed_template_probe_is_fatal_and_names_the_field() {
    let at = "spec.template.spec.engines[0].members[0].template.spec.containers[0]";
    let cases = [
        (
            "readinessProbe",
            json!({"httpGet": {"path": "/health", "port": 0}}),
            format!("{at}.readinessProbe.httpGet.port"),
        ),
        (
            "startupProbe",
            json!({"httpGet": {"port": 8000}, "exec": {"command": ["true"]}}),
            format!("{at}.startupProbe"),
        ),
        (
            "livenessProbe",
            json!({"tcpSocket": {"port": 8000}, "periodSeconds": "often"}),
            format!("{at}.livenessProbe.periodSeconds"),
        ),
        (
            "readinessProbe",
            json!({"exec": {"command": []}}),
            format!("{at}.readinessProbe.exec.command"),
        ),
        (
            "readinessProbe",
            json!("GET /health"),
            format!("{at}.readinessProbe"),
        ),
    ];
    for (field, probe, path) in cases {
        let mut xr = seed();
        xr["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"][0]
            [field] = probe;
        let err = run(compose, &request(xr)).unwrap_err();
        assert_eq!(err.path, path, "{}", err.reason);
    }
}

/// Evaluates a provider-kubernetes readiness query against a remote object, as provider-kubernetes does.
fn query_holds(query: &str, object: Value) -> bool {
    use kube_cel::cel::{Context, Program, Value as Cel};
    let program = Program::compile(query).unwrap();
    let mut context = Context::default();
    context.add_variable("object", object).unwrap();
    matches!(program.execute(&context), Ok(Cel::Bool(true)))
}

#[test]
fn a_deployment_or_leader_worker_set_is_ready_only_once_every_copy_passes_readiness() {
    let query = crate::stack::AVAILABLE_QUERY;
    let available = json!([{"type": "Available", "status": "True"}]);
    // A Deployment with maxUnavailable 25% is Available with one of four copies still loading weights.
    let loading = json!({"spec": {"replicas": 4}, "status": {"conditions": available, "readyReplicas": 3}});
    let serving = json!({"spec": {"replicas": 4}, "status": {"conditions": available, "readyReplicas": 4}});
    let fresh = json!({"spec": {"replicas": 4}, "status": {"conditions": available}});
    assert!(!query_holds(query, loading));
    assert!(query_holds(query, serving));
    assert!(!query_holds(query, fresh));
}

/// `composed` as Crossplane would observe it, with provider-kubernetes' `Ready` condition set to `ready`.
pub(super) fn observed(composed: &Value, ready: bool) -> Value {
    let mut object = composed.clone();
    object["status"] =
        json!({"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]});
    object
}

/// A request for the seed over `clusters`, observing every resource of `previous` (ready when `ready` says).
pub(super) fn next_request(
    xr: &Value,
    clusters: &[Value],
    previous: &Output,
    ready: impl Fn(&str) -> bool,
) -> RunFunctionRequest {
    let mut req = with_required(request(xr.clone()), CLUSTERS, clusters);
    req = with_required(req, CACHE, &[cache(clusters, "Ready")]);
    for (key, composed) in &previous.resources {
        req = with_observed(
            req,
            key,
            &observed(&Value::Object(composed.object.to_map()), ready(key)),
        );
    }
    req
}

#[test]
fn ready_replicas_counts_only_replicas_whose_engines_serve() {
    let mut xr = seed();
    xr["spec"]["replicas"] = json!(2);
    let mut big = standard();
    big["status"]["pools"][0]["nodeCount"] = json!(4);
    let first = compose_on(xr.clone(), std::slice::from_ref(&big));
    assert_eq!(first.status["readyReplicas"], 0);
    let out = run(
        compose,
        &next_request(&xr, &[big], &first, |key| key.starts_with("replica-0-")),
    )
    .unwrap();
    assert_eq!(
        (
            out.status["placedReplicas"].clone(),
            out.status["readyReplicas"].clone()
        ),
        (json!(2), json!(1))
    );
    assert_eq!(out.status["replicas"][0]["ready"], true);
    assert_eq!(out.status["replicas"][1]["ready"], false);
}

#[test]
fn a_scrape_that_cannot_be_made_never_keeps_a_replica_from_serving() {
    // A cluster without Prometheus' CRDs never creates the PodMonitor; everything that serves is ready.
    let xr = seed();
    let first = compose_on(xr.clone(), &[standard()]);
    assert!(first.resources.keys().any(|k| k.ends_with("-metrics")));
    let out = run(
        compose,
        &next_request(&xr, &[standard()], &first, |key| !key.ends_with("-metrics")),
    )
    .unwrap();
    assert_eq!(out.status["readyReplicas"], 1);
    let unready = run(
        compose,
        &next_request(&xr, &[standard()], &first, |key| !key.ends_with("-service")),
    )
    .unwrap();
    assert_eq!(unready.status["readyReplicas"], 0, "what serves still gates it");
}

// --- Taints ---

fn tainted(mut cluster: Value, taint: &Value) -> Value {
    cluster["spec"]["taints"] = json!([taint]);
    cluster
}

#[test]
fn taint_effect_and_toleration_operator_decide_placement_and_placed_pods_tolerate_the_taint() {
    let taint = |effect: &str| json!({"key": "dedicated", "value": "inference", "effect": effect});
    let none = json!(null);
    let equal = |effect: Option<&str>| {
        let mut t = json!({"key": "dedicated", "operator": "Equal", "value": "inference"});
        if let Some(effect) = effect {
            t["effect"] = json!(effect);
        }
        t
    };
    let wrong_value = json!({"key": "dedicated", "operator": "Equal", "value": "training"});
    let exists_key = json!({"key": "dedicated", "operator": "Exists"});
    let exists_all = json!({"operator": "Exists"});
    // (taint effect, toleration, placed)
    let table = [
        ("NoSchedule", none.clone(), false),
        ("NoSchedule", equal(None), true),
        ("NoSchedule", equal(Some("NoSchedule")), true),
        ("NoSchedule", equal(Some("NoExecute")), false),
        ("NoSchedule", wrong_value.clone(), false),
        ("NoSchedule", exists_key.clone(), true),
        ("NoSchedule", exists_all.clone(), true),
        ("NoExecute", none.clone(), false),
        ("NoExecute", equal(Some("NoExecute")), true),
        ("NoExecute", exists_key.clone(), true),
        ("NoExecute", wrong_value, false),
        ("PreferNoSchedule", none, true),
        ("PreferNoSchedule", exists_key, true),
        ("PreferNoSchedule", exists_all, true),
    ];
    for (effect, toleration, placed) in table {
        let mut xr = seed();
        if !toleration.is_null() {
            xr["spec"]["template"]["spec"]["tolerations"] = json!([toleration]);
        }
        let out = compose_on(xr, &[tainted(standard(), &taint(effect))]);
        let case = format!("{effect} × {toleration}");
        assert_eq!(out.resources.contains_key(&key(WEST)), placed, "{case}: placed");
        if !placed {
            continue;
        }
        let taint: Taint = serde_json::from_value(taint(effect)).unwrap();
        let lws = &manifest(&out, &key(WEST))["spec"]["leaderWorkerTemplate"];
        for template in ["leaderTemplate", "workerTemplate"] {
            let tolerations: Vec<Toleration> =
                serde_json::from_value(lws[template]["spec"]["tolerations"].clone()).unwrap();
            let needs_it = effect != "PreferNoSchedule" || !toleration.is_null();
            assert_eq!(
                tolerations.iter().any(|t| tolerates(t, &taint)),
                needs_it,
                "{case}: {template} tolerates"
            );
        }
    }
}

#[test]
fn a_taint_with_an_unknown_effect_is_fatal_at_the_cluster_and_names_its_field() {
    let mut cluster = tainted(standard(), &json!({"key": "dedicated", "effect": "Sometimes"}));
    cluster.as_object_mut().unwrap().remove("status");
    let err = run(
        crate::compose::inference_cluster::compose,
        &request(cluster.clone()),
    )
    .unwrap_err();
    assert_eq!(err.path, "spec.taints[0].effect", "{}", err.reason);
    // A deployment does not fail with the fleet's one bad cluster: it skips it and says which.
    let out = compose_on(
        seed(),
        &[tainted(
            standard(),
            &json!({"key": "dedicated", "effect": "Sometimes"}),
        )],
    );
    assert!(out.resources.is_empty());
    assert!(
        out.warnings.iter().any(|w| w.contains("taints[0].effect")),
        "{:?}",
        out.warnings
    );
}

// --- Moves ---

#[test]
fn a_move_composes_the_new_workload_first_and_removes_the_old_one_once_the_new_one_is_ready() {
    let xr = seed();
    let evicting = tainted(standard(), &json!({"key": "maintenance", "effect": "NoExecute"}));
    // 1: the replica runs on us-west.
    let first = compose_on(xr.clone(), &[standard()]);
    assert!(first.resources.contains_key(&key(WEST)));
    // 2: us-west taints NoExecute; us-east joins. The new workload is composed, the old one kept.
    let second = run(
        compose,
        &next_request(&xr, &[evicting.clone(), dynamo()], &first, |_| true),
    )
    .unwrap();
    assert!(second.resources.contains_key(&key(EAST)), "new workload first");
    assert!(
        second.resources.contains_key(&key(WEST)),
        "old workload kept while the new one starts"
    );
    assert_eq!(
        second.resources[&key(WEST)].object["metadata"]["annotations"]["modelplane.ai/retiring"],
        "true"
    );
    assert_eq!(
        second.resources[&key(WEST)].object["spec"],
        first.resources[&key(WEST)].object["spec"],
        "kept exactly as it runs"
    );
    assert_eq!(second.status["replicas"][0]["cluster"], EAST);
    assert_eq!(second.status["replicas"][0]["movingFrom"]["cluster"], WEST);
    assert_eq!(
        second.status["replicas"][0]["movingFrom"]["engines"][0]["nodes"], 2,
        "still held"
    );
    // 3: the new workload is not ready yet: both stay, and the replica stays on its new cluster.
    let east_ready = |ready: bool| move |k: &str| k.contains(WEST) || ready;
    let third = run(
        compose,
        &next_request(&xr, &[evicting.clone(), dynamo()], &second, east_ready(false)),
    )
    .unwrap();
    assert_eq!(
        third.resources.keys().filter(|k| k.contains(WEST)).count(),
        first.resources.len(),
        "every old Object kept"
    );
    assert_eq!(third.status["replicas"][0]["cluster"], EAST);
    // 4: the new workload is ready: the old one goes, and no Object of it is left behind.
    let fourth = run(
        compose,
        &next_request(&xr, &[evicting, dynamo()], &third, east_ready(true)),
    )
    .unwrap();
    assert!(
        fourth.resources.keys().all(|k| !k.contains(WEST)),
        "{:?}",
        fourth.resources.keys()
    );
    assert_eq!(fourth.status["readyReplicas"], 1);
    assert!(fourth.status["replicas"][0].get("movingFrom").is_none());
}

#[test]
fn a_replica_whose_cluster_is_gone_moves_without_waiting() {
    let first = compose_on(seed(), &[standard()]);
    let out = run(compose, &next_request(&seed(), &[dynamo()], &first, |_| true)).unwrap();
    assert!(out.resources.contains_key(&key(EAST)));
    assert!(out.resources.keys().all(|k| !k.contains(WEST)));
}

// --- Capacity ---

#[test]
fn an_autoscaling_pool_offers_up_to_its_max_and_the_replica_says_it_waits_for_a_scale_up() {
    let mut small = standard();
    small["status"]["pools"][0]["nodeCount"] = json!(1);
    let refused = compose_on(seed(), std::slice::from_ref(&small));
    assert_eq!(refused.status["replicas"][0]["reason"], "InsufficientCapacity");
    small["status"]["pools"][0]["maxNodeCount"] = json!(4);
    let out = compose_on(seed(), &[small]);
    assert!(out.resources.contains_key(&key(WEST)));
    assert_eq!(out.status["replicas"][0]["waitingForScaleUp"], json!(["gpu"]));
    let roomy = compose_on(seed(), &[standard()]);
    assert!(roomy.status["replicas"][0].get("waitingForScaleUp").is_none());
}

fn not_ready_with(mut cluster: Value, unready: &[&str]) -> Value {
    let names = [
        "cert-manager",
        "node-feature-discovery",
        "dra-driver-nvidia-gpu",
        "cluster-autoscaler",
        "kube-prometheus-stack",
        "envoy-gateway",
        "lws",
        "grove",
        "kai-scheduler",
        "kai-queues",
        "modelexpress-server",
    ];
    cluster["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
    cluster["status"]["components"] = names
        .iter()
        .map(|n| json!({"name": n, "version": "v1", "ready": !unready.contains(n)}))
        .collect();
    cluster
}

#[test]
fn only_the_components_a_replica_needs_gate_its_scheduling() {
    for cluster in [standard(), dynamo()] {
        let name = cluster["metadata"]["name"].as_str().unwrap().to_owned();
        let out = compose_on(
            seed(),
            &[not_ready_with(
                cluster.clone(),
                &["kube-prometheus-stack", "envoy-gateway"],
            )],
        );
        assert!(
            out.resources.contains_key(&key(&name)),
            "{name}: monitoring does not gate"
        );
        assert_eq!(
            out.status["replicas"][0]["componentsNotReady"],
            json!(["kube-prometheus-stack", "envoy-gateway"]),
            "reported, in the cluster's order"
        );
        let gang_scheduler = if name == WEST { "lws" } else { "kai-scheduler" };
        for needed in ["dra-driver-nvidia-gpu", gang_scheduler] {
            let out = compose_on(seed(), &[not_ready_with(cluster.clone(), &[needed])]);
            assert!(out.resources.is_empty(), "{name}: {needed} gates");
            let reason = out.status["replicas"][0]["rejections"][0]["reason"]
                .as_str()
                .unwrap();
            assert!(reason.contains(needed), "{reason}");
        }
    }
    // A Standalone engine runs no gang: the gang scheduler does not gate it.
    let small = tests::example("examples/deployments/qwen3-small.yaml");
    let mut roomy = not_ready_with(standard(), &["lws"]);
    roomy["status"]["pools"][0]["nodeCount"] = json!(4);
    let out = compose_on(small, &[roomy]);
    assert_eq!(out.status["placedReplicas"], 2);
}

// --- ModelExpress ---

fn worker_claim_requests(out: &Output, cluster: &str) -> usize {
    let claims = manifest(out, &format!("{}-worker-claims", key(cluster)));
    claims["spec"]["spec"]["devices"]["requests"]
        .as_array()
        .map_or(0, Vec::len)
}

fn env_value<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    container["env"].as_array()?.iter().find(|e| e["name"] == name)
}

#[test]
fn two_caches_of_one_model_in_two_namespaces_get_different_source_identities() {
    let revision = |namespace: &str| {
        let mut xr = seed();
        xr["metadata"]["namespace"] = json!(namespace);
        let mut c = cache(&[dynamo()], "Ready");
        c["metadata"]["namespace"] = json!(namespace);
        let out = compose_with_cache(xr, &[dynamo()], &[c]);
        env_value(&leader_container(&out, EAST, true), "MX_MODEL_REVISION").unwrap()["value"].clone()
    };
    assert_eq!(revision("team-a"), "team-a/qwen3-coder");
    assert_ne!(revision("team-a"), revision("team-b"));
}

#[test]
fn a_dynamo_replica_with_a_cache_is_a_full_model_express_client() {
    let out = compose_on(seed(), &[dynamo()]);
    for container in [
        leader_container(&out, EAST, true),
        worker_container(&out, EAST, true),
    ] {
        assert_eq!(env_value(&container, "MX_P2P_METADATA").unwrap()["value"], "1");
        assert_eq!(
            env_value(&container, "POD_UID").unwrap()["valueFrom"],
            json!({"fieldRef": {"fieldPath": "metadata.uid"}})
        );
        assert_eq!(
            container["securityContext"]["capabilities"]["add"],
            json!(["IPC_LOCK"])
        );
        assert!(
            env_value(&container, "MX_NIXL_BACKEND").is_none(),
            "no EFA on this pool"
        );
    }
    assert_eq!(worker_claim_requests(&out, EAST), 1, "the GPUs only");
}

#[test]
fn on_an_efa_pool_the_engines_claim_every_efa_interface_and_transfer_over_libfabric() {
    let mut efa = dynamo();
    efa["status"]["pools"][0]["efaInterfaces"] = json!(32);
    let out = compose_on(seed(), &[efa]);
    let worker = worker_container(&out, EAST, true);
    assert_eq!(
        env_value(&worker, "MX_NIXL_BACKEND").unwrap()["value"],
        "LIBFABRIC"
    );
    let claims = manifest(&out, &format!("{}-worker-claims", key(EAST)));
    assert_eq!(
        claims["spec"]["spec"]["devices"]["requests"][1],
        json!({"name": "efa", "exactly": {"deviceClassName": "efa.networking.k8s.aws", "allocationMode": "All"}})
    );
}

#[test]
fn nothing_of_model_express_on_standard_or_without_a_cache() {
    let mut efa = standard();
    efa["status"]["pools"][0]["efaInterfaces"] = json!(32);
    let on_standard = compose_on(seed(), &[efa]);
    let mut no_cache = seed();
    no_cache["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("modelCacheRef");
    let uncached = run(compose, &with_required(request(no_cache), CLUSTERS, &[dynamo()])).unwrap();
    for (out, cluster, on_dynamo) in [(&on_standard, WEST, false), (&uncached, EAST, true)] {
        for container in [
            leader_container(out, cluster, on_dynamo),
            worker_container(out, cluster, on_dynamo),
        ] {
            assert!(
                env_names(&container)
                    .iter()
                    .all(|n| !n.starts_with("MX_") && !n.starts_with("POD_")),
                "{cluster}"
            );
            assert!(container.get("securityContext").is_none());
        }
        assert_eq!(worker_claim_requests(out, cluster), 1, "the GPUs only");
    }
}

#[test]
fn the_users_env_and_load_format_stay_theirs() {
    let mut xr = seed();
    let container =
        &mut xr["spec"]["template"]["spec"]["engines"][0]["members"][1]["template"]["spec"]["containers"][0];
    container["env"] = json!([{"name": "MX_P2P_METADATA", "value": "0"}]);
    let command = container["command"].clone();
    let out = compose_on(xr, &[dynamo()]);
    let worker = worker_container(&out, EAST, true);
    let values: Vec<&Value> = worker["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "MX_P2P_METADATA")
        .collect();
    assert_eq!(
        values,
        [&json!({"name": "MX_P2P_METADATA", "value": "0"})],
        "one entry: theirs"
    );
    assert_eq!(worker["command"], command);
}

// --- What clusters offer ---

#[test]
fn a_cluster_offers_its_pools_with_their_bounds_while_an_optional_component_is_not_ready() {
    use crate::compose::inference_cluster::{class_requirement, compose as compose_cluster};
    let class = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass",
        "metadata": {"name": "eks-h200-8x"},
        "spec": {"devices": [{"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 8}]}});
    let cluster = json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
        "metadata": {"name": "onprem"},
        "spec": {"stack": "Standard",
                 "cluster": {"source": "Existing", "existing": {
                     "secretRef": {"name": "onprem-kubeconfig", "key": "kubeconfig"}}},
                 "taints": [{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}],
                 "nodePools": [{"name": "gpu", "className": "eks-h200-8x", "nodeCount": 2,
                                "minNodeCount": 1, "maxNodeCount": 6}]}});
    let base = with_required(request(cluster), &class_requirement("eks-h200-8x"), &[class]);
    let first = run(compose_cluster, &base).unwrap();
    // Resources `unready` picks are observed not ready; those `absent` picks are not observed at all.
    let observe = |unready: &dyn Fn(&str) -> bool, absent: &dyn Fn(&str) -> bool| {
        let mut req = base.clone();
        for (key, composed) in first.resources.iter().filter(|(k, _)| !absent(k)) {
            req = with_observed(
                req,
                key,
                &observed(&Value::Object(composed.object.to_map()), !unready(key)),
            );
        }
        run(compose_cluster, &req).unwrap()
    };
    let out = observe(&|key: &str| key.contains("kube-prometheus-stack"), &|_: &str| {
        false
    });
    assert_eq!(out.ready, Some(false));
    let pool = &out.status["pools"][0];
    assert_eq!(
        (
            pool["nodeCount"].clone(),
            pool["minNodeCount"].clone(),
            pool["maxNodeCount"].clone()
        ),
        (json!(2), json!(1), json!(6))
    );
    let prometheus = out.status["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "kube-prometheus-stack")
        .unwrap();
    assert_eq!(prometheus["ready"], false);
    // The node agents that must run on the tainted GPU nodes tolerate the cluster's taint.
    let taint: Taint =
        serde_json::from_value(json!({"key": "dedicated", "value": "inference", "effect": "NoSchedule"}))
            .unwrap();
    for (release, path) in [
        ("node-feature-discovery", "/worker/tolerations"),
        ("dra-driver-nvidia-gpu", "/kubeletPlugin/tolerations"),
    ] {
        let values = &out.resources[&format!("release-{release}")].object["spec"]["forProvider"]["values"];
        let tolerations: Vec<Toleration> =
            serde_json::from_value(values.pointer(path).unwrap().clone()).unwrap();
        assert!(tolerations.iter().any(|t| tolerates(t, &taint)), "{release}");
    }
    // Until the cluster can be reached, nothing is offered.
    let unreachable = observe(&|_: &str| false, &|key: &str| key.starts_with("providerconfig"));
    assert_eq!(unreachable.status["pools"], json!([]));
}
