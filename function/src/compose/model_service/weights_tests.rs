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
        name: "a 10^6 entry over three endpoints beside a weight-1 entry keeps 10^6:1 to within one",
        entries: &[("big", 0, 1_000_000, "big"), ("small", 0, 1, "small")],
        endpoints: &[
            ("b1", "big", true),
            ("b2", "big", true),
            ("b3", "big", true),
            ("s", "small", true),
        ],
        want: &[
            ("b1", "big", 0, 333_334),
            ("b2", "big", 0, 333_333),
            ("b3", "big", 0, 333_333),
            ("s", "small", 0, 1),
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
                namespace: "team",
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
            .map(|(&(name, _, ready), labels)| Candidate {
                name,
                namespace: "team",
                labels,
                ready,
                standby: false,
            })
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
            namespace: "team",
            priority: 0,
            weight: 3,
            selector: &narrow,
        },
        Entry {
            name: "anywhere",
            namespace: "team",
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
            namespace: "team",
            labels: &eu,
            ready: true,
            standby: false,
        },
        Candidate {
            name: "qwen-us",
            namespace: "team",
            labels: &us,
            ready: true,
            standby: false,
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
        namespace: "team",
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
            namespace: "team",
            labels: &app,
            ready: true,
            standby: false,
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

#[test]
fn an_entry_selects_only_in_its_own_namespace() {
    let selector = MatchLabels {
        match_labels: labels(&[("app", "qwen")]),
    };
    let entries = [
        Entry {
            name: "mine",
            namespace: "team",
            priority: 0,
            weight: 1,
            selector: &selector,
        },
        Entry {
            name: "shared",
            namespace: "shared",
            priority: 1,
            weight: 1,
            selector: &selector,
        },
    ];
    let app = labels(&[("app", "qwen")]);
    let candidates = [
        Candidate {
            name: "qwen",
            namespace: "team",
            labels: &app,
            ready: true,
            standby: false,
        },
        Candidate {
            name: "shared/qwen",
            namespace: "shared",
            labels: &app,
            ready: true,
            standby: false,
        },
        Candidate {
            name: "elsewhere/qwen",
            namespace: "elsewhere",
            labels: &app,
            ready: true,
            standby: false,
        },
    ];
    let got = plan(&entries, &candidates);
    let listed: Vec<_> = got
        .backends
        .iter()
        .map(|b| (b.endpoint.as_str(), b.entry.as_str(), b.priority))
        .collect();
    assert_eq!(listed, [("qwen", "mine", 0), ("shared/qwen", "shared", 1)]);
    assert_eq!(
        got.matched, 2,
        "the third namespace's endpoint is selected by no entry"
    );
}

#[test]
fn a_standby_endpoint_stands_in_for_its_tier_only_while_nothing_else_there_is_ready() {
    let own = labels(&[("app", "qwen")]);
    let overflow = labels(&[("app", "hosted")]);
    let (own_sel, overflow_sel) = (
        MatchLabels {
            match_labels: own.clone(),
        },
        MatchLabels {
            match_labels: overflow.clone(),
        },
    );
    let entries = [
        Entry {
            name: "own",
            namespace: "team",
            priority: 0,
            weight: 1,
            selector: &own_sel,
        },
        Entry {
            name: "overflow",
            namespace: "team",
            priority: 1,
            weight: 1,
            selector: &overflow_sel,
        },
    ];
    let candidate = |name, labels, ready, standby| Candidate {
        name,
        namespace: "team",
        labels,
        ready,
        standby,
    };
    let routed = |candidates: &[Candidate<'_>]| {
        plan(&entries, candidates)
            .backends
            .iter()
            .map(|b| (b.endpoint.clone(), b.priority))
            .collect::<Vec<_>>()
    };
    // Scaled to zero: callers wait at the standby server, and the overflow tier after it takes nothing.
    let at_zero = [
        candidate("qwen-standby", &own, true, true),
        candidate("together", &overflow, true, false),
    ];
    assert_eq!(
        routed(&at_zero),
        [("qwen-standby".to_owned(), 0), ("together".to_owned(), 1)]
    );
    // A replica loading: still the standby.
    let loading = [
        candidate("qwen-0-use1", &own, false, false),
        candidate("qwen-standby", &own, true, true),
    ];
    assert_eq!(routed(&loading), [("qwen-standby".to_owned(), 0)]);
    // A replica ready: the standby leaves the route in the same update.
    let serving = [
        candidate("qwen-0-use1", &own, true, false),
        candidate("qwen-standby", &own, true, true),
    ];
    assert_eq!(routed(&serving), [("qwen-0-use1".to_owned(), 0)]);
}
