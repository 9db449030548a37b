use serde_json::{Value, json};

use super::*;
use crate::compose::fixtures::{request, run, with_observed, with_required};

pub(super) fn example(path: &str) -> Value {
    let text = std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

pub(super) fn seed() -> Value {
    example("examples/deployments/qwen3-coder.yaml")
}

pub(super) fn standard() -> Value {
    example("tests/fixtures/clusters/standard/eks-h200-us-west.yaml")
}

pub(super) fn dynamo() -> Value {
    example("tests/fixtures/clusters/dynamo/eks-h200-us-east.yaml")
}

/// The seed's ModelCache with `phase` on each of `clusters`.
pub(super) fn cache(clusters: &[Value], phase: &str) -> Value {
    let staged: Vec<Value> = clusters
        .iter()
        .map(|c| json!({"cluster": c["metadata"]["name"], "phase": phase}))
        .collect();
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelCache",
           "metadata": {"name": "qwen3-coder", "namespace": "ml-team"},
           "status": {"clusters": staged}})
}

pub(super) fn compose_with_cache(xr: Value, clusters: &[Value], caches: &[Value]) -> Output {
    let req = with_required(request(xr), CLUSTERS, clusters);
    run(compose, &with_required(req, CACHE, caches)).unwrap()
}

/// Composes with the cache already staged everywhere, so engines start.
pub(super) fn compose_on(xr: Value, clusters: &[Value]) -> Output {
    compose_with_cache(xr, clusters, &[cache(clusters, "Ready")])
}

pub(super) fn manifest<'a>(out: &'a Output, key: &str) -> &'a Value {
    let object = &out
        .resources
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {:?}", out.resources.keys()))
        .object;
    &object["spec"]["forProvider"]["manifest"]
}

pub(super) fn env_names(container: &Value) -> Vec<&str> {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

#[test]
fn first_call_asks_for_the_candidate_clusters_and_the_cache_and_composes_nothing() {
    let out = run(compose, &request(seed())).unwrap();
    assert!(out.resources.is_empty());
    assert_eq!(out.ready, Some(false));
    assert_eq!(out.requirements.keys().collect::<Vec<_>>(), [CLUSTERS, CACHE]);
    assert_eq!(out.requirements[CACHE].namespace.as_deref(), Some("ml-team"));
    let again = compose_on(seed(), &[standard()]);
    assert_eq!(
        again.requirements, out.requirements,
        "requirements must not change once met"
    );
    assert_eq!(
        again.ttl,
        Some(WAITING_TTL),
        "placed but not yet admitted by its cluster"
    );
}

/// The seed's request observing every resource `previous` composed, as Crossplane would next time.
fn observing(mut req: RunFunctionRequest, previous: &Output) -> RunFunctionRequest {
    for (key, composed) in &previous.resources {
        req = with_observed(req, key, &Value::Object(composed.object.to_map()));
    }
    req
}

/// `cluster` whose ledger admitted `holders` (deployment, replica, nodes) in its first pool.
fn with_holders(mut cluster: Value, holders: &[(&str, u32, u64)]) -> Value {
    let allocated: u64 = holders.iter().map(|h| h.2).sum();
    let pool = &mut cluster["status"]["pools"][0];
    pool["allocatedNodes"] = json!(allocated);
    pool["holders"] = holders
        .iter()
        .map(|(d, r, n)| json!({"deployment": d, "replica": r, "nodes": n}))
        .collect();
    cluster
}

#[test]
fn a_settled_deployment_requires_only_the_clusters_it_runs_on_by_name() {
    let first = compose_on(seed(), &[standard()]);
    let admitted = with_holders(standard(), &[("ml-team/qwen3-coder", 0, 2)]);
    let bare = observing(
        with_required(request(seed()), CACHE, &[cache(&[standard()], "Ready")]),
        &first,
    );
    let asked = run(compose, &bare).unwrap();
    assert_eq!(
        asked.requirements.keys().collect::<Vec<_>>(),
        ["cluster-eks-h200-us-west", CACHE],
        "no candidate set while nothing waits"
    );
    assert_eq!(
        asked.requirements["cluster-eks-h200-us-west"].r#match,
        Some(Match::MatchName("eks-h200-us-west".into()))
    );
    let req = with_required(bare, "cluster-eks-h200-us-west", &[admitted]);
    let settled = run(compose, &req).unwrap();
    assert_eq!(
        settled.requirements, asked.requirements,
        "settles on the second call"
    );
    assert_eq!(settled.status["replicas"][0]["cluster"], "eks-h200-us-west");
    assert_eq!(settled.ttl, None, "nothing waits: the default TTL");
    assert_eq!(
        settled.resources.keys().collect::<Vec<_>>(),
        first.resources.keys().collect::<Vec<_>>()
    );
}

#[test]
fn a_replica_whose_cluster_is_gone_asks_for_the_candidates_then_moves() {
    let first = compose_on(seed(), &[standard()]);
    let bare = observing(
        with_required(request(seed()), CACHE, &[cache(&[standard(), dynamo()], "Ready")]),
        &first,
    );
    // The named Get found nothing: the cluster is gone, so the candidate set is asked for.
    let gone = run(
        compose,
        &with_required(bare.clone(), "cluster-eks-h200-us-west", &[]),
    )
    .unwrap();
    assert!(gone.requirements.contains_key(CLUSTERS));
    assert_eq!(gone.conditions[0].reason, "WaitingForClusters");
    let req = with_required(
        with_required(bare, "cluster-eks-h200-us-west", &[]),
        CLUSTERS,
        &[dynamo()],
    );
    let moved = run(compose, &req).unwrap();
    assert_eq!(
        moved.requirements, gone.requirements,
        "settles once the candidates arrive"
    );
    assert_eq!(moved.status["replicas"][0]["cluster"], "eks-h200-us-east");
}

#[test]
fn seed_on_standard_is_a_leader_worker_set_with_distinct_templates() {
    let out = compose_on(seed(), &[standard()]);
    let lws = manifest(&out, "replica-0-eks-h200-us-west-qwen3-coder");
    assert_eq!(lws["kind"], "LeaderWorkerSet");
    assert_eq!(lws["metadata"]["namespace"], "ml-team");
    let template = &lws["spec"]["leaderWorkerTemplate"];
    assert_eq!(
        (lws["spec"]["replicas"].clone(), template["size"].clone()),
        (json!(1), json!(2))
    );
    let leader = &template["leaderTemplate"]["spec"]["containers"][0];
    let worker = &template["workerTemplate"]["spec"]["containers"][0];
    assert_ne!(leader["command"], worker["command"]);
    assert_eq!(
        env_names(leader),
        ["MODELPLANE_LEADER_ADDRESS", "MODELPLANE_RANK", "HF_HUB_CACHE"]
    );
    assert_eq!(leader["env"][0]["value"], "$(LWS_LEADER_ADDRESS)");
    assert_eq!(leader["env"][1]["value"], "$(LWS_WORKER_INDEX)");
    let pod = &template["workerTemplate"]["spec"];
    assert_eq!(pod["nodeSelector"], json!({"modelplane.ai/pool": "gpu"}));
    assert_eq!(
        pod["tolerations"],
        json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    );
    assert_eq!(
        pod["volumes"][1],
        json!({"name": "model-cache", "persistentVolumeClaim": {"claimName": "modelcache-qwen3-coder"}})
    );
    assert_eq!(
        template["leaderTemplate"]["metadata"]["labels"]["modelplane.ai/serving"], lws["metadata"]["name"],
        "only the leader serves"
    );
    assert!(
        template["workerTemplate"]["metadata"]["labels"]
            .get("modelplane.ai/serving")
            .is_none()
    );
    let service = manifest(&out, "replica-0-eks-h200-us-west-qwen3-coder-service");
    assert_ne!(
        service["metadata"]["name"], lws["metadata"]["name"],
        "LWS creates its headless Service under its own name"
    );
    assert_eq!(service["spec"]["ports"][0]["port"], 8000);
    let claims = manifest(&out, "replica-0-eks-h200-us-west-qwen3-coder-worker-claims");
    assert_eq!(
        claims["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"], 8,
        "every pod claims its eight GPUs"
    );
    let object = &out.resources["replica-0-eks-h200-us-west-qwen3-coder"].object;
    assert_eq!(
        object["spec"]["providerConfigRef"],
        json!({"kind": "ClusterProviderConfig", "name": "eks-h200-us-west"})
    );
    assert_eq!(object["spec"]["readiness"]["policy"], "DeriveFromCelQuery");
}

#[test]
fn seed_on_dynamo_is_a_pod_clique_set_gang_for_kai() {
    let mut xr = seed();
    xr["spec"]["template"]["spec"]["engines"][0]["copies"] = json!(3);
    let mut cluster = dynamo();
    cluster["status"]["pools"][0]["nodeCount"] = json!(6);
    let out = compose_on(xr, &[cluster]);
    let pcs = manifest(&out, "replica-0-eks-h200-us-east-qwen3-coder");
    assert_eq!(pcs["kind"], "PodCliqueSet");
    assert_eq!(pcs["spec"]["replicas"], 1);
    let template = &pcs["spec"]["template"];
    assert_eq!(
        template["podCliqueScalingGroups"],
        json!([{"name": "gang", "cliqueNames": ["leader", "worker"], "replicas": 3, "minAvailable": 3}])
    );
    let name_length = pcs["metadata"]["name"].as_str().unwrap().len() + "gang".len() + "leader".len();
    assert!(name_length <= 45, "Grove's name budget");
    for clique in template["cliques"].as_array().unwrap() {
        assert_eq!(clique["labels"]["kai.scheduler/queue"], "modelplane");
        let pod = &clique["spec"]["podSpec"];
        assert_eq!(pod["schedulerName"], "kai-scheduler");
        let env = env_names(&pod["containers"][0]);
        assert_eq!(
            env,
            [
                "MODELPLANE_GANG_INDEX",
                "MODELPLANE_LEADER_ADDRESS",
                "MODELPLANE_RANK",
                "MX_SERVER_ADDRESS",
                "MODEL_EXPRESS_URL",
                "MX_MODEL_REVISION",
                "MX_P2P_METADATA",
                "POD_NAME",
                "POD_UID",
                "POD_NAMESPACE",
                "HF_HUB_CACHE"
            ]
        );
    }
    let ranks: Vec<&Value> = template["cliques"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["spec"]["podSpec"]["containers"][0]["env"][2]["value"])
        .collect();
    assert_eq!(ranks, [&json!("0"), &json!("1")]);
}

#[test]
fn the_engine_container_is_the_same_on_both_stacks_but_for_stack_env_and_capabilities() {
    let on_standard = compose_on(seed(), &[standard()]);
    let on_dynamo = compose_on(seed(), &[dynamo()]);
    let lws =
        &manifest(&on_standard, "replica-0-eks-h200-us-west-qwen3-coder")["spec"]["leaderWorkerTemplate"];
    let cliques =
        &manifest(&on_dynamo, "replica-0-eks-h200-us-east-qwen3-coder")["spec"]["template"]["cliques"];
    let user = &seed()["spec"]["template"]["spec"]["engines"][0]["members"];
    for (m, (standard_pod, dynamo_pod)) in [
        (&lws["leaderTemplate"]["spec"], &cliques[0]["spec"]["podSpec"]),
        (&lws["workerTemplate"]["spec"], &cliques[1]["spec"]["podSpec"]),
    ]
    .into_iter()
    .enumerate()
    {
        let (mut a, mut b) = (
            standard_pod["containers"][0].clone(),
            dynamo_pod["containers"][0].clone(),
        );
        let written = &user[m]["template"]["spec"]["containers"][0];
        for field in ["image", "command"] {
            assert_eq!(a[field], written[field], "{field} passes through byte for byte");
        }
        let (env_a, env_b) = (
            a.as_object_mut().unwrap().remove("env"),
            b.as_object_mut().unwrap().remove("env"),
        );
        assert_eq!(
            b.as_object_mut().unwrap().remove("securityContext"),
            Some(json!({"capabilities": {"add": ["IPC_LOCK"]}})),
            "Dynamo pins memory for GPUDirect transfers"
        );
        assert_eq!(
            a, b,
            "member {m}: everything but env and capabilities is identical"
        );
        let stack_specific = [
            "MODELPLANE_LEADER_ADDRESS",
            "MODELPLANE_RANK",
            "MODELPLANE_GANG_INDEX",
            "MX_SERVER_ADDRESS",
            "MODEL_EXPRESS_URL",
            "MX_MODEL_REVISION",
            "MX_P2P_METADATA",
            "POD_NAME",
            "POD_UID",
            "POD_NAMESPACE",
        ];
        let common = |env: Option<Value>| -> Vec<Value> {
            env.unwrap()
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| !stack_specific.contains(&e["name"].as_str().unwrap()))
                .cloned()
                .collect()
        };
        assert_eq!(common(env_a), common(env_b));
        for pod in [standard_pod, dynamo_pod] {
            assert_eq!(pod["nodeSelector"], json!({"modelplane.ai/pool": "gpu"}));
        }
    }
}

#[test]
fn standalone_engines_are_deployments_on_both_stacks() {
    let small = example("examples/deployments/qwen3-small.yaml");
    let out = compose_on(small.clone(), &[standard(), dynamo()]);
    let clusters: Vec<&str> = out.status["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cluster"].as_str().unwrap())
        .collect();
    let mut spread = clusters.clone();
    spread.sort();
    assert_eq!(
        spread,
        ["eks-h200-us-east", "eks-h200-us-west"],
        "replicas spread"
    );
    for (replica, cluster) in clusters.into_iter().enumerate() {
        let deployment = manifest(&out, &format!("replica-{replica}-{cluster}-qwen3"));
        assert_eq!(deployment["kind"], "Deployment");
        assert_eq!(deployment["spec"]["replicas"], 2, "replicas = copies");
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["args"],
            small["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"]
                [0]["args"]
        );
        assert_eq!(
            env_names(container).last(),
            Some(&"VLLM_LOGGING_LEVEL"),
            "the user's env comes last"
        );
        assert_eq!(deployment["spec"]["template"]["metadata"]["labels"]["team"], "ml");
    }
}

#[test]
fn a_running_replica_is_read_back_and_stays_put() {
    let first = compose_on(seed(), &[dynamo(), standard()]);
    assert_eq!(first.status["replicas"][0]["cluster"], "eks-h200-us-east");
    // Pretend the replica runs on us-west: its observed Objects say so, and it stays there.
    let mut req = with_required(request(seed()), CLUSTERS, &[dynamo(), standard()]);
    let observed = json!({"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
        "metadata": {"annotations": {"modelplane.ai/replica": "0", "modelplane.ai/cluster": "eks-h200-us-west",
                                     "modelplane.ai/engine": "qwen3-coder", "modelplane.ai/pool": "gpu"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    req = with_observed(req, "replica-0-eks-h200-us-west-qwen3-coder", &observed);
    let out = run(compose, &req).unwrap();
    assert_eq!(out.status["replicas"][0]["cluster"], "eks-h200-us-west");
    assert!(
        out.resources["replica-0-eks-h200-us-west-qwen3-coder"].ready,
        "ready from the observed Object"
    );
    assert!(
        !out.resources["replica-0-eks-h200-us-west-qwen3-coder-service"].ready,
        "not observed yet"
    );
}

#[test]
fn nodes_held_by_other_deployments_are_not_offered() {
    // Another deployment holds one of the pool's two nodes, by the cluster's ledger; an entry of this
    // deployment's own replica 1 (no longer wanted) is not counted against it twice.
    let cluster = with_holders(
        standard(),
        &[("team-b/other", 0, 1), ("ml-team/qwen3-coder", 1, 2)],
    );
    let req = with_required(request(seed()), CLUSTERS, &[cluster]);
    let out = run(compose, &req).unwrap();
    assert!(out.resources.is_empty());
    assert_eq!(out.status["replicas"][0]["reason"], "InsufficientCapacity");
    assert_eq!(
        out.status["replicas"][0]["rejections"][0]["reason"],
        "engine \"qwen3-coder\": needs 2 nodes, 1 free"
    );
    assert_eq!(out.conditions[0].reason, "InsufficientCapacity");
    assert_eq!(out.ready, Some(false));
    assert_eq!(out.ttl, Some(WAITING_TTL));
}

#[test]
fn an_empty_fleet_reports_no_matching_cluster() {
    let out = compose_on(seed(), &[]);
    assert_eq!(out.status["replicas"][0]["reason"], "NoMatchingCluster");
    assert_eq!(out.status["placedReplicas"], 0);
}

#[test]
fn a_container_not_named_engine_is_fatal_and_names_the_field() {
    let mut xr = seed();
    xr["spec"]["template"]["spec"]["engines"][0]["members"][1]["template"]["spec"]["containers"][0]["name"] =
        json!("vllm");
    let err = run(compose, &request(xr)).unwrap_err();
    assert_eq!(
        err.path,
        "spec.template.spec.engines[0].members[1].template.spec.containers"
    );
}

#[test]
fn the_same_request_composes_the_same_output() {
    assert_eq!(
        compose_on(seed(), &[standard(), dynamo()]),
        compose_on(seed(), &[standard(), dynamo()])
    );
}

#[test]
fn replica_waits_for_its_cache_instead_of_starting_on_an_empty_volume() {
    for phase in ["Pending", "Hydrating", "Failed"] {
        let out = compose_with_cache(seed(), &[dynamo()], &[cache(&[dynamo()], phase)]);
        assert_eq!(
            out.resources.keys().collect::<Vec<_>>(),
            ["replica-0-eks-h200-us-east-namespace"],
            "{phase}"
        );
        let waiting = out.status["replicas"][0]["waitingFor"].as_str().unwrap();
        assert!(
            waiting.contains(phase) && waiting.contains("eks-h200-us-east"),
            "{waiting}"
        );
        let condition = out.conditions.iter().find(|c| c.type_ == "CacheReady").unwrap();
        assert_eq!(
            (condition.status, condition.reason),
            (Status::ConditionFalse, "CacheNotReady")
        );
        assert_eq!(out.ready, Some(false));
        // The cache composer stages where replicas are placed, so the placement is reported while waiting.
        assert_eq!(out.status["replicas"][0]["cluster"], "eks-h200-us-east");
    }
}

#[test]
fn a_missing_cache_is_named_in_the_condition() {
    let out = compose_with_cache(seed(), &[standard()], &[]);
    assert!(
        !out.resources
            .contains_key("replica-0-eks-h200-us-west-qwen3-coder")
    );
    let condition = out.conditions.iter().find(|c| c.type_ == "CacheReady").unwrap();
    assert_eq!(condition.reason, "CacheNotFound");
    assert!(
        condition
            .message
            .as_deref()
            .unwrap()
            .contains("spec.template.spec.modelCacheRef")
    );
}

/// Tenancy: another team's ModelCache of the same name, staged and Ready, is not this deployment's cache; its
/// engines wait, and nothing composed names the other namespace.
#[test]
fn another_namespaces_cache_of_the_same_name_is_not_the_deployments() {
    let mut theirs = cache(&[standard()], "Ready");
    theirs["metadata"]["namespace"] = json!("other-team");
    let out = compose_with_cache(seed(), &[standard()], &[theirs]);
    let condition = out.conditions.iter().find(|c| c.type_ == "CacheReady").unwrap();
    assert_eq!(condition.reason, "CacheNotFound");
    assert!(
        !out.resources
            .contains_key("replica-0-eks-h200-us-west-qwen3-coder"),
        "engines started on another team's cache"
    );
    let composed =
        serde_json::to_string(&out.resources.values().map(|r| &r.object).collect::<Vec<_>>()).unwrap();
    assert!(!composed.contains("other-team"), "{composed}");
}

#[test]
fn every_engine_pod_mounts_the_cache_once_it_is_ready_on_both_stacks() {
    for cluster in [standard(), dynamo()] {
        let out = compose_on(seed(), std::slice::from_ref(&cluster));
        let key = format!(
            "replica-0-{}-qwen3-coder",
            cluster["metadata"]["name"].as_str().unwrap()
        );
        let text = serde_json::to_string(manifest(&out, &key)).unwrap();
        assert_eq!(
            text.matches("\"claimName\":\"modelcache-qwen3-coder\"").count(),
            2,
            "leader and worker"
        );
        assert_eq!(text.matches("\"HF_HUB_CACHE\"").count(), 2);
        let condition = out.conditions.iter().find(|c| c.type_ == "CacheReady").unwrap();
        assert_eq!(condition.status, Status::ConditionTrue);
    }
}

#[test]
fn running_engines_are_not_stopped_when_the_cache_status_changes() {
    let clusters = [dynamo()];
    let running = compose_on(seed(), &clusters);
    let mut req = with_required(request(seed()), CLUSTERS, &clusters);
    req = with_required(req, CACHE, &[cache(&clusters, "Hydrating")]);
    for (key, composed) in &running.resources {
        req = with_observed(req, key, &Value::Object(composed.object.to_map()));
    }
    let out = run(compose, &req).unwrap();
    assert!(
        out.resources
            .contains_key("replica-0-eks-h200-us-east-qwen3-coder")
    );
}

/// Pod labels and annotations: the deployment's template metadata, then each member's over it, then ours over
/// both; one member's metadata never reaches another's pods.
#[test]
fn pod_metadata_is_the_deployments_under_the_members_under_ours() {
    let mut xr = seed();
    xr["spec"]["template"]["metadata"] = json!({
        "labels": {"team": "ml", "tier": "deployment"},
        "annotations": {"owner": "ml", "note": "deployment"},
    });
    xr["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["metadata"] = json!({
        "labels": {"tier": "leader"},
        "annotations": {"note": "leader"},
    });
    let out = compose_on(xr, &[standard()]);
    let lws = manifest(&out, "replica-0-eks-h200-us-west-qwen3-coder");
    let template = &lws["spec"]["leaderWorkerTemplate"];
    let leader = &template["leaderTemplate"]["metadata"];
    assert_eq!(leader["annotations"], json!({"owner": "ml", "note": "leader"}));
    assert_eq!(
        (&leader["labels"]["team"], &leader["labels"]["tier"]),
        (&json!("ml"), &json!("leader"))
    );
    assert_eq!(
        leader["labels"]["modelplane.ai/workload"],
        lws["metadata"]["name"]
    );
    let worker = &template["workerTemplate"]["metadata"];
    assert_eq!(
        worker["annotations"],
        json!({"owner": "ml", "note": "deployment"})
    );
    assert_eq!(worker["labels"]["tier"], "deployment");
}
