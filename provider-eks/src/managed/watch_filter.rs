//! Which watch events start a reconcile (crossplane-runtime's `DesiredStateChanged`): a new generation (the spec
//! changed), the start of deletion, and annotations a user sets (paused, an external name of their own). Not
//! the provider's own writes: status, finalizer, the create-pending/succeeded/failed marks, or the default
//! external name it records itself. Without this filter each of those writes woke the controller at once and
//! bypassed its backoff, so a rejected Create was retried in a tight loop.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use kube::{Resource, ResourceExt};

use super::annotations::{CREATE_FAILED, CREATE_PENDING, CREATE_SUCCEEDED, EXTERNAL_NAME};

/// Annotations the reconciler writes as bookkeeping; a change to them says nothing about the desired state.
const BOOKKEEPING: [&str; 3] = [CREATE_PENDING, CREATE_SUCCEEDED, CREATE_FAILED];

/// A hash of everything that should trigger a reconcile, for `WatchStreamExt::predicate_filter`: an event
/// passes only when this hash differs from the last one seen for the object.
pub fn desired_state<M: Resource>(mr: &M) -> Option<u64> {
    let name = mr.name_any();
    let mut hasher = DefaultHasher::new();
    mr.meta().generation.hash(&mut hasher);
    mr.meta().deletion_timestamp.is_some().hash(&mut hasher);
    for (key, value) in mr.annotations() {
        let bookkeeping = BOOKKEEPING.contains(&key.as_str());
        // The default external name (the object's own name) is written by the reconciler itself.
        let default_external_name = key == EXTERNAL_NAME && *value == name;
        if !bookkeeping && !default_external_name {
            (key, value).hash(&mut hasher);
        }
    }
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use modelplane_eks_api::{Cluster, ClusterSpec};

    use super::*;
    use crate::managed::annotations::PAUSED;

    fn cluster() -> Cluster {
        let mut c = Cluster::new("demo", ClusterSpec::default());
        c.metadata.generation = Some(1);
        c
    }

    fn annotated(pairs: &[(&str, &str)]) -> Cluster {
        let mut c = cluster();
        c.metadata.annotations = Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        c
    }

    #[test]
    fn the_providers_own_writes_do_not_trigger_a_reconcile() {
        let before = desired_state(&cluster());
        let mut after = annotated(&[
            (CREATE_PENDING, "2026-01-01T00:00:00Z"),
            (CREATE_FAILED, "2026-01-01T00:00:01Z"),
            (EXTERNAL_NAME, "demo"),
        ]);
        after.metadata.resource_version = Some("42".into());
        after.metadata.finalizers = Some(vec!["finalizer.managedresource.crossplane.io".into()]);
        after.status = Some(Default::default());
        assert_eq!(desired_state(&after), before);
    }

    #[test]
    fn spec_changes_deletion_pause_and_a_users_external_name_do() {
        let before = desired_state(&cluster());
        let mut newer = cluster();
        newer.metadata.generation = Some(2);
        let mut deleting = cluster();
        deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        for changed in [
            newer,
            deleting,
            annotated(&[(PAUSED, "true")]),
            annotated(&[(EXTERNAL_NAME, "adopted-elsewhere")]),
        ] {
            assert_ne!(desired_state(&changed), before, "{:?}", changed.metadata);
        }
    }
}
