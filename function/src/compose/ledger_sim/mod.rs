//! An in-memory control plane for the placement ledger (docs/scheduling.md): the real InferenceCluster and
//! ModelDeployment composers run against objects kept here the way Crossplane would keep them. A deployment's
//! reconcile answers its requirements loop from the objects, then applies its desired state (creating Objects
//! with a creation time from a ticking clock, deleting those it left out); a cluster's reconcile reads its
//! ledger from those Objects and writes its status back, where the next deployment reconcile reads it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::{Output, fixtures, inference_cluster, model_deployment};
use crate::{
    api::ledger,
    proto::v1::{Resource, ResourceSelector, Resources, resource_selector::Match},
    wire::RawStruct,
};

mod tests;

/// One ModelDeployment and the Objects it has composed, by key.
struct Deployment {
    xr: Value,
    objects: BTreeMap<String, Value>,
    last: Option<Output>,
}

/// One InferenceCluster: the composite (its status as last written) and the resources it composes, observed
/// Ready so that its pools are offered.
struct Cluster {
    xr: Value,
    composed: BTreeMap<String, Value>,
}

pub struct ControlPlane {
    clusters: BTreeMap<String, Cluster>,
    deployments: BTreeMap<String, Deployment>,
    class: Value,
    clock: u32,
}

fn raw(value: &Value) -> RawStruct {
    RawStruct::from_value(value).unwrap()
}

fn resource(value: &Value) -> Resource {
    Resource {
        resource: Some(raw(value)),
        ..Default::default()
    }
}

fn class() -> Value {
    let text = std::fs::read_to_string(format!(
        "{}/../examples/classes/eks-h200-8x.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// A Ready existing cluster with one pool of `nodes` nodes.
fn cluster_xr(name: &str, nodes: u32) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster", "metadata": {"name": name},
           "spec": {"stack": "Standard",
                    "cluster": {"source": "Existing", "existing": {
                        "secretRef": {"name": format!("{name}-kubeconfig")},
                        "cache": {"storageClassName": "cephfs"}}},
                    "nodePools": [{"name": "gpu", "className": "eks-h200-8x", "nodeCount": nodes}]}})
}

/// A deployment of `replicas` replicas of one Standalone engine whose `nodes` copies take a node each.
pub fn deployment_xr(namespace: &str, name: &str, replicas: u32, nodes: u32) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"replicas": replicas, "template": {"spec": {"engines": [{
               "name": "engine", "copies": nodes,
               "members": [{"role": "Standalone", "nodeSelector": {"devices": [{"name": "gpu", "count": 1}]}, "template": {"spec": {"containers": [
                   {"name": "engine", "image": "vllm/vllm-openai:v0.23.0"}]}}}]}]}}}})
}

impl ControlPlane {
    /// Clusters by name and node count, each reconciled once so it reports its pools.
    pub fn new(clusters: &[(&str, u32)]) -> Self {
        let mut plane = Self {
            clusters: BTreeMap::new(),
            deployments: BTreeMap::new(),
            class: class(),
            clock: 0,
        };
        for (name, nodes) in clusters {
            let xr = cluster_xr(name, *nodes);
            let first = plane.run_cluster(&xr, &BTreeMap::new());
            // Everything it composes, observed Ready.
            let composed = first
                .resources
                .iter()
                .map(|(key, c)| {
                    let mut object = Value::Object(c.object.to_map());
                    object["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
                    (key.clone(), object)
                })
                .collect();
            plane
                .clusters
                .insert((*name).to_owned(), Cluster { xr, composed });
            plane.reconcile_cluster(name);
        }
        plane
    }

    pub fn add(&mut self, xr: Value) {
        let key = format!(
            "{}/{}",
            xr["metadata"]["namespace"].as_str().unwrap(),
            xr["metadata"]["name"].as_str().unwrap()
        );
        self.deployments.insert(
            key,
            Deployment {
                xr,
                objects: BTreeMap::new(),
                last: None,
            },
        );
    }

    pub fn cluster_names(&self) -> Vec<String> {
        self.clusters.keys().cloned().collect()
    }

    pub fn deployment_names(&self) -> Vec<String> {
        self.deployments.keys().cloned().collect()
    }

    fn run_cluster(&self, xr: &Value, composed: &BTreeMap<String, Value>) -> Output {
        let name = xr["metadata"]["name"].as_str().unwrap();
        let mut req = fixtures::request(xr.clone());
        for (key, object) in composed {
            req = fixtures::with_observed(req, key, object);
        }
        req = fixtures::with_required(
            req,
            &inference_cluster::class_requirement("eks-h200-8x"),
            std::slice::from_ref(&self.class),
        );
        let ledger: Vec<Value> = self.ledger(name);
        req = fixtures::with_required(req, inference_cluster::ledger::LEDGER, &ledger);
        fixtures::run(inference_cluster::compose, &req).unwrap()
    }

    /// Every Object labelled with the cluster's name, in every namespace.
    fn ledger(&self, cluster: &str) -> Vec<Value> {
        self.deployments
            .values()
            .flat_map(|d| d.objects.values())
            .filter(|o| o["metadata"]["labels"][ledger::CLUSTER_LABEL] == json!(cluster))
            .cloned()
            .collect()
    }

    /// Reconciles one cluster: its status is rewritten from its ledger. Returns what it over-commits.
    pub fn reconcile_cluster(&mut self, name: &str) -> Vec<Value> {
        let cluster = &self.clusters[name];
        let out = self.run_cluster(&cluster.xr, &cluster.composed);
        let cluster = self.clusters.get_mut(name).unwrap();
        cluster.xr["status"] = Value::Object(out.status);
        cluster.xr["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        cluster.xr["status"]["overcommitted"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// What a selector finds among the clusters.
    fn select(&self, selector: &ResourceSelector) -> Vec<Value> {
        self.clusters
            .values()
            .filter(|c| match &selector.r#match {
                Some(Match::MatchName(name)) => c.xr["metadata"]["name"] == json!(name),
                Some(Match::MatchLabels(labels)) => labels
                    .labels
                    .iter()
                    .all(|(k, v)| c.xr["metadata"]["labels"][k] == json!(v)),
                None => true,
            })
            .map(|c| c.xr.clone())
            .collect()
    }

    /// Reconciles one deployment through Crossplane's requirements loop, then applies its desired state.
    /// Returns whether its composed Objects changed.
    pub fn reconcile_deployment(&mut self, key: &str) -> bool {
        let deployment = &self.deployments[key];
        let mut base = fixtures::request(deployment.xr.clone());
        for (k, object) in &deployment.objects {
            base = fixtures::with_observed(base, k, object);
        }
        let mut req = base.clone();
        let mut previous = None;
        let mut out = None;
        for _ in 0..6 {
            let answer = fixtures::run(model_deployment::compose, &req).unwrap();
            if previous.as_ref() == Some(&answer.requirements) {
                out = Some(answer);
                break;
            }
            req = base.clone();
            for (name, selector) in &answer.requirements {
                req.required_resources.insert(
                    name.clone(),
                    Resources {
                        items: self.select(selector).iter().map(resource).collect(),
                    },
                );
            }
            previous = Some(answer.requirements);
        }
        let out = out.expect("requirements settle within Crossplane's loop");
        self.apply(key, out)
    }

    fn apply(&mut self, key: &str, out: Output) -> bool {
        self.clock += 1;
        let now = format!(
            "2026-12-01T{:02}:{:02}:{:02}Z",
            self.clock / 3600,
            self.clock / 60 % 60,
            self.clock % 60
        );
        let deployment = self.deployments.get_mut(key).unwrap();
        let namespace = deployment.xr["metadata"]["namespace"].clone();
        let before: BTreeSet<String> = deployment.objects.keys().cloned().collect();
        let mut objects = BTreeMap::new();
        for (k, composed) in &out.resources {
            let mut object = Value::Object(composed.object.to_map());
            object["metadata"]["namespace"] = namespace.clone();
            let created = deployment
                .objects
                .get(k)
                .map_or_else(|| json!(now), |o| o["metadata"]["creationTimestamp"].clone());
            object["metadata"]["creationTimestamp"] = created;
            object["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
            objects.insert(k.clone(), object);
        }
        let changed = before != objects.keys().cloned().collect::<BTreeSet<_>>()
            || objects.iter().any(|(k, o)| deployment.objects.get(k) != Some(o));
        deployment.objects = objects;
        deployment.last = Some(out);
        changed
    }

    /// The replicas' clusters from the deployment's last status (None for an unplaced replica).
    pub fn placements(&self, key: &str) -> Vec<Option<String>> {
        let Some(out) = &self.deployments[key].last else {
            return Vec::new();
        };
        out.status["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["cluster"].as_str().map(str::to_owned))
            .collect()
    }

    pub fn last(&self, key: &str) -> &Output {
        self.deployments[key].last.as_ref().unwrap()
    }

    /// Nodes every Object labelled for the cluster claims, by pool: what would run there.
    pub fn claimed(&self, cluster: &str) -> BTreeMap<String, u64> {
        let mut claimed = BTreeMap::new();
        for object in self.ledger(cluster) {
            let nodes = object["metadata"]["annotations"][ledger::NODES_ANNOTATION]
                .as_str()
                .unwrap();
            for (pool, n) in ledger::parse_nodes(nodes).unwrap() {
                *claimed.entry(pool).or_insert(0) += n;
            }
        }
        claimed
    }

    pub fn capacity(&self, cluster: &str) -> u64 {
        self.clusters[cluster].xr["spec"]["nodePools"][0]["nodeCount"]
            .as_u64()
            .unwrap()
    }

    /// Marks every resource the cluster composes Ready or not, as a blip across a control-plane restart would.
    pub fn observe_ready(&mut self, cluster: &str, ready: bool) {
        let status = if ready { "True" } else { "False" };
        for object in self.clusters.get_mut(cluster).unwrap().composed.values_mut() {
            object["status"] = json!({"conditions": [{"type": "Ready", "status": status}]});
        }
    }

    pub fn cluster_status(&self, cluster: &str) -> &Value {
        &self.clusters[cluster].xr["status"]
    }

    /// (deployment, replica) the cluster's status lists as holders.
    pub fn holders(&self, cluster: &str) -> BTreeSet<(String, u64)> {
        self.cluster_status(cluster)["pools"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|p| p["holders"].as_array().cloned().unwrap_or_default())
            .map(|h| {
                (
                    h["deployment"].as_str().unwrap().to_owned(),
                    h["replica"].as_u64().unwrap(),
                )
            })
            .collect()
    }
}
