//! Upgrading Modelplane across a change of composed-resource keys: replicas keep serving throughout.

use serde_json::json;

use super::{
    engine_tests::next_request,
    tests::{compose_on, seed, standard},
    *,
};
use crate::compose::fixtures::run;

const WEST: &str = "eks-h200-us-west";

/// `out` under the keys Modelplane composed before keys named the cluster: `replica-<i>-<engine>...`.
fn under_old_keys(out: &Output) -> Output {
    let mut old = out.clone();
    old.resources = out
        .resources
        .iter()
        .map(|(key, composed)| (key.replacen(&format!("-{WEST}"), "", 1), composed.clone()))
        .collect();
    old
}

#[test]
fn an_upgrade_that_renames_composed_keys_hands_the_running_replica_over_without_deleting_it() {
    let xr = seed();
    let mut before = under_old_keys(&compose_on(xr.clone(), &[standard()]));
    assert!(before.resources.contains_key("replica-0-qwen3-coder"));
    // An Object of the replica whose remote object nothing composes any more (an engine since renamed).
    let mut renamed = before.resources["replica-0-qwen3-coder"].clone();
    let mut object = renamed.object.to_map();
    object["spec"]["forProvider"]["manifest"]["metadata"]["name"] = json!("qwen3-coder-0-old-engine");
    renamed.object = crate::wire::tree::Fields::from(object).into();
    before.resources.insert("replica-0-old-engine".into(), renamed);

    // 1: the upgraded function observes the running replica under the old keys, all ready. It composes the new
    // Objects and keeps the old ones, observing only, so Crossplane deletes nothing that serves.
    let first = run(compose, &next_request(&xr, &[standard()], &before, |_| true)).unwrap();
    let new_key = format!("replica-0-{WEST}-qwen3-coder");
    assert!(first.resources.contains_key(&new_key));
    assert_eq!(
        first.status["replicas"][0]["cluster"], WEST,
        "it stays where it runs"
    );
    assert!(
        !first.resources.contains_key("replica-0-old-engine"),
        "an Object no new one takes over from goes as before"
    );
    let old_keys: Vec<&String> = before
        .resources
        .keys()
        .filter(|k| *k != "replica-0-old-engine")
        .collect();
    for key in &old_keys {
        let kept = &first
            .resources
            .get(*key)
            .unwrap_or_else(|| panic!("{key} not kept"))
            .object;
        assert_eq!(kept["spec"]["managementPolicies"], json!(["Observe"]), "{key}");
        assert_eq!(kept["spec"]["deletionPolicy"], "Orphan", "{key}");
        assert_eq!(
            kept["spec"]["forProvider"], before.resources[*key].object["spec"]["forProvider"],
            "{key}: kept as it runs"
        );
        assert!(
            kept["metadata"]["annotations"]
                .get("modelplane.ai/retiring")
                .is_none(),
            "{key}"
        );
    }

    // 2: the new Objects exist but are not ready: the old ones stay.
    let new_ready = |ready: bool| move |key: &str| !key.contains(WEST) || ready;
    let second = run(
        compose,
        &next_request(&xr, &[standard()], &first, new_ready(false)),
    )
    .unwrap();
    assert!(old_keys.iter().all(|key| second.resources.contains_key(*key)));
    assert_eq!(second.status["readyReplicas"], 0);

    // 3: the new Objects are ready: the old ones, seen observing only, are let go.
    let third = run(
        compose,
        &next_request(&xr, &[standard()], &second, new_ready(true)),
    )
    .unwrap();
    assert!(
        third.resources.keys().all(|key| key.contains(WEST)),
        "{:?}",
        third.resources.keys()
    );
    assert_eq!(third.status["readyReplicas"], 1);
}
