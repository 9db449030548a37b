//! The fleet-scale requests (docs/scheduling.md): one ModelDeployment reconcile in a 100-cluster fleet whose
//! other deployments hold one node each, spread evenly, so each cluster's placement ledger lists a hundredth of
//! them. Both fleet-scale benchmarks send exactly these: the in-process one (`tests/benches/fleet_scale.rs`) and
//! the gRPC one beside the no-op SDK servers (`tests/bench.sh --requests fleet-scale`).
//!
//! - settled: a deployment placed on `cluster-000` and admitted there requires that cluster by name;
//! - waiting: a new deployment requires the candidate set, every cluster;
//! - the old way: what a reconcile carried before the ledger (every cluster and every other deployment's status),
//!   built only to count its bytes.

use modelplane_function::{
    compose::model_deployment::{CLUSTERS, cluster_requirement},
    proto::v1::RunFunctionRequest,
    render::RequestBuilder,
    run_function,
};
use serde_json::{Value, json};

pub const SCALE_CLUSTERS: usize = 100;
/// The other deployments the issue asks about.
pub const OTHER_DEPLOYMENTS: [usize; 3] = [0, 1_000, 10_000];
/// Room for 10,000 one-node replicas on 100 clusters, so nobody waits for capacity.
const POOL_NODES: u64 = 200;
const NAMESPACE: &str = "ml-team";
const SETTLED: &str = "bench";
const NEWCOMER: &str = "newcomer";
/// Where the settled deployment runs.
pub const HOME_CLUSTER: &str = "cluster-000";

fn cluster_name(i: usize) -> String {
    format!("cluster-{i:03}")
}

/// Other deployment `i`: its namespace and name, and the cluster it runs on.
fn other(i: usize) -> (String, String, usize) {
    (
        format!("team-{}", i % 50),
        format!("model-{i:05}"),
        i % SCALE_CLUSTERS,
    )
}

fn holder(deployment: &str, nodes: u64) -> Value {
    json!({"deployment": deployment, "replica": 0, "nodes": nodes})
}

/// A Ready cluster with one pool whose ledger admitted `holders`.
fn cluster(i: usize, holders: Vec<Value>) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceCluster",
        "metadata": {"name": cluster_name(i), "labels": {"region": "us-east-1"}},
        "spec": {"stack": "Standard", "cluster": {"source": "EKS", "eks": {"region": "us-east-1"}},
                 "nodePools": [{"name": "gpu", "className": "h200", "nodeCount": POOL_NODES}]},
        "status": {"stack": "Standard", "providerConfigName": cluster_name(i), "cacheStorageClass": "efs",
                   "pools": [{"name": "gpu", "className": "h200", "nodeCount": POOL_NODES, "devices": [
                       {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 8,
                        "attributes": {"productName": {"string": "NVIDIA H200"}},
                        "capacity": {"memory": {"value": "141Gi"}}}],
                       "allocatedNodes": holders.len(), "holders": holders}],
                   "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]}})
}

/// Cluster `i` in a fleet of `others` other deployments, plus the settled deployment's replica on its home.
fn fleet_cluster(i: usize, others: usize, settled_here: bool) -> Value {
    let mut holders: Vec<Value> = (i..others)
        .step_by(SCALE_CLUSTERS)
        .map(|o| {
            let (namespace, name, _) = other(o);
            holder(&format!("{namespace}/{name}"), 1)
        })
        .collect();
    if settled_here {
        holders.push(holder(&format!("{NAMESPACE}/{SETTLED}"), 1));
    }
    cluster(i, holders)
}

fn fleet(others: usize, settled_admitted: bool) -> Vec<Value> {
    (0..SCALE_CLUSTERS)
        .map(|i| fleet_cluster(i, others, settled_admitted && i == 0))
        .collect()
}

/// A one-replica deployment of one single-GPU engine.
fn deployment(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1, "template": {"spec": {"engines": [{"name": "engine", "copies": 1, "members": [
            {"role": "Standalone", "nodeSelector": {"devices": [{"name": "gpu", "count": 1}]},
             "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.23.0",
                                                   "args": ["--model=Qwen/Qwen3-0.6B"]}]}}}]}]}}}})
}

/// What the old way's request carried per other deployment: its status with its one placed replica.
fn other_with_status(i: usize) -> Value {
    let (namespace, name, on) = other(i);
    let mut other = deployment(&namespace, &name);
    other["status"] = json!({"placedReplicas": 1, "readyReplicas": 1, "replicas": [
        {"replica": 0, "cluster": cluster_name(on), "stack": "Standard", "ready": true,
         "engines": [{"name": "engine", "pool": "gpu", "nodes": 1}]}]});
    other
}

/// The settled deployment's composite and what it composed on its home cluster, observed Ready: its first
/// reconcile, when its home was the fleet's only cluster (among equal clusters the scheduler's tie-break, a hash
/// of the deployment and the cluster, would pick another), as Crossplane observes it afterwards.
fn settled_observed() -> (Value, Vec<(String, Value)>) {
    let xr = deployment(NAMESPACE, SETTLED);
    let first = run_function(
        RequestBuilder::new(&xr)
            .required(CLUSTERS, &[fleet_cluster(0, 0, false)])
            .build(),
    );
    let observed = first
        .desired
        .unwrap_or_default()
        .resources
        .into_iter()
        .filter_map(|(key, composed)| {
            let mut object = composed.resource?.to_json().ok()?;
            object["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
            Some((key, object))
        })
        .collect();
    (xr, observed)
}

/// The first call of a reconcile of `xr`, tagged as Crossplane tags it.
fn call(xr: &Value) -> RequestBuilder {
    RequestBuilder::new(xr).tag(&super::tag_for(xr))
}

fn with_observed(xr: &Value, observed: &[(String, Value)]) -> RequestBuilder {
    observed
        .iter()
        .fold(call(xr), |builder, (key, object)| builder.observed(key, object))
}

/// A settled reconcile with `others` other deployments: the deployment's home cluster, required by name.
pub fn settled(others: usize) -> RunFunctionRequest {
    let (xr, observed) = settled_observed();
    with_observed(&xr, &observed)
        .required(
            &cluster_requirement(HOME_CLUSTER),
            &[fleet_cluster(0, others, true)],
        )
        .build()
}

/// A new deployment's reconcile with `others` other deployments: the candidate set, every cluster.
pub fn waiting(others: usize) -> RunFunctionRequest {
    call(&deployment(NAMESPACE, NEWCOMER))
        .required(CLUSTERS, &fleet(others, false))
        .build()
}

/// The settled reconcile as it was before the ledger: every cluster and every other deployment's status.
pub fn old_way(others: usize) -> RunFunctionRequest {
    let (xr, observed) = settled_observed();
    let deployments: Vec<Value> = (0..others).map(other_with_status).collect();
    with_observed(&xr, &observed)
        .required(CLUSTERS, &fleet(0, false))
        .required("model-deployments", &deployments)
        .build()
}

/// The composites one replica's Object change would reconcile with watches on required resources: before the
/// ledger every deployment (each required all of them); now its cluster, then the deployments on that cluster
/// (they require it by name), this one included. Deployments waiting with that cluster among their candidates
/// come on top of both.
pub fn concerned(others: usize) -> (usize, usize) {
    (others + 1, 1 + others / SCALE_CLUSTERS + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use modelplane_function::{compose::WAITING_TTL, proto::v1::Severity};
    use prost::Message;

    fn composed_on_home(rsp: &modelplane_function::proto::v1::RunFunctionResponse) -> bool {
        rsp.desired
            .as_ref()
            .is_some_and(|d| d.resources.keys().any(|k| k.contains(HOME_CLUSTER)))
    }

    fn no_fatal(rsp: &modelplane_function::proto::v1::RunFunctionResponse) {
        assert!(
            rsp.results.iter().all(|r| r.severity != Severity::Fatal as i32),
            "{:?}",
            rsp.results
        );
    }

    #[test]
    fn the_settled_reconcile_asks_for_nothing_more_and_polls_at_the_default() {
        // The benchmark must time a reconcile that is done, not the first call of a requirements loop.
        for others in [0, 1_000] {
            let req = settled(others);
            let asked: Vec<String> = req.required_resources.keys().cloned().collect();
            let rsp = run_function(req);
            no_fatal(&rsp);
            assert!(composed_on_home(&rsp), "others {others}");
            let requirements: Vec<String> = rsp
                .requirements
                .as_ref()
                .map(|r| r.resources.keys().cloned().collect())
                .unwrap_or_default();
            assert_eq!(requirements, asked, "others {others}");
            let ttl = rsp.meta.and_then(|m| m.ttl).map(|d| d.seconds);
            assert_ne!(ttl, Some(WAITING_TTL.as_secs() as i64), "others {others}");
        }
    }

    #[test]
    fn the_waiting_reconcile_reads_the_candidates_and_places_its_replica() {
        let rsp = run_function(waiting(1_000));
        no_fatal(&rsp);
        let placed = rsp
            .desired
            .unwrap_or_default()
            .resources
            .keys()
            .any(|k| k.starts_with("replica-0-cluster-"));
        assert!(placed);
        let requirements = rsp.requirements.unwrap_or_default();
        assert!(requirements.resources.contains_key(CLUSTERS));
    }

    #[test]
    fn only_the_old_way_grows_with_the_fleet() {
        let bytes = |req: RunFunctionRequest| req.encoded_len();
        let (settled_0, settled_1k) = (bytes(settled(0)), bytes(settled(1_000)));
        let (old_0, old_1k) = (bytes(old_way(0)), bytes(old_way(1_000)));
        // Ten more holders on the home cluster against a thousand more deployments.
        assert!(settled_1k < settled_0 + 2_000, "{settled_0} -> {settled_1k}");
        assert!(old_1k > old_0 + 500_000, "{old_0} -> {old_1k}");
    }
}
