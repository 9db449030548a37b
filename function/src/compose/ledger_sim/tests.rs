use std::collections::BTreeSet;

use super::*;

const WAITING: Option<std::time::Duration> = Some(crate::compose::WAITING_TTL);

#[test]
fn two_deployments_racing_for_the_last_nodes_resolve_in_a_cluster_and_a_deployment_reconcile() {
    // "a" has 4 nodes, 2 of them held by "x"; "b" has 2. Both newcomers rank "a" first (schedule::rank of
    // "team/h" and "team/j"), so both go for its last two nodes.
    let mut plane = ControlPlane::new(&[("a", 4), ("b", 2)]);
    plane.add(deployment_xr("team", "x", 1, 2));
    plane.reconcile_deployment("team/x");
    plane.reconcile_cluster("a");
    assert_eq!(plane.placements("team/x"), [Some("a".into())]);

    plane.add(deployment_xr("team", "h", 1, 2));
    plane.add(deployment_xr("team", "j", 1, 2));
    // Both reconcile against the same status of "a" (2 free) and both place there: the race.
    plane.reconcile_deployment("team/h");
    plane.reconcile_deployment("team/j");
    assert_eq!(plane.placements("team/h"), [Some("a".into())]);
    assert_eq!(plane.placements("team/j"), [Some("a".into())]);
    assert_eq!(plane.claimed("a")["gpu"], 6, "over-committed for now");
    assert_eq!(
        plane.last("team/j").ttl,
        WAITING,
        "not admitted yet: retried soon"
    );

    // The cluster's reconcile admits the earlier one and lists the later.
    let over = plane.reconcile_cluster("a");
    assert_eq!(over, [json!({"deployment": "team/j", "replica": 0})]);
    assert!(plane.holders("a").contains(&("team/h".into(), 0)));
    assert_eq!(plane.cluster_status("a")["pools"][0]["allocatedNodes"], 4);

    // The earlier stays put; the later's next reconcile moves it, and its Objects on "a" are gone.
    assert!(!plane.reconcile_deployment("team/h"));
    assert_eq!(plane.placements("team/h"), [Some("a".into())]);
    plane.reconcile_deployment("team/j");
    assert_eq!(plane.placements("team/j"), [Some("b".into())]);
    assert_eq!(
        plane.claimed("a")["gpu"],
        4,
        "over-commit over after one deployment reconcile"
    );
    assert!(plane.last("team/j").warnings[0].contains("over-committed"));

    // Settled: nothing listed, everyone admitted, the default TTL.
    assert!(plane.reconcile_cluster("a").is_empty());
    assert!(plane.reconcile_cluster("b").is_empty());
    for key in ["team/x", "team/h", "team/j"] {
        assert!(!plane.reconcile_deployment(key), "{key} is settled");
        assert_eq!(plane.last(key).ttl, None, "{key}");
        assert_eq!(
            plane
                .last(key)
                .requirements
                .keys()
                .filter(|k| k.starts_with("cluster-"))
                .count(),
            1,
            "{key} requires only its own cluster"
        );
        assert!(
            !plane
                .last(key)
                .requirements
                .contains_key(model_deployment::CLUSTERS)
        );
    }
}

#[test]
fn a_loser_with_nowhere_to_go_waits_and_the_winner_is_untouched() {
    let mut plane = ControlPlane::new(&[("a", 2)]);
    plane.add(deployment_xr("team", "d", 1, 2));
    plane.add(deployment_xr("other", "e", 1, 2));
    plane.reconcile_deployment("team/d");
    plane.reconcile_deployment("other/e");
    plane.reconcile_cluster("a");
    plane.reconcile_deployment("other/e");
    plane.reconcile_deployment("team/d");
    assert_eq!(plane.placements("team/d"), [Some("a".into())]);
    assert_eq!(plane.placements("other/e"), [None]);
    assert_eq!(
        plane.last("other/e").status["replicas"][0]["reason"],
        "InsufficientCapacity"
    );
    assert_eq!(plane.last("other/e").ttl, WAITING);
    assert!(
        plane
            .last("other/e")
            .requirements
            .contains_key(model_deployment::CLUSTERS),
        "a waiting deployment reads the candidates"
    );
    assert_eq!(plane.claimed("a")["gpu"], 2);
    assert!(plane.reconcile_cluster("a").is_empty());
}

#[test]
fn an_offered_pool_keeps_its_holders_while_the_clusters_resources_are_not_ready_for_a_moment() {
    let mut plane = ControlPlane::new(&[("a", 2)]);
    plane.add(deployment_xr("team", "d", 1, 2));
    plane.reconcile_deployment("team/d");
    plane.reconcile_cluster("a");
    assert!(plane.holders("a").contains(&("team/d".into(), 0)));

    // Its composed resources read not Ready (their provider's reconciles failed across a restart): the pool
    // stays offered and its nodes stay held, so a newcomer does not read them as free.
    plane.observe_ready("a", false);
    plane.reconcile_cluster("a");
    assert!(
        plane.holders("a").contains(&("team/d".into(), 0)),
        "{}",
        plane.cluster_status("a")
    );
    assert_eq!(plane.cluster_status("a")["pools"][0]["allocatedNodes"], 2);
    plane.add(deployment_xr("other", "e", 1, 2));
    plane.reconcile_deployment("other/e");
    assert_eq!(plane.placements("other/e"), [None]);
    assert_eq!(plane.placements("team/d"), [Some("a".into())]);
    plane.observe_ready("a", true);
    assert!(plane.reconcile_cluster("a").is_empty());
}

/// A small deterministic generator (xorshift64*), so every case can be replayed from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// Runs every cluster and deployment round-robin until a whole round changes nothing.
fn settle(plane: &mut ControlPlane) -> usize {
    for round in 0..30 {
        let mut changed = false;
        for cluster in plane.cluster_names() {
            let before = plane.cluster_status(&cluster).clone();
            plane.reconcile_cluster(&cluster);
            changed |= *plane.cluster_status(&cluster) != before;
        }
        for key in plane.deployment_names() {
            changed |= plane.reconcile_deployment(&key);
        }
        if !changed {
            return round;
        }
    }
    panic!("the fleet did not settle in 30 rounds");
}

#[test]
fn a_hundred_deployments_in_random_order_and_interleavings_never_settle_over_committed() {
    for seed in [1u64, 7, 1234] {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let clusters = [("c0", 6), ("c1", 8), ("c2", 4), ("c3", 10), ("c4", 5)];
        let capacity: u64 = clusters.iter().map(|c| c.1).sum();
        let mut plane = ControlPlane::new(&clusters.map(|(n, c)| (n, c as u32)));
        let mut pending: Vec<(String, u32)> = (0..100)
            .map(|i| (format!("d{i:03}"), 1 + (i % 3) as u32))
            .collect();
        let mut admitted_ever: BTreeSet<(String, String, u64)> = BTreeSet::new();
        let mut steps = 0;
        while !pending.is_empty() || steps < 400 {
            steps += 1;
            match rng.below(4) {
                // A new deployment arrives.
                0 if !pending.is_empty() => {
                    let (name, nodes) = pending.swap_remove(rng.below(pending.len()));
                    let namespace = format!("ns{}", rng.below(3));
                    plane.add(deployment_xr(&namespace, &name, 1 + rng.below(2) as u32, nodes));
                }
                // A cluster reconciles; whoever it admitted before stays admitted while its Object exists.
                1 => {
                    let names = plane.cluster_names();
                    let cluster = names[rng.below(names.len())].clone();
                    let before = plane.holders(&cluster);
                    plane.reconcile_cluster(&cluster);
                    let after = plane.holders(&cluster);
                    let ledger: BTreeSet<(String, u64)> = plane
                        .ledger(&cluster)
                        .iter()
                        .map(|o| {
                            let a = &o["metadata"]["annotations"];
                            let name = a[ledger::DEPLOYMENT_ANNOTATION].as_str().unwrap();
                            let ns = o["metadata"]["namespace"].as_str().unwrap();
                            let replica: u64 =
                                a[ledger::REPLICA_ANNOTATION].as_str().unwrap().parse().unwrap();
                            (format!("{ns}/{name}"), replica)
                        })
                        .collect();
                    for holder in before.intersection(&ledger) {
                        assert!(
                            after.contains(holder),
                            "seed {seed}: {holder:?} evicted after admission"
                        );
                    }
                    for (d, r) in after {
                        admitted_ever.insert((cluster.clone(), d, r));
                    }
                }
                // Deployments reconcile: often several against the same cluster statuses, which is the race.
                _ => {
                    let names = plane.deployment_names();
                    if names.is_empty() {
                        continue;
                    }
                    for _ in 0..=rng.below(4) {
                        let key = names[rng.below(names.len())].clone();
                        plane.reconcile_deployment(&key);
                    }
                }
            }
        }
        let rounds = settle(&mut plane);
        let mut placed_nodes = 0;
        for cluster in plane.cluster_names() {
            let claimed = plane.claimed(&cluster).get("gpu").copied().unwrap_or(0);
            assert!(
                claimed <= plane.capacity(&cluster),
                "seed {seed}: {cluster} settled over-committed: {claimed} > {}",
                plane.capacity(&cluster)
            );
            assert!(
                plane.cluster_status(&cluster)["overcommitted"].is_null(),
                "seed {seed}"
            );
            placed_nodes += claimed;
        }
        let mut unplaced = 0;
        for key in plane.deployment_names() {
            let out = plane.last(&key);
            for replica in out.status["replicas"].as_array().unwrap() {
                if replica["cluster"].is_null() {
                    unplaced += 1;
                    assert_eq!(replica["reason"], "InsufficientCapacity", "seed {seed}: {key}");
                }
            }
        }
        // Demand (about 300 nodes) far exceeds the 33 nodes: the fleet ends full, with the rest waiting.
        assert!(unplaced > 0, "seed {seed}");
        assert!(
            placed_nodes == capacity,
            "seed {seed}: only {placed_nodes} of {capacity} nodes used after settling in {rounds} rounds"
        );
    }
}
