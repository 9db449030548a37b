//! Crossplane's well-known annotations and finalizer (crossplane-runtime `pkg/meta`), and how the reconciler
//! reads them.

use std::collections::BTreeMap;

use k8s_openapi::jiff::{Timestamp, Unit};

/// The external identifier. Defaults to `metadata.name`: EKS clusters and node groups are named by the caller.
pub const EXTERNAL_NAME: &str = "crossplane.io/external-name";
/// Set (with a timestamp) just before Create; guards against creating twice when the result was lost.
pub const CREATE_PENDING: &str = "crossplane.io/external-create-pending";
pub const CREATE_SUCCEEDED: &str = "crossplane.io/external-create-succeeded";
pub const CREATE_FAILED: &str = "crossplane.io/external-create-failed";
pub const PAUSED: &str = "crossplane.io/paused";
/// The one finalizer every Crossplane managed resource carries while its external resource may exist.
pub const FINALIZER: &str = "finalizer.managedresource.crossplane.io";

/// The creation bookkeeping found on a managed resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CreationMarks {
    pub pending: Option<Timestamp>,
    pub succeeded: Option<Timestamp>,
    pub failed: Option<Timestamp>,
}

impl CreationMarks {
    pub fn read(annotations: &BTreeMap<String, String>) -> Self {
        let at = |key: &str| annotations.get(key).and_then(|v| v.parse::<Timestamp>().ok());
        Self {
            pending: at(CREATE_PENDING),
            succeeded: at(CREATE_SUCCEEDED),
            failed: at(CREATE_FAILED),
        }
    }
}

pub fn is_paused(annotations: &BTreeMap<String, String>) -> bool {
    annotations.get(PAUSED).is_some_and(|v| v == "true")
}

/// Timestamps are written with second precision, as Crossplane does.
pub fn timestamp(now: Timestamp) -> String {
    now.round(Unit::Second).unwrap_or(now).to_string()
}
