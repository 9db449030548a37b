//! What the fleet's conditions say, kept from a watch instead of listing thousands of objects every few seconds
//! (a list of 8,000 managed resources holds the stand-in's store while it is written out): how many are Ready
//! and Synced, and how often one went from Synced=True to Synced=False, a flap the provider must not cause by
//! itself (a describe that timed out in a queue, a throttling answer it did not absorb).

#![allow(dead_code)]

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use modelplane_eks_api::{Cluster, Condition, NodePool};
use serde::de::DeserializeOwned;

use super::objects::is_true;
use super::world::NS;

#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    ready: bool,
    synced: bool,
}

#[derive(Default)]
struct State {
    objects: HashMap<String, Seen>,
    flaps: u64,
    /// The first few that flapped, to name in the report.
    flapped: Vec<String>,
}

#[derive(Clone, Default)]
pub struct FleetStatus {
    state: Arc<Mutex<State>>,
}

impl FleetStatus {
    /// Starts watching the Clusters and NodePools of the benchmark's namespace.
    pub fn watch(kube: &kube::Client) -> Self {
        let status = Self::default();
        status.follow::<Cluster>(kube, "Cluster", |c| {
            c.status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default()
        });
        status.follow::<NodePool>(kube, "NodePool", |p| {
            p.status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default()
        });
        status
    }

    fn follow<K>(&self, kube: &kube::Client, kind: &'static str, conditions: fn(&K) -> Vec<Condition>)
    where
        K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
    {
        let state = self.state.clone();
        let events =
            watcher(Api::<K>::namespaced(kube.clone(), NS), watcher::Config::default()).default_backoff();
        tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                let mut state = state.lock().unwrap();
                match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        let c = conditions(&o);
                        state.record(
                            format!("{kind}/{}", o.name_any()),
                            Seen {
                                ready: is_true(&c, "Ready"),
                                synced: is_true(&c, "Synced"),
                            },
                        );
                    }
                    Ok(watcher::Event::Delete(o)) => {
                        state.objects.remove(&format!("{kind}/{}", o.name_any()));
                    }
                    _ => {}
                }
            }
        });
    }

    /// How many of the objects whose name passes `counted` are Ready and Synced.
    pub fn ready(&self, counted: impl Fn(&str) -> bool) -> usize {
        let state = self.state.lock().unwrap();
        state
            .objects
            .iter()
            .filter(|(name, seen)| counted(name) && seen.ready && seen.synced)
            .count()
    }

    /// Synced True -> False transitions so far, and the first objects that made one.
    pub fn flaps(&self) -> (u64, Vec<String>) {
        let state = self.state.lock().unwrap();
        (state.flaps, state.flapped.clone())
    }
}

impl State {
    fn record(&mut self, key: String, now: Seen) {
        let before = self.objects.insert(key.clone(), now);
        if before.is_some_and(|b| b.synced && !now.synced) {
            self.flaps += 1;
            if self.flapped.len() < 5 {
                self.flapped.push(key);
            }
        }
    }
}
