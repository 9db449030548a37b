use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::api::model_deployment::UnplacedReason;
use crate::api::{
    inference_class::Device,
    inference_cluster::{PoolStatus, Taint},
    model_deployment::ReplicaSpec,
};

/// The deployment every case places.
const SPREAD_KEY: &str = "default/llama";

fn gpu(memory: &str, compute: &str) -> Value {
    json!({"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 8,
           "attributes": {"architecture": {"string": "Hopper"}, "cudaComputeCapability": {"version": compute}},
           "capacity": {"memory": {"value": memory}}})
}

fn host_memory() -> Value {
    json!({"name": "memory", "claim": "Synthetic", "count": 1, "capacity": {"memory": {"value": "2Ti"}}})
}

fn pool(name: &str, nodes: u32, devices: Value) -> PoolStatus {
    let devices: Vec<Device> = serde_json::from_value(devices).unwrap();
    PoolStatus {
        name: name.into(),
        class_name: format!("class-{}", devices.len()),
        node_count: nodes,
        min_node_count: None,
        max_node_count: None,
        efa_interfaces: 0,
        devices,
        allocated_nodes: 0,
        holders: Vec::new(),
    }
}

fn h200(name: &str, nodes: u32) -> PoolStatus {
    pool(name, nodes, json!([gpu("141Gi", "9.0.0")]))
}

fn cluster(name: &str, pools: Vec<PoolStatus>) -> ClusterView {
    let mut c: ClusterView = serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"providerConfigName": name, "conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .unwrap();
    c.status.pools = pools;
    c
}

fn labeled(mut c: ClusterView, key: &str, value: &str) -> ClusterView {
    c.metadata.labels.insert(key.into(), value.into());
    c
}

fn tainted(mut c: ClusterView, effect: &str) -> ClusterView {
    let taint: Taint = serde_json::from_value(json!({"key": "maintenance", "effect": effect})).unwrap();
    c.spec.taints.push(taint);
    c
}

const BIG_GPU: &str = r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("120Gi")) >= 0"#;

/// A two-node gang (leader + one worker) with `copies` copies, each pod asking for 8 GPUs matching `selector`.
fn gang(copies: u32, selector: &str) -> Value {
    let devices = json!({"devices": [{"name": "gpu", "count": 8, "selectors": [{"cel": selector}]}]});
    let container = json!({"spec": {"containers": [{"name": "engine", "image": "vllm"}]}});
    json!({"engines": [{"name": "coder", "copies": copies, "members": [
        {"role": "Leader", "nodeSelector": devices, "template": container},
        {"role": "Worker", "worker": {"nodes": 1}, "nodeSelector": devices, "template": container},
    ]}]})
}

fn standalone(requests: Value) -> Value {
    json!({"engines": [{"name": "small", "members": [{"role": "Standalone", "nodeSelector": {"devices": requests},
        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm"}]}}}]}]})
}

fn with(mut spec: Value, field: &str, value: Value) -> Value {
    spec[field] = value;
    spec
}

fn pin(cluster: &str, engine: &str, pool: &str) -> Pin {
    Pin {
        cluster: cluster.into(),
        pools: BTreeMap::from([(engine.into(), pool.into())]),
    }
}

/// `cluster/pool` per placed replica (`*` marks a kept pin), or the reason it was not placed.
fn summary(outcomes: &[Outcome]) -> Vec<String> {
    outcomes
        .iter()
        .map(|o| match o {
            Outcome::Placed(p) => {
                let pools: Vec<&str> = p.engines.iter().map(|e| e.pool.name.as_str()).collect();
                let kept = if p.pinned { "*" } else { "" };
                format!("{}/{}{kept}", p.cluster.metadata.name, pools.join(","))
            }
            Outcome::Unplaced(u) => u.reason.as_str().to_owned(),
        })
        .collect()
}

struct Case {
    name: &'static str,
    reason: &'static str,
    clusters: Vec<ClusterView>,
    spec: Value,
    replicas: u32,
    pins: BTreeMap<u32, Pin>,
    used: BTreeMap<(String, String), u64>,
    want: &'static [&'static str],
}

impl Default for Case {
    fn default() -> Self {
        Self {
            name: "",
            reason: "",
            clusters: Vec::new(),
            spec: gang(1, BIG_GPU),
            replicas: 1,
            pins: BTreeMap::new(),
            used: BTreeMap::new(),
            want: &[],
        }
    }
}

fn run(case: &Case) -> Vec<String> {
    let spec: ReplicaSpec = serde_json::from_value(case.spec.clone()).unwrap();
    let outcomes = schedule(&Input {
        spec: &spec,
        replicas: case.replicas,
        clusters: &case.clusters,
        pins: &case.pins,
        used_elsewhere: &case.used,
        now: jiff::Timestamp::UNIX_EPOCH,
        spread_key: SPREAD_KEY,
    })
    .unwrap();
    summary(&outcomes)
}

#[test]
fn placement_table() {
    let cases = vec![
        Case {
            name: "cluster-selector",
            reason: "only clusters whose labels match the selector take replicas",
            clusters: vec![
                cluster("a", vec![h200("gpu", 2)]),
                labeled(cluster("b", vec![h200("gpu", 2)]), "region", "us"),
            ],
            spec: with(
                gang(1, BIG_GPU),
                "clusterSelector",
                json!({"matchLabels": {"region": "us"}}),
            ),
            want: &["b/gpu"],
            ..Case::default()
        },
        Case {
            name: "untolerated-noschedule-taint",
            reason: "a NoSchedule taint keeps new replicas off a cluster unless tolerated",
            clusters: vec![
                tainted(cluster("a", vec![h200("gpu", 2)]), "NoSchedule"),
                cluster("b", vec![h200("gpu", 2)]),
            ],
            want: &["b/gpu"],
            ..Case::default()
        },
        Case {
            name: "tolerated-taint",
            reason: "an Exists toleration of the key lets the replica onto the tainted cluster",
            clusters: vec![
                tainted(cluster("a", vec![h200("gpu", 2)]), "NoSchedule"),
                cluster("b", vec![h200("gpu", 2)]),
            ],
            spec: with(
                gang(1, BIG_GPU),
                "tolerations",
                json!([{"key": "maintenance", "operator": "Exists"}]),
            ),
            want: &["a/gpu"],
            ..Case::default()
        },
        Case {
            name: "cel-quantity",
            reason: "quantity() compares device memory: 80Gi GPUs fail a 120Gi floor, 141Gi pass",
            clusters: vec![cluster(
                "a",
                vec![pool("a100", 8, json!([gpu("80Gi", "8.0.0")])), h200("h200", 2)],
            )],
            want: &["a/h200"],
            ..Case::default()
        },
        Case {
            name: "cel-semver",
            reason: "semver() compares typed version attributes",
            clusters: vec![cluster(
                "a",
                vec![
                    pool("old", 8, json!([gpu("141Gi", "7.5.0")])),
                    pool("new", 8, json!([gpu("141Gi", "9.0.0")])),
                ],
            )],
            spec: standalone(json!([{"name": "gpu", "count": 1, "selectors": [{"cel":
                r#"device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))"#}]}])),
            want: &["a/new"],
            ..Case::default()
        },
        Case {
            name: "missing-attribute",
            reason: "a selector on an attribute the device lacks does not match it",
            clusters: vec![cluster("a", vec![h200("gpu", 8)])],
            spec: standalone(
                json!([{"name": "gpu", "selectors": [{"cel": r#"device.attributes["gpu.nvidia.com"].nvlink == true"#}]}]),
            ),
            want: &["NoMatchingCluster"],
            ..Case::default()
        },
        Case {
            name: "requests-share-a-node",
            reason: "a member's requests are allocated on its one node from devices the others left: 5 and 5 of 8 \
                     do not fit (kube-scheduler agrees, tests/controlplane/python/test_scheduler_agrees.py)",
            clusters: vec![cluster("a", vec![h200("gpu", 8)])],
            spec: standalone(json!([{"name": "a", "count": 5}, {"name": "b", "count": 5}])),
            want: &["NoMatchingCluster"],
            ..Case::default()
        },
        Case {
            name: "requests-split-a-node",
            reason: "4 and 4 of a node's 8 devices fit together",
            clusters: vec![cluster("a", vec![h200("gpu", 8)])],
            spec: standalone(json!([{"name": "a", "count": 4}, {"name": "b", "count": 4}])),
            want: &["a/gpu"],
            ..Case::default()
        },
        Case {
            name: "synthetic-only",
            reason: "a member whose requests match only synthetic devices has nothing to claim",
            clusters: vec![cluster(
                "a",
                vec![pool("gpu", 8, json!([gpu("141Gi", "9.0.0"), host_memory()]))],
            )],
            spec: standalone(
                json!([{"name": "ram", "selectors": [{"cel": r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("1Ti")) >= 0"#}]}]),
            ),
            want: &["NoMatchingCluster"],
            ..Case::default()
        },
        Case {
            name: "synthetic-alongside-dra",
            reason: "a synthetic match is fine next to a DRA match in the same member",
            clusters: vec![cluster(
                "a",
                vec![pool("gpu", 8, json!([gpu("141Gi", "9.0.0"), host_memory()]))],
            )],
            spec: standalone(
                json!([{"name": "gpu"}, {"name": "ram", "selectors": [{"cel": r#"device.driver == """#}]}]),
            ),
            want: &["a/gpu"],
            ..Case::default()
        },
        Case {
            name: "node-accounting-across-replicas",
            reason: "two copies of a two-node gang take four nodes; a four-node pool fits one replica",
            clusters: vec![cluster("a", vec![h200("gpu", 4)])],
            spec: gang(2, BIG_GPU),
            replicas: 2,
            want: &["a/gpu", "InsufficientCapacity"],
            ..Case::default()
        },
        Case {
            name: "node-accounting-across-deployments",
            reason: "nodes other deployments hold are not free",
            clusters: vec![cluster("a", vec![h200("gpu", 4)])],
            used: BTreeMap::from([(("a".into(), "gpu".into()), 3)]),
            want: &["InsufficientCapacity"],
            ..Case::default()
        },
        Case {
            name: "no-overcommit",
            reason: "three replicas over two clusters of room for one each: the third waits",
            clusters: vec![
                cluster("a", vec![h200("gpu", 2)]),
                cluster("b", vec![h200("gpu", 3)]),
            ],
            replicas: 3,
            want: &["a/gpu", "b/gpu", "InsufficientCapacity"],
            ..Case::default()
        },
        Case {
            name: "deterministic-ties-and-spread",
            reason: "equal clusters: this deployment's rank first (a before b, see ranks_are_fixed), then spread to \
                     the cluster with fewer replicas",
            clusters: vec![
                cluster("b", vec![h200("gpu", 8)]),
                cluster("a", vec![h200("gpu", 8)]),
            ],
            replicas: 3,
            want: &["a/gpu", "b/gpu", "a/gpu"],
            ..Case::default()
        },
        Case {
            name: "best-fit-pool",
            reason: "an engine takes the fitting pool that leaves the fewest nodes free",
            clusters: vec![cluster("a", vec![h200("big", 16), h200("small", 2)])],
            want: &["a/small"],
            ..Case::default()
        },
        Case {
            name: "pinned-replica-stays",
            reason: "a running replica stays on its cluster even where a new one would not go",
            clusters: vec![
                cluster("a", vec![h200("gpu", 2)]),
                cluster("b", vec![h200("gpu", 2)]),
            ],
            pins: BTreeMap::from([(0, pin("b", "coder", "gpu"))]),
            replicas: 2,
            want: &["b/gpu*", "a/gpu"],
            ..Case::default()
        },
        Case {
            name: "pinned-replica-keeps-its-nodes",
            reason: "replica 1's pin is counted before replica 0 is placed, so replica 0 cannot take its nodes",
            clusters: vec![cluster("a", vec![h200("gpu", 2)])],
            pins: BTreeMap::from([(1, pin("a", "coder", "gpu"))]),
            replicas: 2,
            want: &["InsufficientCapacity", "a/gpu*"],
            ..Case::default()
        },
        Case {
            name: "noexecute-taint-evicts",
            reason: "an untolerated NoExecute taint moves a running replica",
            clusters: vec![
                cluster("a", vec![h200("gpu", 2)]),
                tainted(cluster("b", vec![h200("gpu", 2)]), "NoExecute"),
            ],
            pins: BTreeMap::from([(0, pin("b", "coder", "gpu"))]),
            want: &["a/gpu"],
            ..Case::default()
        },
        Case {
            name: "noschedule-taint-does-not-evict",
            reason: "a NoSchedule taint keeps new replicas away but running ones stay",
            clusters: vec![
                cluster("a", vec![h200("gpu", 2)]),
                tainted(cluster("b", vec![h200("gpu", 2)]), "NoSchedule"),
            ],
            pins: BTreeMap::from([(0, pin("b", "coder", "gpu"))]),
            want: &["b/gpu*"],
            ..Case::default()
        },
        Case {
            name: "vanished-cluster",
            reason: "a replica whose cluster is gone is placed again",
            clusters: vec![cluster("a", vec![h200("gpu", 2)])],
            pins: BTreeMap::from([(0, pin("gone", "coder", "gpu"))]),
            want: &["a/gpu"],
            ..Case::default()
        },
        Case {
            name: "not-ready-cluster",
            reason: "a cluster without a usable status takes nothing",
            clusters: vec![{
                let mut c = cluster("a", vec![h200("gpu", 2)]);
                c.status.conditions.clear();
                c
            }],
            want: &["NoMatchingCluster"],
            ..Case::default()
        },
        Case {
            name: "no-clusters",
            reason: "an empty fleet places nothing",
            want: &["NoMatchingCluster"],
            ..Case::default()
        },
        Case {
            name: "scale-to-zero",
            reason: "zero replicas means no outcomes, pins or not",
            clusters: vec![cluster("a", vec![h200("gpu", 2)])],
            pins: BTreeMap::from([(0, pin("a", "coder", "gpu"))]),
            replicas: 0,
            want: &[],
            ..Case::default()
        },
    ];
    for case in &cases {
        let got = run(case);
        assert_eq!(got, case.want, "{}: {}", case.name, case.reason);
    }
}

#[test]
fn every_rejected_cluster_and_pool_has_a_reason() {
    let case = Case {
        clusters: vec![
            tainted(cluster("a", vec![h200("gpu", 2)]), "NoSchedule"),
            cluster(
                "b",
                vec![pool("a100", 8, json!([gpu("80Gi", "8.0.0")])), h200("h200", 1)],
            ),
            {
                let mut c = cluster("c", vec![h200("gpu", 2)]);
                c.status.provider_config_name.clear();
                c
            },
        ],
        ..Case::default()
    };
    let spec: ReplicaSpec = serde_json::from_value(case.spec.clone()).unwrap();
    let outcomes = schedule(&Input {
        spec: &spec,
        replicas: 1,
        clusters: &case.clusters,
        pins: &case.pins,
        used_elsewhere: &case.used,
        now: jiff::Timestamp::UNIX_EPOCH,
        spread_key: SPREAD_KEY,
    })
    .unwrap();
    let Outcome::Unplaced(unplaced) = &outcomes[0] else {
        panic!("expected no placement")
    };
    assert_eq!(unplaced.reason, UnplacedReason::InsufficientCapacity);
    let got: Vec<(String, Option<String>, bool)> = unplaced
        .rejections
        .iter()
        .map(|r| (r.cluster.clone(), r.pool.clone(), !r.reason.is_empty()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a".into(), None, true),
            ("b".into(), Some("a100".into()), true),
            ("b".into(), Some("h200".into()), true),
            ("c".into(), None, true),
        ]
    );
    let reasons: Vec<&str> = unplaced.rejections.iter().map(|r| r.reason.as_str()).collect();
    assert!(
        reasons[0].contains("untolerated taint maintenance"),
        "{reasons:?}"
    );
    assert!(reasons[1].contains("fails selectors[0]"), "{reasons:?}");
    assert!(reasons[2].contains("needs 2 nodes, 1 free"), "{reasons:?}");
    assert!(reasons[3].contains("providerConfigName"), "{reasons:?}");
}

#[test]
fn a_selector_that_does_not_compile_is_fatal_and_names_engine_member_and_request() {
    let spec: ReplicaSpec = serde_json::from_value(gang(1, "device.capacity[")).unwrap();
    let err = schedule(&Input {
        spec: &spec,
        replicas: 1,
        clusters: &[cluster("a", vec![h200("gpu", 2)])],
        pins: &BTreeMap::new(),
        used_elsewhere: &BTreeMap::new(),
        now: jiff::Timestamp::UNIX_EPOCH,
        spread_key: SPREAD_KEY,
    })
    .unwrap_err();
    assert_eq!(
        err.path,
        "spec.template.spec.engines[0].members[0].nodeSelector.devices[0].selectors[0].cel"
    );
    assert!(
        err.reason
            .starts_with(r#"engine "coder" member Leader request "gpu": CEL selector does not compile"#),
        "{}",
        err.reason
    );
}

/// Devices' values and selectors' verdicts are remembered across calls (`devices::Memo`): each call must still
/// get the verdict of its own devices under its own selector, runtime errors included, however often it asks.
#[test]
fn remembered_verdicts_belong_to_their_device_and_selector() {
    let place = |pools: Vec<PoolStatus>, selector: &str| -> Result<Vec<String>, String> {
        let spec: ReplicaSpec = serde_json::from_value(gang(1, selector)).unwrap();
        schedule(&Input {
            spec: &spec,
            replicas: 1,
            clusters: &[cluster("a", pools)],
            pins: &BTreeMap::new(),
            used_elsewhere: &BTreeMap::new(),
            now: jiff::Timestamp::UNIX_EPOCH,
            spread_key: SPREAD_KEY,
        })
        .map(|outcomes| summary(&outcomes))
        .map_err(|e| e.reason)
    };
    let a100 = || pool("a100", 8, json!([gpu("80Gi", "8.0.0")]));
    let unplaced = Ok(vec![UnplacedReason::NoMatchingCluster.as_str().to_owned()]);
    let small_gpu = r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("60Gi")) >= 0"#;
    let ill_typed = r#"device.attributes["gpu.nvidia.com"].architecture > 3"#;
    for _ in 0..3 {
        assert_eq!(
            place(vec![h200("h200", 2)], BIG_GPU),
            Ok(vec!["a/h200".to_owned()])
        );
        assert_eq!(place(vec![a100()], BIG_GPU), unplaced);
        assert_eq!(place(vec![a100()], small_gpu), Ok(vec!["a/a100".to_owned()]));
        let failed = place(vec![a100()], ill_typed).unwrap_err();
        assert!(failed.contains("CEL selector failed on device"), "{failed}");
    }
}

/// A deployment whose replicas could never fit in one response is refused before anything is placed; the floor
/// is every replica's containers as JSON, so one byte less per replica fits.
#[test]
fn replicas_whose_containers_outgrow_a_response_are_refused() {
    let replicas = 100;
    // Each replica carries the container twice (leader and worker).
    let per_member = crate::limits::MAX_RESPONSE_BYTES / replicas as usize / 2;
    let container_with_arg = |arg_len: usize| {
        let mut container = json!({"name": "engine", "image": "vllm", "args": [""]});
        let bare = serde_json::to_vec(&container).unwrap().len();
        container["args"][0] = json!("x".repeat(arg_len - bare));
        container
    };
    let run_with = |arg_len: usize| {
        let mut spec = gang(1, BIG_GPU);
        for member in spec["engines"][0]["members"].as_array_mut().unwrap() {
            member["template"]["spec"]["containers"] = json!([container_with_arg(arg_len)]);
        }
        let spec: ReplicaSpec = serde_json::from_value(spec).unwrap();
        schedule(&Input {
            spec: &spec,
            replicas,
            clusters: &[cluster("a", vec![h200("gpu", 2)])],
            pins: &BTreeMap::new(),
            used_elsewhere: &BTreeMap::new(),
            now: jiff::Timestamp::UNIX_EPOCH,
            spread_key: SPREAD_KEY,
        })
        .map(|_| ())
    };
    run_with(per_member).unwrap();
    let err = run_with(per_member + 1).unwrap_err();
    assert_eq!(err.path, "spec.replicas");
    assert!(err.reason.contains("over the 4194304 bytes"), "{}", err.reason);
}

#[test]
fn ranks_are_fixed() {
    // Placements are kept across releases, but a new replica's cluster must not depend on the release placing
    // it: the first 8 bytes of SHA-256("default/llama\0a"), which no release may change.
    assert_eq!(rank(SPREAD_KEY, "a"), 0x22c6_c617_e828_051f);
    assert!(rank(SPREAD_KEY, "a") < rank(SPREAD_KEY, "b"));
    assert_ne!(rank("x", "yz"), rank("xy", "z"));
}

#[test]
fn a_burst_of_deployments_spreads_over_equal_clusters() {
    // 32 deployments applied at once read the same empty ledgers: each must not pick the same cluster.
    let clusters: Vec<ClusterView> = (0..8)
        .map(|i| cluster(&format!("gpu-{i}"), vec![h200("gpu", 8)]))
        .collect();
    let spec: ReplicaSpec = serde_json::from_value(gang(1, BIG_GPU)).unwrap();
    let (pins, used) = (BTreeMap::new(), BTreeMap::new());
    let mut per_cluster: BTreeMap<String, u32> = BTreeMap::new();
    for d in 0..32 {
        let key = format!("team/model-{d}");
        let outcomes = schedule(&Input {
            spec: &spec,
            replicas: 1,
            clusters: &clusters,
            pins: &pins,
            used_elsewhere: &used,
            now: jiff::Timestamp::UNIX_EPOCH,
            spread_key: &key,
        })
        .unwrap();
        let Outcome::Placed(placed) = &outcomes[0] else {
            panic!("{key} unplaced")
        };
        *per_cluster
            .entry(placed.cluster.metadata.name.clone())
            .or_default() += 1;
    }
    // Placed by name order, all 32 went to gpu-0.
    assert!(per_cluster.len() >= 6, "most clusters take some: {per_cluster:?}");
    assert!(
        per_cluster.values().all(|&n| n <= 8),
        "none takes more than a quarter: {per_cluster:?}"
    );
}
