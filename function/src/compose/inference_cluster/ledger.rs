//! The cluster's placement ledger (docs/scheduling.md): the namespace Objects of the replicas placed on it,
//! required by label, summed per pool and admitted deterministically. Incumbents (holders in the previous
//! status) are admitted first, all of them; newcomers then in order of creation, namespace, deployment and
//! replica, each while every pool it holds nodes in has room. The rest are over-committed: their deployments
//! move them.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::{
    api::{
        inference_cluster::{Holder, MAX_OVERCOMMITTED_SHOWN, Overcommitted, PoolStatus, deployment_key},
        ledger::{self, CLUSTER_LABEL, DEPLOYMENT_ANNOTATION, NODES_ANNOTATION, REPLICA_ANNOTATION},
    },
    compose::remote::OBJECT_API_VERSION,
    proto::v1::{MatchLabels, ResourceSelector, RunFunctionRequest, resource_selector::Match},
    sdk::request,
    wire::RawStruct,
};

/// Requirement name of the ledger.
pub const LEDGER: &str = "placement-ledger";

/// The Objects that name this cluster, in every namespace.
pub fn requirement(cluster: &str) -> ResourceSelector {
    ResourceSelector {
        api_version: OBJECT_API_VERSION.into(),
        kind: "Object".into(),
        r#match: Some(Match::MatchLabels(MatchLabels {
            labels: [(CLUSTER_LABEL.to_owned(), cluster.to_owned())].into(),
        })),
        namespace: None,
    }
}

/// One replica placement in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The Object's `creationTimestamp` (RFC 3339 in UTC, so it sorts as text).
    pub created: String,
    /// `<namespace>/<name>` of the deployment.
    pub deployment: String,
    pub replica: u32,
    /// Nodes by pool.
    pub nodes: BTreeMap<String, u64>,
}

#[derive(Deserialize)]
struct LedgerObject {
    metadata: LedgerMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LedgerMeta {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    creation_timestamp: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

/// The ledger's entries, and how many Objects were passed over because they are not ledger entries of this
/// cluster. Empty until Crossplane has fetched it: the requirements loop always calls again with it.
pub fn read(req: &RunFunctionRequest, cluster: &str) -> (Vec<Entry>, usize) {
    let mut entries = Vec::new();
    let mut skipped = 0;
    for item in request::required_resources(req, LEDGER).unwrap_or_default() {
        let Some(Ok(object)) = item.resource.as_ref().map(RawStruct::parse::<LedgerObject>) else {
            skipped += 1;
            continue;
        };
        match entry(object.metadata, cluster) {
            Some(entry) => entries.push(entry),
            None => skipped += 1,
        }
    }
    (entries, skipped)
}

fn entry(meta: LedgerMeta, cluster: &str) -> Option<Entry> {
    let a = &meta.annotations;
    if meta.labels.get(CLUSTER_LABEL).map(String::as_str) != Some(cluster) || meta.namespace.is_empty() {
        return None;
    }
    Some(Entry {
        created: meta.creation_timestamp,
        deployment: deployment_key(&meta.namespace, a.get(DEPLOYMENT_ANNOTATION)?),
        replica: a.get(REPLICA_ANNOTATION)?.parse().ok()?,
        nodes: ledger::parse_nodes(a.get(NODES_ANNOTATION)?)?,
    })
}

#[derive(Deserialize, Default)]
struct PreviousStatus {
    #[serde(default)]
    status: PreviousPools,
}

#[derive(Deserialize, Default)]
struct PreviousPools {
    #[serde(default)]
    pools: Vec<PreviousPool>,
}

#[derive(Deserialize)]
struct PreviousPool {
    #[serde(default)]
    name: String,
    #[serde(default)]
    holders: Vec<Holder>,
}

/// What the previous status said, from the observed composite.
#[derive(Debug, Default)]
pub struct Previous {
    /// The placements it admitted.
    pub incumbents: BTreeSet<(String, u32)>,
    /// The pools it offered.
    pub offered: BTreeSet<String>,
}

impl Previous {
    pub fn read(xr: &RawStruct) -> Self {
        let previous: PreviousStatus = xr.parse().unwrap_or_default();
        let mut out = Self::default();
        for pool in previous.status.pools {
            out.incumbents
                .extend(pool.holders.into_iter().map(|h| (h.deployment, h.replica)));
            out.offered.insert(pool.name);
        }
        out
    }
}

/// Admits `entries` into `pools` (filling `allocatedNodes` and `holders`) and returns the over-committed ones,
/// at most [`MAX_OVERCOMMITTED_SHOWN`] of them. Nodes in pools not offered are not counted.
pub fn admit(
    pools: &mut [PoolStatus],
    mut entries: Vec<Entry>,
    incumbents: &BTreeSet<(String, u32)>,
) -> Vec<Overcommitted> {
    let is_incumbent = |e: &Entry| incumbents.contains(&(e.deployment.clone(), e.replica));
    entries.sort_by_cached_key(|e| {
        (
            !is_incumbent(e),
            e.created.clone(),
            e.deployment.clone(),
            e.replica,
        )
    });
    let mut seen = BTreeSet::new();
    let mut overcommitted = Vec::new();
    for entry in entries {
        // Two Objects of one replica on one cluster: the earlier one speaks for it.
        if !seen.insert((entry.deployment.clone(), entry.replica)) {
            continue;
        }
        let held: Vec<(usize, u64)> = entry
            .nodes
            .iter()
            .filter_map(|(pool, n)| Some((pools.iter().position(|p| &p.name == pool)?, *n)))
            .collect();
        if held.is_empty() {
            continue;
        }
        let fits = held
            .iter()
            .all(|&(p, n)| pools[p].allocated_nodes.saturating_add(n) <= u64::from(pools[p].capacity()));
        if !fits && !is_incumbent(&entry) {
            overcommitted.push(Overcommitted {
                deployment: entry.deployment,
                replica: entry.replica,
            });
            continue;
        }
        for (p, n) in held {
            pools[p].allocated_nodes = pools[p].allocated_nodes.saturating_add(n);
            pools[p].holders.push(Holder {
                deployment: entry.deployment.clone(),
                replica: entry.replica,
                nodes: n,
            });
        }
    }
    overcommitted.truncate(MAX_OVERCOMMITTED_SHOWN);
    overcommitted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str, nodes: u32) -> PoolStatus {
        PoolStatus {
            name: name.into(),
            class_name: "c".into(),
            node_count: nodes,
            min_node_count: None,
            max_node_count: None,
            efa_interfaces: 0,
            devices: Vec::new(),
            allocated_nodes: 0,
            holders: Vec::new(),
        }
    }

    fn entry(created: &str, deployment: &str, replica: u32, nodes: &[(&str, u64)]) -> Entry {
        Entry {
            created: created.into(),
            deployment: deployment.into(),
            replica,
            nodes: nodes.iter().map(|(p, n)| ((*p).to_owned(), *n)).collect(),
        }
    }

    fn holders(pool: &PoolStatus) -> Vec<(&str, u32, u64)> {
        pool.holders
            .iter()
            .map(|h| (h.deployment.as_str(), h.replica, h.nodes))
            .collect()
    }

    #[test]
    fn the_earlier_of_two_racers_is_admitted_and_the_later_listed() {
        let mut pools = vec![pool("h200", 4)];
        let entries = vec![
            entry("2026-12-01T10:00:01Z", "team/late", 0, &[("h200", 4)]),
            entry("2026-12-01T10:00:00Z", "team/early", 0, &[("h200", 4)]),
        ];
        let over = admit(&mut pools, entries, &BTreeSet::new());
        assert_eq!(holders(&pools[0]), [("team/early", 0, 4)]);
        assert_eq!(pools[0].allocated_nodes, 4);
        assert_eq!(
            over,
            [Overcommitted {
                deployment: "team/late".into(),
                replica: 0
            }]
        );
    }

    #[test]
    fn an_incumbent_is_never_displaced_by_a_newcomer_of_the_same_second() {
        let mut pools = vec![pool("h200", 4)];
        let entries = vec![
            entry("2026-12-01T10:00:00Z", "team/b", 0, &[("h200", 4)]),
            entry("2026-12-01T10:00:00Z", "team/a", 0, &[("h200", 4)]),
        ];
        let incumbents = BTreeSet::from([("team/b".to_owned(), 0)]);
        let over = admit(&mut pools, entries, &incumbents);
        assert_eq!(holders(&pools[0]), [("team/b", 0, 4)]);
        assert_eq!(over.len(), 1);
        assert_eq!(over[0].deployment, "team/a");
    }

    #[test]
    fn incumbents_stay_when_the_pool_shrinks_and_newcomers_fill_what_is_left() {
        let mut pools = vec![pool("a", 3), pool("b", 2)];
        let entries = vec![
            entry("t1", "ns/x", 0, &[("a", 2)]),
            entry("t2", "ns/x", 1, &[("a", 2)]),
            entry("t3", "ns/y", 0, &[("a", 1), ("b", 1)]),
            entry("t4", "ns/z", 0, &[("b", 1)]),
        ];
        let incumbents = BTreeSet::from([("ns/x".to_owned(), 0), ("ns/x".to_owned(), 1)]);
        let over = admit(&mut pools, entries, &incumbents);
        assert_eq!(
            pools[0].allocated_nodes, 4,
            "both incumbents stay over a shrunken pool"
        );
        // y needs a node in both pools and `a` is full: over-committed as a whole, so z alone takes `b`.
        assert_eq!(holders(&pools[1]), [("ns/z", 0, 1)]);
        assert_eq!(over.len(), 1);
        assert_eq!(over[0].deployment, "ns/y");
    }

    #[test]
    fn nodes_in_pools_not_offered_are_not_counted_and_duplicates_count_once() {
        let mut pools = vec![pool("a", 8)];
        let entries = vec![
            entry("t1", "ns/x", 0, &[("gone", 8)]),
            entry("t2", "ns/y", 0, &[("a", 3)]),
            entry("t3", "ns/y", 0, &[("a", 3)]),
        ];
        assert!(admit(&mut pools, entries, &BTreeSet::new()).is_empty());
        assert_eq!(holders(&pools[0]), [("ns/y", 0, 3)]);
    }

    #[test]
    fn the_over_committed_list_is_bounded() {
        let mut pools = vec![pool("a", 1)];
        let entries = (0..100)
            .map(|r| entry(&format!("t{r:03}"), "ns/x", r, &[("a", 1)]))
            .collect();
        let over = admit(&mut pools, entries, &BTreeSet::new());
        assert_eq!(over.len(), MAX_OVERCOMMITTED_SHOWN);
        assert_eq!(over[0].replica, 1);
    }
}
