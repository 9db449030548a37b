//! Priority tiers and weights: which endpoints a ModelService's route lists, and with what share.
//!
//! Priority is for failure (a tier takes traffic only while every tier before it has no healthy endpoint), weight
//! is the deliberate split inside a tier. An entry's weight belongs to the entry, not to its endpoints: it is
//! spread evenly over the endpoints the entry matches, so scaling a deployment does not change its share.

use std::collections::BTreeMap;

use crate::api::routing::{MAX_WEIGHT, MatchLabels};

/// Envoy AI Gateway takes at most this many backends in one route rule (`rules[].backendRefs` maxItems).
pub const MAX_BACKENDS: usize = 128;

/// One `spec.endpoints` entry, already validated.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub name: &'a str,
    pub priority: u64,
    pub weight: u64,
    pub selector: &'a MatchLabels,
}

/// A ModelEndpoint in the service's namespace.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    /// Ready and routable (its URL parses); anything else takes no traffic.
    pub ready: bool,
}

/// One backend of the route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    pub endpoint: String,
    pub entry: String,
    /// Renumbered over the tiers that have a ready endpoint, from 0.
    pub priority: u32,
    pub weight: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub backends: Vec<Backend>,
    /// Endpoints some entry matches, ready or not.
    pub matched: usize,
    pub ready: usize,
    /// Entries that match no ready endpoint, in spec order: they take no traffic.
    pub idle_entries: Vec<String>,
    /// Ready endpoints left out because the route is full (`MAX_BACKENDS`), in the least preferred tiers.
    pub dropped: usize,
}

/// Computes the route's backends. An endpoint matched by several entries belongs to the first entry that
/// matches it, so it is never listed twice with two different shares. Candidates are taken in name order, which
/// keeps the result (and so the composed route) stable across reconciles.
pub fn plan(entries: &[Entry<'_>], candidates: &[Candidate<'_>]) -> Plan {
    let mut sorted: Vec<&Candidate<'_>> = candidates.iter().collect();
    sorted.sort_by_key(|c| c.name);
    let mut ready_by_entry: Vec<Vec<&str>> = vec![Vec::new(); entries.len()];
    let mut out = Plan::default();
    for candidate in sorted {
        let Some(owner) = entries.iter().position(|e| e.selector.matches(candidate.labels)) else {
            continue;
        };
        out.matched += 1;
        if candidate.ready {
            out.ready += 1;
            ready_by_entry[owner].push(candidate.name);
        }
    }

    let mut tiers: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (index, entry) in entries.iter().enumerate() {
        if ready_by_entry[index].is_empty() {
            out.idle_entries.push(entry.name.to_owned());
        } else {
            tiers.entry(entry.priority).or_default().push(index);
        }
    }
    for (tier, members) in tiers.values().enumerate() {
        let shares: Vec<(u64, usize)> = members
            .iter()
            .map(|&i| (entries[i].weight, ready_by_entry[i].len()))
            .collect();
        for (&index, weights) in members.iter().zip(spread(&shares)) {
            for (endpoint, weight) in ready_by_entry[index].iter().zip(weights) {
                out.backends.push(Backend {
                    endpoint: (*endpoint).to_owned(),
                    entry: entries[index].name.to_owned(),
                    priority: u32::try_from(tier).unwrap_or(u32::MAX),
                    weight,
                });
            }
        }
    }
    if out.backends.len() > MAX_BACKENDS {
        out.dropped = out.backends.len() - MAX_BACKENDS;
        out.backends.truncate(MAX_BACKENDS);
    }
    out
}

/// Splits each `(weight, endpoints)` share of one tier into per-endpoint weights. Every entry's weight is first
/// scaled so that none of its endpoints rounds down to 0, split evenly (the first endpoints take the remainder),
/// reduced by the common divisor, and, if the largest still exceeds `MAX_WEIGHT`, scaled down proportionally
/// with a floor of 1 (an endpoint listed with weight 0 would silently take no traffic).
fn spread(shares: &[(u64, usize)]) -> Vec<Vec<u32>> {
    let scale = shares
        .iter()
        .map(|&(weight, count)| (count as u128).div_ceil(u128::from(weight.max(1))))
        .max()
        .unwrap_or(1)
        .max(1);
    let mut split: Vec<Vec<u128>> = shares
        .iter()
        .map(|&(weight, count)| {
            let total = u128::from(weight.max(1)) * scale;
            let count_u = (count as u128).max(1);
            let (base, remainder) = (total / count_u, total % count_u);
            (0..count_u)
                .map(|i| base + u128::from(i < remainder))
                .take(count)
                .collect()
        })
        .collect();
    let divisor = split.iter().flatten().fold(0, |acc, &w| gcd(acc, w)).max(1);
    let largest = split.iter().flatten().map(|&w| w / divisor).max().unwrap_or(1);
    let cap = u128::from(MAX_WEIGHT);
    for weights in &mut split {
        for w in weights.iter_mut() {
            *w /= divisor;
            if largest > cap {
                *w = (*w * cap / largest).max(1);
            }
        }
    }
    split
        .into_iter()
        .map(|weights| {
            weights
                .into_iter()
                .map(|w| u32::try_from(w).unwrap_or(u32::MAX))
                .collect()
        })
        .collect()
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    struct Case {
        name: &'static str,
        /// (entry name, priority, weight, selected label value of `app`)
        entries: &'static [(&'static str, u64, u64, &'static str)],
        /// (endpoint name, `app` label, ready)
        endpoints: &'static [(&'static str, &'static str, bool)],
        /// (endpoint, entry, priority, weight)
        want: &'static [(&'static str, &'static str, u32, u32)],
        idle: &'static [&'static str],
    }

    const CASES: &[Case] = &[
        Case {
            name: "one entry spreads its weight evenly over its endpoints",
            entries: &[("ours", 0, 1, "ours")],
            endpoints: &[("a", "ours", true), ("b", "ours", true)],
            want: &[("a", "ours", 0, 1), ("b", "ours", 0, 1)],
            idle: &[],
        },
        Case {
            name: "a 90/10 canary keeps its split whatever the replica counts",
            entries: &[("stable", 0, 90, "stable"), ("canary", 0, 10, "canary")],
            endpoints: &[
                ("s1", "stable", true),
                ("s2", "stable", true),
                ("c1", "canary", true),
            ],
            want: &[
                ("s1", "stable", 0, 9),
                ("s2", "stable", 0, 9),
                ("c1", "canary", 0, 2),
            ],
            idle: &[],
        },
        Case {
            name: "the first endpoints take the remainder of an uneven split",
            entries: &[("ours", 0, 5, "ours")],
            endpoints: &[("a", "ours", true), ("b", "ours", true)],
            want: &[("a", "ours", 0, 3), ("b", "ours", 0, 2)],
            idle: &[],
        },
        Case {
            name: "an entry with no ready endpoint takes nothing and its tier is skipped",
            entries: &[("ours", 0, 1, "ours"), ("provider", 1, 1, "provider")],
            endpoints: &[("a", "ours", false), ("p", "provider", true)],
            want: &[("p", "provider", 0, 1)],
            idle: &["ours"],
        },
        Case {
            name: "an entry with no ready endpoint leaves the others' shares alone",
            entries: &[("a", 0, 3, "a"), ("b", 0, 1, "b"), ("c", 0, 1, "c")],
            endpoints: &[("a1", "a", true), ("b1", "b", false), ("c1", "c", true)],
            want: &[("a1", "a", 0, 3), ("c1", "c", 0, 1)],
            idle: &["b"],
        },
        Case {
            name: "priorities are tiers renumbered from 0, in order",
            entries: &[("overflow", 40, 1, "provider"), ("ours", 7, 1, "ours")],
            endpoints: &[("a", "ours", true), ("p", "provider", true)],
            want: &[("a", "ours", 0, 1), ("p", "overflow", 1, 1)],
            idle: &[],
        },
        Case {
            name: "weights at the 10^6 cap are scaled down and none falls to 0",
            entries: &[("big", 0, 1_000_000, "big"), ("small", 0, 1, "small")],
            endpoints: &[
                ("b", "big", true),
                ("s1", "small", true),
                ("s2", "small", true),
                ("s3", "small", true),
            ],
            want: &[
                ("b", "big", 0, 1_000_000),
                ("s1", "small", 0, 1),
                ("s2", "small", 0, 1),
                ("s3", "small", 0, 1),
            ],
            idle: &[],
        },
        Case {
            name: "two entries at the 10^6 cap reduce to 1:1",
            entries: &[("x", 0, 1_000_000, "x"), ("y", 0, 1_000_000, "y")],
            endpoints: &[("x1", "x", true), ("y1", "y", true)],
            want: &[("x1", "x", 0, 1), ("y1", "y", 0, 1)],
            idle: &[],
        },
        Case {
            name: "nothing ready: no backends at all",
            entries: &[("ours", 0, 1, "ours")],
            endpoints: &[("a", "ours", false)],
            want: &[],
            idle: &["ours"],
        },
    ];

    #[test]
    fn tiers_and_weights() {
        for case in CASES {
            let selectors: Vec<MatchLabels> = case
                .entries
                .iter()
                .map(|(_, _, _, app)| MatchLabels {
                    match_labels: labels(&[("app", app)]),
                })
                .collect();
            let entries: Vec<Entry<'_>> = case
                .entries
                .iter()
                .zip(&selectors)
                .map(|(&(name, priority, weight, _), selector)| Entry {
                    name,
                    priority,
                    weight,
                    selector,
                })
                .collect();
            let endpoint_labels: Vec<_> = case
                .endpoints
                .iter()
                .map(|(_, app, _)| labels(&[("app", app)]))
                .collect();
            let candidates: Vec<Candidate<'_>> = case
                .endpoints
                .iter()
                .zip(&endpoint_labels)
                .map(|(&(name, _, ready), labels)| Candidate { name, labels, ready })
                .collect();
            let got = plan(&entries, &candidates);
            let mut got_backends: Vec<_> = got
                .backends
                .iter()
                .map(|b| (b.endpoint.as_str(), b.entry.as_str(), b.priority, b.weight))
                .collect();
            let mut want = case.want.to_vec();
            got_backends.sort();
            want.sort();
            assert_eq!(got_backends, want, "{}", case.name);
            assert_eq!(got.idle_entries, case.idle, "{}", case.name);
        }
    }

    #[test]
    fn an_endpoint_matched_by_two_entries_belongs_to_the_first() {
        let narrow = MatchLabels {
            match_labels: labels(&[("app", "qwen"), ("region", "eu")]),
        };
        let wide = MatchLabels {
            match_labels: labels(&[("app", "qwen")]),
        };
        let entries = [
            Entry {
                name: "eu",
                priority: 0,
                weight: 3,
                selector: &narrow,
            },
            Entry {
                name: "anywhere",
                priority: 0,
                weight: 1,
                selector: &wide,
            },
        ];
        let eu = labels(&[("app", "qwen"), ("region", "eu")]);
        let us = labels(&[("app", "qwen"), ("region", "us")]);
        let candidates = [
            Candidate {
                name: "qwen-eu",
                labels: &eu,
                ready: true,
            },
            Candidate {
                name: "qwen-us",
                labels: &us,
                ready: true,
            },
        ];
        let got = plan(&entries, &candidates);
        assert_eq!((got.matched, got.ready), (2, 2));
        let listed: Vec<_> = got
            .backends
            .iter()
            .map(|b| (b.endpoint.as_str(), b.entry.as_str(), b.weight))
            .collect();
        assert_eq!(listed, [("qwen-eu", "eu", 3), ("qwen-us", "anywhere", 1)]);
    }

    #[test]
    fn a_route_never_lists_more_backends_than_envoy_ai_gateway_accepts() {
        let selector = MatchLabels {
            match_labels: labels(&[("app", "qwen")]),
        };
        let entries = [Entry {
            name: "all",
            priority: 0,
            weight: 1,
            selector: &selector,
        }];
        let app = labels(&[("app", "qwen")]);
        let names: Vec<String> = (0..1000).map(|i| format!("ep-{i:04}")).collect();
        let candidates: Vec<_> = names
            .iter()
            .map(|name| Candidate {
                name,
                labels: &app,
                ready: true,
            })
            .collect();
        let got = plan(&entries, &candidates);
        assert_eq!(
            (got.backends.len(), got.dropped, got.ready),
            (MAX_BACKENDS, 1000 - MAX_BACKENDS, 1000)
        );
        assert!(got.backends.iter().all(|b| b.weight == 1));
    }

    #[test]
    fn spread_never_exceeds_the_cap_or_reaches_zero() {
        for shares in [
            vec![(1_000_000, 1), (1, 1000)],
            vec![(999_999, 7), (3, 1), (1_000_000, 128)],
            vec![(1, 128)],
        ] {
            for weight in spread(&shares).into_iter().flatten() {
                assert!((1..=1_000_000).contains(&weight), "{shares:?}: {weight}");
            }
        }
    }
}
