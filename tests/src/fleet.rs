//! Deterministic `RunFunctionRequest`s for the benchmark: what Crossplane sends for a trivial composite, for one
//! replica of a two-node gang, and for a ModelDeployment scheduled over a fleet of 100 clusters; and, in
//! [`scale`], one ModelDeployment reconcile among thousands of other deployments.
//!
//! Requests are built with the function crate's `RequestBuilder` (the request `render` sends), then encoded
//! once; the benchmark sends those bytes as they are, so no client spends time on protobuf while it measures.

pub mod clouds;
mod objects;
pub mod scale;

use modelplane_function::{
    proto::v1::{Resource, RunFunctionRequest},
    render::{RequestBuilder, simulate},
    run_function,
    wire::RawStruct,
};
use prost::Message;
use serde_json::{Value, json};

pub use objects::{GPU_CLASSES, inference_class, inference_cluster, model_deployment, tiny_class};

/// Requirement names under which the ModelDeployment composer receives the candidate InferenceClusters and its
/// ModelCache.
pub use modelplane_function::compose::model_deployment::{
    CACHE as CACHE_REQUIREMENT, CLUSTERS as CLUSTERS_REQUIREMENT,
};
/// Requirement name under which it receives the InferenceClasses their pools point at.
pub const CLASSES_REQUIREMENT: &str = "classes";

/// The fleet the issue names: 100 clusters of 8 pools, 10 replicas to place. With every pool's devices copied
/// into the cluster's status (the status contract), such a fleet is ~760 KB on the wire, not the ~300 KB the
/// Python v0.3.1 status format came to, so the benchmark sends both: this fleet, and one cut to ~300 KB.
pub const FLEET_CLUSTERS: usize = 100;
/// Clusters of 8 pools that come to ~300 KB, the request size the latency target is set for.
pub const FLEET_300KB_CLUSTERS: usize = 40;
pub const POOLS_PER_CLUSTER: usize = 8;
pub const FLEET_REPLICAS: u32 = 10;

/// The requests the benchmark sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// The smallest composite this function serves (an InferenceClass with one device).
    Trivial,
    /// The qwen3-coder ModelDeployment, one replica of a two-node Leader/Worker gang, before any requirement is met.
    Gang,
    /// The same deployment's first placement: one Ready cluster with a gateway and a published CA, two pools of
    /// 8 and 1 GPUs, its classes and cache answered, nothing composed yet.
    PlacedGang,
    /// The same ModelDeployment with ten replicas, `clusters` InferenceClusters of 8 pools and their classes
    /// required.
    Fleet { clusters: usize },
    /// [`Scenario::Fleet`] once settled: every resource it composes observed Ready, as on each poll after.
    SettledFleet { clusters: usize },
    /// One ModelDeployment reconcile in [`scale`]'s 100-cluster fleet with `others` other deployments: settled
    /// (its home cluster required by name) or waiting (the candidate set required).
    FleetScale { others: usize, waiting: bool },
    /// A settled reconcile of the example cluster of cloud `cloud` of [`clouds::CLOUDS`], everything it composes
    /// observed Ready.
    SettledCluster { cloud: usize },
}

impl Scenario {
    pub const ALL: [Scenario; 6] = [
        Scenario::Trivial,
        Scenario::Gang,
        Scenario::PlacedGang,
        Scenario::Fleet {
            clusters: FLEET_300KB_CLUSTERS,
        },
        Scenario::Fleet {
            clusters: FLEET_CLUSTERS,
        },
        Scenario::SettledFleet {
            clusters: FLEET_CLUSTERS,
        },
    ];

    /// The fleet-scale reconciles, settled then waiting at each count of [`scale::OTHER_DEPLOYMENTS`].
    pub fn fleet_scale() -> impl Iterator<Item = Scenario> {
        scale::OTHER_DEPLOYMENTS
            .into_iter()
            .flat_map(|others| [false, true].map(|waiting| Scenario::FleetScale { others, waiting }))
    }

    /// One settled cluster reconcile per cloud.
    pub fn clouds() -> impl Iterator<Item = Scenario> {
        (0..clouds::CLOUDS.len()).map(|cloud| Scenario::SettledCluster { cloud })
    }

    pub fn label(self) -> String {
        match self {
            Scenario::Trivial => "trivial XR".into(),
            Scenario::Gang => "1-replica 2-node gang".into(),
            Scenario::PlacedGang => "1-replica 2-node gang, first placement".into(),
            Scenario::Fleet { clusters } => format!("fleet {clusters}x{POOLS_PER_CLUSTER} pools"),
            Scenario::SettledFleet { clusters } => {
                format!("fleet {clusters}x{POOLS_PER_CLUSTER} pools, settled")
            }
            Scenario::FleetScale { others, waiting } => format!(
                "fleet-scale {}, {others} others",
                if waiting { "waiting" } else { "settled" }
            ),
            Scenario::SettledCluster { cloud } => {
                format!(
                    "settled {} cluster",
                    clouds::CLOUDS[cloud % clouds::CLOUDS.len()].0
                )
            }
        }
    }

    pub fn request(self) -> RunFunctionRequest {
        match self {
            Scenario::Trivial => request(&tiny_class(), Vec::new()),
            Scenario::Gang => request(&model_deployment(1), Vec::new()),
            Scenario::PlacedGang => placed_gang_request(&model_deployment(1)),
            Scenario::Fleet { clusters } => fleet_request(clusters, POOLS_PER_CLUSTER),
            Scenario::SettledFleet { clusters } => settle(fleet_request(clusters, POOLS_PER_CLUSTER)),
            Scenario::FleetScale {
                others,
                waiting: false,
            } => scale::settled(others),
            Scenario::FleetScale {
                others,
                waiting: true,
            } => scale::waiting(others),
            Scenario::SettledCluster { cloud } => clouds::settled(cloud),
        }
    }

    /// The request as it goes on the wire.
    pub fn encoded(self) -> Vec<u8> {
        self.request().encode_to_vec()
    }
}

/// A ModelDeployment over `clusters` clusters of `pools` pools each, with every requirement already resolved.
pub fn fleet_request(clusters: usize, pools: usize) -> RunFunctionRequest {
    fleet_request_with_replicas(clusters, pools, FLEET_REPLICAS)
}

/// [`fleet_request`] asking for `replicas` replicas.
pub fn fleet_request_with_replicas(clusters: usize, pools: usize, replicas: u32) -> RunFunctionRequest {
    let fleet: Vec<Value> = (0..clusters).map(|i| inference_cluster(i, pools)).collect();
    let required = vec![
        (CACHE_REQUIREMENT, vec![staged_cache(&fleet)]),
        (CLUSTERS_REQUIREMENT, fleet),
        (
            CLASSES_REQUIREMENT,
            (0..GPU_CLASSES.len()).map(inference_class).collect(),
        ),
    ];
    request(&model_deployment(replicas), required)
}

/// The first placement of `deployment` (one replica of the gang): the request of [`Scenario::PlacedGang`], for
/// this composite. A two-node gang of 8 GPUs a node fits only the 8-GPU pool.
pub fn placed_gang_request(deployment: &Value) -> RunFunctionRequest {
    let mut cluster = inference_cluster(0, 2);
    cluster["status"]["pools"] = json!([
        objects::pool_status_of(&GPU_CLASSES[0], "pool-0", 4),
        objects::pool_status_of(&GPU_CLASSES[3], "pool-1", 2),
    ]);
    let fleet = vec![cluster];
    let required = vec![
        (CACHE_REQUIREMENT, vec![staged_cache(&fleet)]),
        (CLUSTERS_REQUIREMENT, fleet),
        (CLASSES_REQUIREMENT, vec![inference_class(0), inference_class(3)]),
    ];
    request(deployment, required)
}

/// Most reconciles before a request is taken as settled; the slowest settles in under ten.
const MAX_ROUNDS: usize = 16;

/// `req` once everything it composes is observed Ready: run in process, each round's desired resources are fed
/// back as observed (as a Ready provider would report them) until the set stops growing.
pub fn settle(mut req: RunFunctionRequest) -> RunFunctionRequest {
    for _ in 0..MAX_ROUNDS {
        let rsp = run_function(req.clone());
        let desired = rsp.desired.unwrap_or_default().resources;
        let observed = &mut req.observed.get_or_insert_with(Default::default).resources;
        let settled = observed.len() == desired.len();
        observed.clear();
        for (key, resource) in desired {
            let Some(Ok(mut object)) = resource.resource.as_ref().map(RawStruct::to_json) else {
                continue;
            };
            object["metadata"]["annotations"]["crossplane.io/composition-resource-name"] = json!(key);
            let ready = simulate::observe(&object);
            let resource = Resource {
                resource: RawStruct::from_value(&ready),
                ..Default::default()
            };
            observed.insert(key, resource);
        }
        if settled {
            break;
        }
    }
    req
}

/// The deployment's ModelCache, Ready on every cluster, so the composer composes engines rather than waiting.
fn staged_cache(fleet: &[Value]) -> Value {
    let clusters: Vec<Value> = fleet
        .iter()
        .map(|c| serde_json::json!({"cluster": c["metadata"]["name"], "phase": "Ready"}))
        .collect();
    serde_json::json!({
        "apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelCache",
        "metadata": {"name": "qwen3-coder", "namespace": "ml-team"},
        "status": {"clusters": clusters},
    })
}

/// The request Crossplane v2.2+ sends for the first pipeline step (every capability, an empty desired state and
/// an empty context), with `required` answered.
fn request(composite: &Value, required: Vec<(&str, Vec<Value>)>) -> RunFunctionRequest {
    required
        .iter()
        .fold(
            RequestBuilder::new(composite).tag(&tag_for(composite)),
            |req, (name, objects)| req.required(name, objects),
        )
        .build()
}

/// Crossplane tags a request with the sha256 of its encoding; any 64 hex digits that differ per composite do here.
pub(crate) fn tag_for(composite: &Value) -> String {
    let name = composite["metadata"]["name"].as_str().unwrap_or_default();
    let seed = name
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    (0..4)
        .map(|i| format!("{:016x}", objects::mix(seed + i)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use modelplane_function::{sdk::request::required_resources, wire::RawStruct};

    #[test]
    fn requests_land_near_the_sizes_the_benchmark_is_named_for() {
        for scenario in Scenario::ALL {
            let size = scenario.encoded().len();
            let expected = match scenario {
                Scenario::Trivial => 100..=300,
                Scenario::Gang => 1_500..=2_600,
                Scenario::PlacedGang => 8_000..=12_000,
                Scenario::Fleet { clusters } if clusters == FLEET_300KB_CLUSTERS => 250_000..=400_000,
                Scenario::Fleet { .. } => 650_000..=950_000,
                _ => 1_000_000..=3_000_000,
            };
            assert!(expected.contains(&size), "{}: {size} bytes", scenario.label());
        }
    }

    #[test]
    fn the_placed_gang_and_the_settled_fleet_compose_what_they_are_named_for() {
        let rsp = modelplane_function::run_function(Scenario::PlacedGang.request());
        assert!(rsp.results.iter().all(|r| r.severity != 1), "{:?}", rsp.results);
        let desired = rsp.desired.unwrap_or_default().resources;
        assert!(
            desired
                .keys()
                .any(|k| k.starts_with("replica-0-") && k.ends_with("-qwen3-coder")),
            "the gang is placed: {:?}",
            desired.keys().collect::<Vec<_>>()
        );
        let req = Scenario::SettledFleet {
            clusters: FLEET_CLUSTERS,
        }
        .request();
        let observed = req.observed.as_ref().map_or(0, |o| o.resources.len());
        let rsp = modelplane_function::run_function(req);
        let desired = rsp.desired.unwrap_or_default().resources;
        assert!(
            observed >= 10 * FLEET_REPLICAS as usize && desired.len() == observed,
            "{observed} observed, {} desired",
            desired.len()
        );
        assert!(
            desired.keys().any(|k| k.starts_with("routing-")),
            "the clusters' gateways route the replicas"
        );
    }

    #[test]
    fn each_clouds_settled_reconcile_is_ready_and_composes_nothing_new() {
        for scenario in Scenario::clouds() {
            let req = scenario.request();
            let observed = req.observed.as_ref().map_or(0, |o| o.resources.len());
            let rsp = modelplane_function::run_function(req);
            assert!(
                rsp.results.iter().all(|r| r.severity != 1),
                "{}: {:?}",
                scenario.label(),
                rsp.results
            );
            let desired = rsp.desired.unwrap_or_default().resources;
            assert!(
                observed > 20 && desired.len() == observed,
                "{}: {observed} observed, {} desired",
                scenario.label(),
                desired.len()
            );
            assert!(
                desired.values().all(|r| r.ready == 1),
                "{}: not every resource Ready",
                scenario.label()
            );
        }
    }

    #[test]
    fn the_fleet_request_makes_the_composer_place_every_replica() {
        // The benchmark must measure real composition, not an early return for a missing requirement.
        let rsp = modelplane_function::run_function(fleet_request(FLEET_300KB_CLUSTERS, POOLS_PER_CLUSTER));
        assert!(rsp.results.iter().all(|r| r.severity != 1), "{:?}", rsp.results);
        let desired = rsp.desired.unwrap_or_default();
        let workloads = desired
            .resources
            .keys()
            .filter(|k| !k.ends_with("namespace"))
            .count();
        assert!(
            workloads >= FLEET_REPLICAS as usize,
            "{:?}",
            desired.resources.keys().collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_same_scenario_always_encodes_to_the_same_bytes() {
        for scenario in Scenario::ALL.into_iter().chain(Scenario::fleet_scale()) {
            assert_eq!(scenario.encoded(), scenario.encoded(), "{scenario:?}");
        }
    }

    #[test]
    fn fleet_request_carries_every_cluster_and_class_under_its_requirement_name() {
        let req = fleet_request(FLEET_CLUSTERS, POOLS_PER_CLUSTER);
        let clusters = required_resources(&req, CLUSTERS_REQUIREMENT).unwrap();
        let classes = required_resources(&req, CLASSES_REQUIREMENT).unwrap();
        assert_eq!(clusters.len(), FLEET_CLUSTERS);
        assert_eq!(classes.len(), GPU_CLASSES.len());
        let last = clusters[FLEET_CLUSTERS - 1]
            .resource
            .as_ref()
            .unwrap()
            .to_json()
            .unwrap();
        assert_eq!(last["kind"], "InferenceCluster");
        assert_eq!(last["metadata"]["name"], "fleet-ap-northeast-1-099");
        assert_eq!(
            last["spec"]["nodePools"].as_array().unwrap().len(),
            POOLS_PER_CLUSTER
        );
        assert_eq!(
            last["status"]["pools"].as_array().unwrap().len(),
            POOLS_PER_CLUSTER
        );
    }

    #[test]
    fn cluster_status_parses_as_the_status_contract_the_scheduler_reads() {
        use modelplane_function::api::inference_cluster::{
            InferenceClusterSpec, InferenceClusterStatus, Stack,
        };
        #[derive(serde::Deserialize)]
        struct Cluster {
            spec: InferenceClusterSpec,
            status: InferenceClusterStatus,
        }
        let raw = RawStruct::from_value(&inference_cluster(7, POOLS_PER_CLUSTER)).unwrap();
        let cluster: Cluster = raw.parse().unwrap();
        assert_eq!(
            cluster.spec.taints.len(),
            1,
            "every fourth cluster is dedicated to a team"
        );
        assert_eq!(cluster.status.pools.len(), POOLS_PER_CLUSTER);
        assert_eq!(
            cluster.status.pools[1].devices[0].capacity["memory"].value,
            "141Gi"
        );
        assert_eq!(
            (cluster.spec.stack, cluster.status.stack),
            (Stack::Dynamo, Stack::Dynamo)
        );
        assert!(cluster.status.model_express_address.is_some());
    }

    #[test]
    fn gang_request_is_the_announced_qwen3_coder_manifest() {
        let req = Scenario::Gang.request();
        let xr = req
            .observed
            .unwrap()
            .composite
            .unwrap()
            .resource
            .unwrap()
            .to_json()
            .unwrap();
        let members = &xr["spec"]["template"]["spec"]["engines"][0]["members"];
        assert_eq!(xr["spec"]["replicas"], 1);
        assert_eq!(members[0]["role"], "Leader");
        assert_eq!(members[1]["worker"]["nodes"], 1);
        assert!(
            members[1]["nodeSelector"]["devices"][0]["selectors"][0]["cel"]
                .as_str()
                .unwrap()
                .contains("quantity(\"120Gi\")")
        );
    }
}
