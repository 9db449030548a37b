//! What the ModelService XRD cannot say; everything it can (entry count, name pattern, weight and priority
//! bounds, non-empty selectors, durations) is enforced from the XRD itself before composing (`crate::validate`).

use std::collections::BTreeSet;

use crate::{api::routing::ModelServiceSpec, compose::ComposeError};

/// The entries' names, in spec order: `name`, or for a v0.3.1 entry without one, `endpoints-<index>`. The XRD's
/// rule keeps the names it sees unique; a name given to one entry that another, unnamed, gets by its index
/// (`endpoints-1` beside a second unnamed entry) is refused here, since the two would share a route rule.
pub fn entry_names(spec: &ModelServiceSpec) -> Result<Vec<String>, ComposeError> {
    let mut seen = BTreeSet::new();
    let mut names = Vec::with_capacity(spec.endpoints.len());
    for (i, entry) in spec.endpoints.iter().enumerate() {
        let name = entry.name.clone().unwrap_or_else(|| format!("endpoints-{i}"));
        if !seen.insert(name.clone()) {
            return Err(ComposeError::new(
                format!("spec.endpoints[{i}].name"),
                format!("{name:?} names another entry too; entry names must be unique"),
            ));
        }
        names.push(name);
    }
    Ok(names)
}
