//! Priority tiers and weights: which endpoints a ModelService's route lists, and with what share.
//!
//! Priority is for failure (a tier takes traffic only while every tier before it has no healthy endpoint), weight
//! is the deliberate split inside a tier. An entry's weight belongs to the entry, not to its endpoints: it is
//! spread evenly over the endpoints the entry matches, so scaling a deployment does not change its share.

use std::collections::BTreeMap;

use crate::{
    api::routing::{MAX_WEIGHT, MatchLabels},
    compose::shared::MAX_BACKENDS,
};

/// One `spec.endpoints` entry, already validated.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub name: &'a str,
    /// Where it selects: the service's namespace, or one granted to it.
    pub namespace: &'a str,
    pub priority: u64,
    pub weight: u64,
    pub selector: &'a MatchLabels,
}

/// A ModelEndpoint the service may select.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    /// Its name in the service's own namespace, `<namespace>/<name>` in another (unique either way).
    pub name: &'a str,
    pub namespace: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    /// Ready and routable (its URL parses); anything else takes no traffic.
    pub ready: bool,
    /// A deployment's standby endpoint (scaled to zero, `modelplane.ai/standby`): it stands in for its tier
    /// only while nothing else in the tier is ready, so no caller is told to wait while a replica could answer.
    pub standby: bool,
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
    let mut standby_by_entry: Vec<Vec<&str>> = vec![Vec::new(); entries.len()];
    let mut out = Plan::default();
    for candidate in sorted {
        let Some(owner) = entries
            .iter()
            .position(|e| e.namespace == candidate.namespace && e.selector.matches(candidate.labels))
        else {
            continue;
        };
        out.matched += 1;
        if candidate.ready {
            out.ready += 1;
            let listed = if candidate.standby {
                &mut standby_by_entry
            } else {
                &mut ready_by_entry
            };
            listed[owner].push(candidate.name);
        }
    }
    let mut tier_serves: BTreeMap<u64, bool> = BTreeMap::new();
    for (entry, ready) in entries.iter().zip(&ready_by_entry) {
        *tier_serves.entry(entry.priority).or_default() |= !ready.is_empty();
    }
    for ((entry, ready), standby) in entries.iter().zip(&mut ready_by_entry).zip(standby_by_entry) {
        if !tier_serves.get(&entry.priority).copied().unwrap_or_default() {
            ready.extend(standby);
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
#[path = "weights_tests.rs"]
mod tests;
