//! Prefill/decode disaggregation on both stacks: the two phase engines are the stack's workloads (Deployments,
//! and for a gang a LeaderWorkerSet or a PodCliqueSet), selected by the replica's one InferencePool and
//! labelled by role on their serving pods only; the decode serving pod gets the disaggregation sidecar on the
//! serving port with the engine and its probes on the engine's own port; every pod of both engines gets NIXL's
//! side channel; the picker is configured to split; and the replica is Ready only once both phases are.

use serde_json::{Value, json};

use super::{
    engine_tests::next_request,
    tests::{compose_on, compose_with_cache, dynamo, env_names, example, manifest, seed, standard},
    *,
};
use crate::compose::fixtures::{request, run, with_required};

const ROLE: &str = "llm-d.ai/role";
const POOL: &str = "modelplane.ai/inference-pool";

fn pd() -> Value {
    example("examples/deployments/qwen3-235b-pd.yaml")
}

/// The example with its decode engine a Leader and one Worker.
fn pd_gang() -> Value {
    let mut xr = pd();
    let decode = &mut xr["spec"]["template"]["spec"]["engines"][1];
    let mut leader = decode["members"][0].clone();
    leader["role"] = json!("Leader");
    let mut worker = leader.clone();
    worker["role"] = json!("Worker");
    worker["worker"] = json!({"nodes": 1});
    worker["template"]["spec"]["containers"][0]["args"] = json!(["--headless"]);
    decode["members"] = json!([leader, worker]);
    xr
}

/// `cluster` with room for both engines of a gang variant and a gateway address, so the replica is routed.
fn roomy(mut cluster: Value) -> Value {
    cluster["status"]["pools"][0]["nodeCount"] = json!(4);
    cluster["status"]["gateway"] = crate::compose::fixtures::reachable_gateway("203.0.113.7");
    cluster
}

fn compose_pd(xr: Value, cluster: &Value) -> Output {
    compose_with_cache(xr, std::slice::from_ref(cluster), &[])
}

fn name_of(cluster: &Value) -> &str {
    cluster["metadata"]["name"].as_str().unwrap()
}

/// A workload's pod templates as (labels, pod spec), the serving one first.
fn pods(workload: &Value) -> Vec<(&Value, &Value)> {
    let spec = &workload["spec"];
    match workload["kind"].as_str().unwrap() {
        "Deployment" => vec![(&spec["template"]["metadata"]["labels"], &spec["template"]["spec"])],
        "LeaderWorkerSet" => ["leaderTemplate", "workerTemplate"]
            .iter()
            .map(|t| {
                let t = &spec["leaderWorkerTemplate"][*t];
                (&t["metadata"]["labels"], &t["spec"])
            })
            .collect(),
        "PodCliqueSet" => spec["template"]["cliques"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (&c["labels"], &c["spec"]["podSpec"]))
            .collect(),
        other => panic!("not a workload: {other}"),
    }
}

fn container_names(pod: &Value) -> Vec<&str> {
    pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

fn probe_port(container: &Value, probe: &str) -> Value {
    container[probe]["httpGet"]["port"].clone()
}

#[test]
fn both_phases_are_the_stacks_workloads_selected_by_one_pool_and_only_serving_pods_carry_a_role() {
    let cases = [
        (pd(), standard(), ["Deployment", "Deployment"]),
        (pd(), dynamo(), ["Deployment", "Deployment"]),
        (pd_gang(), standard(), ["Deployment", "LeaderWorkerSet"]),
        (pd_gang(), dynamo(), ["Deployment", "PodCliqueSet"]),
    ];
    for (xr, cluster, kinds) in cases {
        let cluster = roomy(cluster);
        let out = compose_pd(xr, &cluster);
        let at = name_of(&cluster);
        let pool = manifest(&out, &format!("routing-0-{at}-pool"));
        let selector = pool["spec"]["selector"]["matchLabels"].as_object().unwrap();
        assert_eq!(selector.len(), 1, "{selector:?}");
        for ((engine, role), kind) in [("prefill", "prefill"), ("decode", "decode")]
            .into_iter()
            .zip(kinds)
        {
            let workload = manifest(&out, &format!("replica-0-{at}-{engine}"));
            assert_eq!(workload["kind"], kind, "{at} {engine}");
            let pods = pods(workload);
            let (serving, _) = pods[0];
            assert_eq!(
                serving[POOL], selector[POOL],
                "{at} {engine}: the pool selects it"
            );
            assert_eq!(serving[ROLE], role, "{at} {engine}");
            for (labels, _) in &pods[1..] {
                assert!(
                    labels.get(POOL).is_none() && labels.get(ROLE).is_none(),
                    "{at}: a worker: {labels}"
                );
            }
        }
    }
}

#[test]
fn the_decode_serving_pod_gets_the_sidecar_and_its_engine_and_probes_move_to_the_engines_port() {
    for (xr, cluster) in [(pd(), standard()), (pd_gang(), standard()), (pd_gang(), dynamo())] {
        let cluster = roomy(cluster);
        let at = name_of(&cluster);
        let out = compose_pd(xr, &cluster);
        let decode = pods(manifest(&out, &format!("replica-0-{at}-decode")));
        let (_, serving) = decode[0];
        assert_eq!(container_names(serving), ["engine", "pd-sidecar"], "{at}");
        let (engine, sidecar) = (&serving["containers"][0], &serving["containers"][1]);
        assert_eq!(probe_port(engine, "startupProbe"), 8001, "{at}");
        assert_eq!(probe_port(engine, "readinessProbe"), 8001, "{at}");
        assert_eq!(
            sidecar["image"],
            "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0"
        );
        assert_eq!(
            sidecar["args"],
            json!([
                "--secure-proxy=false",
                "--kv-connector=nixlv2",
                "--vllm-port=8001"
            ])
        );
        assert_eq!(sidecar["ports"][0]["containerPort"], 8000);
        assert_eq!(probe_port(sidecar, "readinessProbe"), 8000);
        for (_, worker) in &decode[1..] {
            assert_eq!(
                container_names(worker),
                ["engine"],
                "{at}: only the leader serves"
            );
            assert!(worker["containers"][0].get("readinessProbe").is_none());
        }
        let prefill = pods(manifest(&out, &format!("replica-0-{at}-prefill")));
        let (_, prefill) = prefill[0];
        assert_eq!(container_names(prefill), ["engine"]);
        assert_eq!(probe_port(&prefill["containers"][0], "readinessProbe"), 8000);
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    }
}

fn decode_args(xr: &mut Value) -> &mut Value {
    &mut xr["spec"]["template"]["spec"]["engines"][1]["members"][0]["template"]["spec"]["containers"][0]["args"]
}

#[test]
fn a_decode_engine_on_a_port_of_its_own_is_reached_there_and_one_stating_none_is_assumed_on_8001() {
    let cluster = roomy(standard());
    let mut own = pd();
    decode_args(&mut own)[3] = json!("--port 9100");
    let out = compose_pd(own, &cluster);
    let (_, serving) = pods(manifest(&out, "replica-0-eks-h200-us-west-decode"))[0];
    assert_eq!(probe_port(&serving["containers"][0], "readinessProbe"), 9100);
    assert_eq!(serving["containers"][1]["args"][2], "--vllm-port=9100");

    let mut none = pd();
    decode_args(&mut none).as_array_mut().unwrap().remove(3);
    let out = compose_pd(none, &cluster);
    let (_, serving) = pods(manifest(&out, "replica-0-eks-h200-us-west-decode"))[0];
    assert_eq!(serving["containers"][1]["args"][2], "--vllm-port=8001");
    assert!(
        out.warnings.iter().any(|w| w
            .starts_with("spec.template.spec.engines[1].members[0].template.spec.containers[0]:")
            && w.contains("--port=8001")),
        "{:?}",
        out.warnings
    );
}

#[test]
fn a_decode_engine_on_the_sidecars_port_or_on_no_port_is_refused_naming_its_container() {
    for (port, why) in [
        ("--port=8000", "where the disaggregation sidecar listens"),
        ("--port=http", "is not a port"),
    ] {
        let mut xr = pd();
        decode_args(&mut xr)[3] = json!(port);
        let req = with_required(request(xr), CLUSTERS, &[roomy(standard())]);
        let error = run(compose, &req).unwrap_err().to_string();
        assert!(
            error.starts_with("spec.template.spec.engines[1].members[0].template.spec.containers[0]: ")
                && error.contains(why),
            "{port}: {error}"
        );
    }
}

#[test]
fn every_pod_of_both_engines_gets_the_nixl_side_channel_and_one_shared_memory_mount() {
    for cluster in [standard(), dynamo()] {
        let cluster = roomy(cluster);
        let at = name_of(&cluster);
        let out = compose_pd(pd_gang(), &cluster);
        for engine in ["prefill", "decode"] {
            for (_, pod) in pods(manifest(&out, &format!("replica-0-{at}-{engine}"))) {
                let container = &pod["containers"][0];
                let names = env_names(container);
                assert!(
                    names.contains(&"VLLM_NIXL_SIDE_CHANNEL_HOST")
                        && names.contains(&"VLLM_NIXL_SIDE_CHANNEL_PORT"),
                    "{at} {engine}: {names:?}"
                );
                let host = container["env"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|e| e["name"] == "VLLM_NIXL_SIDE_CHANNEL_HOST")
                    .unwrap();
                assert_eq!(host["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
                let shm: Vec<&Value> = container["volumeMounts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|m| m["mountPath"] == "/dev/shm")
                    .collect();
                assert_eq!(shm.len(), 1, "{at} {engine}");
                let volume = pod["volumes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|v| v["name"] == shm[0]["name"])
                    .unwrap();
                assert_eq!(volume["emptyDir"]["medium"], "Memory");
            }
        }
    }
}

fn picker_config(out: &Output, cluster: &str) -> String {
    manifest(out, &format!("routing-0-{cluster}-picker-config"))["data"]["epp-config.yaml"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn the_picker_splits_requests_in_the_decode_engines_blocks_and_unified_serving_is_not_split() {
    let cluster = roomy(standard());
    let mut xr = pd();
    decode_args(&mut xr)
        .as_array_mut()
        .unwrap()
        .push(json!("--block-size=32"));
    let config: Value =
        serde_yaml::from_str(&picker_config(&compose_pd(xr, &cluster), "eks-h200-us-west")).unwrap();
    let plugins: Vec<&str> = config["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    for wanted in [
        "disagg-headers-handler",
        "prefill-filter",
        "decode-filter",
        "prefix-based-pd-decider",
        "disagg-profile-handler",
    ] {
        assert!(plugins.contains(&wanted), "{wanted}: {plugins:?}");
    }
    let parameters = |kind: &str| {
        config["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["type"] == kind)
            .unwrap()["parameters"]
            .clone()
    };
    assert_eq!(parameters("approx-prefix-cache-producer")["blockSizeTokens"], 32);
    assert_eq!(parameters("prefix-based-pd-decider")["nonCachedTokens"], 16);
    assert_eq!(
        parameters("disagg-profile-handler")["deciders"]["prefill"],
        "prefix-based-pd-decider"
    );
    let profiles: Vec<(&str, &str)> = config["schedulingProfiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                p["plugins"][0]["pluginRef"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        profiles,
        [("prefill", "prefill-filter"), ("decode", "decode-filter")]
    );
    // Every profile's plugins are declared.
    for profile in config["schedulingProfiles"].as_array().unwrap() {
        for plugin in profile["plugins"].as_array().unwrap() {
            assert!(plugins.contains(&plugin["pluginRef"].as_str().unwrap()));
        }
    }

    // The seed loads from its ModelCache: staged, so its engines and routing are composed.
    let unified = compose_on(seed(), &[roomy(standard())]);
    let config = picker_config(&unified, "eks-h200-us-west");
    assert!(
        !config.contains("prefill") && !config.contains("disagg"),
        "{config}"
    );
    let leader = &pods(manifest(&unified, "replica-0-eks-h200-us-west-qwen3-coder"))[0];
    assert!(leader.0.get(ROLE).is_none());
    assert_eq!(container_names(leader.1), ["engine"]);
    assert!(!env_names(&leader.1["containers"][0]).contains(&"VLLM_NIXL_SIDE_CHANNEL_HOST"));
}

#[test]
fn the_replica_is_ready_and_routed_only_once_both_phases_are() {
    let cluster = roomy(standard());
    let clusters = std::slice::from_ref(&cluster);
    let placed = compose_pd(pd(), &cluster);
    let step = |previous: &Output, ready: &dyn Fn(&str) -> bool| {
        run(compose, &next_request(&pd(), clusters, previous, ready)).unwrap()
    };
    let prefill_only = step(&placed, &|k| !k.ends_with("-decode"));
    assert_eq!(prefill_only.status["replicas"][0]["ready"], false);
    assert!(!prefill_only.resources.keys().any(|k| k.starts_with("endpoint-")));
    let decode_only = step(&placed, &|k| !k.ends_with("-prefill"));
    assert_eq!(decode_only.status["replicas"][0]["ready"], false);
    assert!(!decode_only.resources.keys().any(|k| k.starts_with("endpoint-")));
    let both = step(&placed, &|_| true);
    assert_eq!(both.status["replicas"][0]["ready"], true);
    let endpoint = &both.resources["endpoint-0-eks-h200-us-west"].object;
    assert_eq!(
        endpoint["spec"]["model"], "qwen3-235b",
        "the decode engine's name"
    );
}

/// Metrics: each phase's serving engine is scraped where it answers (the decode engine behind the sidecar on its
/// own port), its pods found by the serving label, its series stamped with cluster, deployment, replica and role;
/// the engine declares that port (the sidecar's stays its own); and `observability.metrics.enabled: false`
/// composes no scrape at all.
#[test]
fn each_phase_engine_is_scraped_on_its_own_port_unless_collection_is_off() {
    for (xr, cluster) in [(pd(), standard()), (pd_gang(), dynamo())] {
        let cluster = roomy(cluster);
        let at = name_of(&cluster);
        let out = compose_pd(xr.clone(), &cluster);
        for (engine, port) in [("prefill", 8000), ("decode", 8001)] {
            let workload = manifest(&out, &format!("replica-0-{at}-{engine}"));
            let serving_label = pods(workload)[0].0["modelplane.ai/serving"].clone();
            let monitor = manifest(&out, &format!("replica-0-{at}-{engine}-metrics"));
            assert_eq!(monitor["kind"], "PodMonitor");
            assert_eq!(
                monitor["spec"]["selector"]["matchLabels"],
                json!({"modelplane.ai/serving": serving_label})
            );
            let endpoint = &monitor["spec"]["podMetricsEndpoints"][0];
            assert_eq!(endpoint["portNumber"], port, "{at} {engine}");
            let stamped: Vec<(&str, &str)> = endpoint["relabelings"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|r| Some((r["targetLabel"].as_str()?, r["replacement"].as_str()?)))
                .collect();
            assert_eq!(
                stamped,
                [
                    ("job", "modelplane-engine"),
                    ("cluster", at),
                    ("deployment", "qwen3-235b-pd"),
                    ("replica", "0")
                ],
                "{at} {engine}"
            );
            let (_, serving) = pods(workload)[0];
            assert_eq!(
                serving["containers"][0]["ports"],
                json!([{"containerPort": port, "protocol": "TCP"}]),
                "{at} {engine}: the engine declares where it is scraped"
            );
        }
        let mut off = xr;
        off["spec"]["template"]["spec"]["observability"] = json!({"metrics": {"enabled": false}});
        let out = compose_pd(off, &cluster);
        assert!(
            !out.resources.keys().any(|k| k.ends_with("-metrics")),
            "{:?}",
            out.resources.keys()
        );
    }
}
