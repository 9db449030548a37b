//! A stock EKS InferenceCluster driven the way Crossplane drives it, with the real composition function in
//! process (`modelplane_function::run_function`, the handler its server runs) and the real provider on the real
//! API server: compose with what is observed, apply the provider-eks managed resources it desires, observe
//! them, compose again, until the function adds nothing and every one is Ready. Deleting follows the function's
//! own `Usage`s: Crossplane deletes every composed resource at once and a Usage holds back the one it protects
//! while its user exists, so a resource is deleted here once nothing that uses it is left.
//!
//! Only what provider-eks reconciles is applied. The activation policy is carried out as Crossplane would (the
//! MRDs it lists turn Active); Releases, provider-kubernetes Objects and ProviderConfigs for the workload
//! cluster are left out (no workload cluster answers in moto).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use modelplane_function::proto::v1::{RunFunctionResponse, Severity};
use modelplane_function::render::RequestBuilder;
use serde_json::Value;

use crate::support::repo_root;
use crate::support::world::{CONVERGE, World};

pub const GROUP: &str = "eks.m.modelplane.ai";
const POLICY_KIND: &str = "ManagedResourceActivationPolicy";
const USAGE_KIND: &str = "Usage";
/// How often the composite is reconciled (Crossplane's realtime compositions react to watch events; this is
/// the stand-in for that).
const STEP: Duration = Duration::from_millis(1000);

/// The seed's EKS InferenceCluster: only a region (`examples/clusters/eks-h200-us-east.yaml`).
pub const EXAMPLE: &str = "examples/clusters/eks-h200-us-east.yaml";

pub struct StockCluster {
    xr: Value,
    classes: Vec<Value>,
    /// Composition resource name -> what is observed under it.
    observed: BTreeMap<String, Value>,
    /// Composition resource name -> the provider-eks MR applied for it (its kind and name).
    pub applied: BTreeMap<String, (String, String)>,
    /// The function's last desired state.
    pub desired: BTreeMap<String, Value>,
    /// What was last applied under each key, as composed.
    last_applied: BTreeMap<String, Value>,
    /// The order in which composition resource names first appeared in the desired state, by step.
    pub stages: Vec<BTreeSet<String>>,
}

fn read_yaml(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

pub fn api_resource(kind: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk(GROUP, "v1alpha1", kind);
    ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()))
}

fn is_ready(object: &Value) -> bool {
    condition_true(object, "Ready") && condition_true(object, "Synced")
}

fn condition_true(object: &Value, type_: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == type_ && c["status"] == "True"))
}

fn group_of(object: &Value) -> &str {
    object["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map_or("", |(g, _)| g)
}

impl StockCluster {
    /// The seed's example cluster with every InferenceClass under `examples/classes`.
    pub fn example() -> Self {
        let root = repo_root();
        let xr = read_yaml(&root.join(EXAMPLE)).remove(0);
        let mut classes = Vec::new();
        let mut entries: Vec<_> = std::fs::read_dir(root.join("examples/classes"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            classes.extend(read_yaml(&path));
        }
        Self {
            xr,
            classes,
            observed: BTreeMap::new(),
            applied: BTreeMap::new(),
            desired: BTreeMap::new(),
            last_applied: BTreeMap::new(),
            stages: Vec::new(),
        }
    }

    /// The example under another name (for many clusters in one account).
    pub fn example_named(name: &str) -> Self {
        let mut cluster = Self::example();
        cluster.xr["metadata"]["name"] = Value::String(name.to_owned());
        cluster
    }

    pub fn name(&self) -> &str {
        self.xr["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// One RunFunction call with what is observed, its requirements answered as Crossplane would.
    pub fn compose(&self) -> BTreeMap<String, Value> {
        let mut req = RequestBuilder::new(&self.xr);
        for (key, object) in &self.observed {
            req = req.observed(key, object);
        }
        let req = req.answered_from(&self.classes).build();
        let rsp: RunFunctionResponse = modelplane_function::run_function(req);
        let fatal: Vec<&str> = rsp
            .results
            .iter()
            .filter(|r| r.severity == Severity::Fatal as i32)
            .map(|r| r.message.as_str())
            .collect();
        assert!(
            fatal.is_empty(),
            "the function refused the stock cluster: {fatal:?}"
        );
        rsp.desired
            .map(|d| d.resources)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(key, r)| Some((key, r.resource?.to_json().ok()?)))
            .collect()
    }

    /// One reconcile of the composite: compose, carry out the activation policy, apply the provider-eks MRs,
    /// observe them.
    pub async fn step(&mut self, world: &World) {
        let desired = self.compose();
        let keys: BTreeSet<String> = desired.keys().cloned().collect();
        if self.stages.last() != Some(&keys) {
            self.stages.push(keys);
        }
        for (key, object) in &desired {
            if object["kind"] == POLICY_KIND && !self.observed.contains_key(key) {
                let names: Vec<String> = object["spec"]["activate"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect();
                world.activate_mrds(&names).await;
                self.observed.insert(key.clone(), object.clone());
            }
            if group_of(object) == GROUP {
                self.apply(world, key, object).await;
            }
        }
        self.desired = desired;
        self.observe(world).await;
    }

    /// Server-side apply into the world's namespace, as Crossplane applies composed resources.
    async fn apply(&mut self, world: &World, key: &str, object: &Value) {
        // The server would make nothing of the same apply again; skipping it keeps the API server's load (and
        // a benchmark's) to what changes.
        if self.last_applied.get(key) == Some(object) && self.observed.contains_key(key) {
            return;
        }
        self.last_applied.insert(key.to_owned(), object.clone());
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let mut object = object.clone();
        object["metadata"]["namespace"] = Value::String(world.ns.clone());
        let api: Api<DynamicObject> =
            Api::namespaced_with(world.kube.clone(), &world.ns, &api_resource(&kind));
        let params = PatchParams::apply("apiextensions.crossplane.io/composed").force();
        api.patch(&name, &params, &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("applying {kind} {name} ({key}): {e}"));
        self.applied.insert(key.to_owned(), (kind, name));
    }

    async fn get(world: &World, kind: &str, name: &str) -> Option<Value> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(world.kube.clone(), &world.ns, &api_resource(kind));
        let object = api
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading {kind} {name}: {e}"))?;
        Some(serde_json::to_value(object).unwrap())
    }

    async fn observe(&mut self, world: &World) {
        for (key, (kind, name)) in &self.applied {
            match Self::get(world, kind, name).await {
                Some(object) => self.observed.insert(key.clone(), object),
                None => self.observed.remove(key),
            };
        }
    }

    /// The provider-eks MRs the function desires that are not Ready and Synced yet, with their conditions.
    pub fn not_ready(&self) -> Vec<String> {
        self.desired
            .iter()
            .filter(|(_, o)| group_of(o) == GROUP)
            .filter(|(key, _)| !self.observed.get(*key).is_some_and(is_ready))
            .map(|(key, _)| {
                let conditions = self.observed.get(key).map(|o| o["status"]["conditions"].clone());
                format!("{key}: {}", conditions.unwrap_or(Value::Null))
            })
            .collect()
    }

    /// One step; whether the composite has settled: the function saw every MR Ready and composed no new one.
    pub async fn step_settled(&mut self, world: &World) -> bool {
        let ready_before = !self.applied.is_empty() && self.not_ready().is_empty();
        let before: BTreeSet<String> = self.applied.keys().cloned().collect();
        self.step(world).await;
        let after: BTreeSet<String> = self.applied.keys().cloned().collect();
        ready_before && before == after && self.not_ready().is_empty()
    }

    /// Reconciles until the function adds no provider-eks MR and every one it desires is Ready and Synced;
    /// `between` runs after every step (a test's fault schedule). Returns how long it took.
    pub async fn converge_with(
        &mut self,
        world: &mut World,
        mut between: impl FnMut(&mut World),
    ) -> Duration {
        let started = Instant::now();
        let deadline = started + CONVERGE;
        loop {
            if self.step_settled(world).await {
                return started.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "the stock cluster did not converge; not Ready:\n{}\nprovider log:\n{}",
                self.not_ready().join("\n"),
                world.log()
            );
            between(world);
            tokio::time::sleep(STEP).await;
        }
    }

    pub async fn converge(&mut self, world: &mut World) -> Duration {
        self.converge_with(world, |_| {}).await
    }

    /// (user, used) composition resource names from the function's Usages, among the applied MRs.
    pub fn usages(&self) -> Vec<(String, String)> {
        let key_of = |kind: &str, name: &str| {
            self.applied
                .iter()
                .find(|(_, (k, n))| k == kind && n == name)
                .map(|(key, _)| key.clone())
        };
        self.desired
            .values()
            .filter(|o| o["kind"] == USAGE_KIND)
            .filter_map(|u| {
                let reference = |side: &str| {
                    let r = &u["spec"][side];
                    key_of(r["kind"].as_str()?, r["resourceRef"]["name"].as_str()?)
                };
                Some((reference("by")?, reference("of")?))
            })
            .collect()
    }

    /// Deletes the composite's MRs as Crossplane does under the function's Usages, and waits until the API
    /// server has none left (the provider removes each finalizer once AWS is clean). Returns what happened, in
    /// order: `delete <key>` when the delete was issued, `gone <key>` when the MR was seen gone.
    pub async fn delete(&mut self, world: &mut World) -> Vec<String> {
        self.delete_with(world, |_| {}).await
    }

    /// [`Self::delete`], with `between` run after every round (a test's fault schedule).
    pub async fn delete_with(
        &mut self,
        world: &mut World,
        mut between: impl FnMut(&mut World),
    ) -> Vec<String> {
        let usages = self.usages();
        let deadline = Instant::now() + CONVERGE;
        let mut events = Vec::new();
        let mut issued = BTreeSet::new();
        loop {
            let mut present = BTreeSet::new();
            for (key, (kind, name)) in &self.applied {
                if Self::get(world, kind, name).await.is_some() {
                    present.insert(key.clone());
                } else if issued.contains(key) && !events.contains(&format!("gone {key}")) {
                    events.push(format!("gone {key}"));
                }
            }
            if present.is_empty() {
                return events;
            }
            for key in &present {
                let in_use = usages.iter().any(|(by, of)| of == key && present.contains(by));
                if in_use || issued.contains(key) {
                    continue;
                }
                let (kind, name) = &self.applied[key];
                let api: Api<DynamicObject> =
                    Api::namespaced_with(world.kube.clone(), &world.ns, &api_resource(kind));
                api.delete(name, &DeleteParams::background())
                    .await
                    .unwrap_or_else(|e| panic!("deleting {kind} {name}: {e}"));
                issued.insert(key.clone());
                events.push(format!("delete {key}"));
            }
            assert!(
                Instant::now() < deadline,
                "not deleted in time: {present:?}\nprovider log:\n{}",
                world.log()
            );
            between(world);
            tokio::time::sleep(STEP).await;
        }
    }

    /// The observed MR under `key`.
    pub fn observed(&self, key: &str) -> Option<&Value> {
        self.observed.get(key)
    }

    /// Every observed MR, by composition resource name.
    pub fn observed_all(&self) -> &BTreeMap<String, Value> {
        &self.observed
    }
}

/// Starts the provider on the stock tests' schedule: a calm resource is looked at every 2 s, a busy one every
/// second, backoff from 1 s to 4 s.
pub fn start_provider(world: &mut World) {
    world.start_provider_with(&[
        "--poll-interval-seconds",
        "2",
        "--busy-interval-seconds",
        "1",
        "--backoff-seconds",
        "1",
        "--max-backoff-seconds",
        "4",
        "--debug",
    ]);
}
