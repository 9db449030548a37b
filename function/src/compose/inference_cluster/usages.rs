//! Deletion order, held by Crossplane `Usage`s (`protection.crossplane.io/v1beta1`): while a Usage exists, the
//! API server refuses to delete the resource it protects, and `replayDeletion` retries that deletion as soon as
//! the user is gone. Crossplane deletes every composed resource of a deleted composite at once; each cloud's
//! table of what uses what (see [`super::provision::Provisioner::uses`]) turns that into an order: what runs on
//! the cluster (Releases, Objects) and what hangs off it first, then the cluster, then its network and
//! identities.

use serde_json::Value;

use super::provision::Provisioner;
use crate::compose::{Output, crossplane};
use crate::wire::tree::{Fields, Tree};

/// One Usage for every (user, used) pair composed in `out` that the cloud's table names, named after the two so
/// it is stable.
pub fn compose(out: &mut Output, cluster: &str, cloud: &dyn Provisioner) {
    let mut pairs = Vec::new();
    for (key, composed) in &out.resources {
        let kind = composed
            .object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        for of in cloud.uses(kind, key) {
            if out.resources.contains_key(&of) && of != *key {
                pairs.push((key.clone(), of));
            }
        }
    }
    for (by_key, of_key) in pairs {
        let (Some(by), Some(of)) = (out.resources.get(&by_key), out.resources.get(&of_key)) else {
            continue;
        };
        let usage = usage(cluster, &by_key, &by.object, &of_key, &of.object);
        out.compose(format!("usage-{by_key}-{of_key}"), usage, false);
    }
}

fn usage(
    cluster: &str,
    by_key: &str,
    by: &serde_json::Map<String, Value>,
    of_key: &str,
    of: &serde_json::Map<String, Value>,
) -> Fields {
    let reference = |o: &serde_json::Map<String, Value>| {
        let field = |value: Option<&Value>| value.map_or(Tree::Null, Tree::from);
        let name = field(o.get("metadata").and_then(|m| m.get("name")));
        crossplane::resource_ref(field(o.get("apiVersion")), field(o.get("kind")), name)
    };
    crossplane::usage(
        format!("{cluster}-{by_key}-uses-{of_key}"),
        reference(of),
        reference(by),
        format!("{by_key} must be deleted before {of_key}"),
    )
}
