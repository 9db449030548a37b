//! What the XRD's schema and CEL rules reject, checked again so a ModelService that never passed an API server
//! (render, an older XRD) fails with the field named instead of composing a route Envoy refuses.

use std::collections::BTreeSet;

use crate::{
    api::routing::{MAX_ENTRIES, MAX_PRIORITY, MAX_WEIGHT, ModelServiceSpec},
    compose::ComposeError,
};

/// The entries' names, in spec order: `name`, or for a v0.3.1 entry without one, `endpoints-<index>`.
pub fn entry_names(spec: &ModelServiceSpec) -> Result<Vec<String>, ComposeError> {
    if spec.endpoints.is_empty() {
        return Err(ComposeError::new(
            "spec.endpoints",
            "must list at least one entry selecting ModelEndpoints",
        ));
    }
    if spec.endpoints.len() > MAX_ENTRIES {
        return Err(ComposeError::new(
            "spec.endpoints",
            format!("has {} entries; at most {MAX_ENTRIES}", spec.endpoints.len()),
        ));
    }
    let mut seen = BTreeSet::new();
    let mut names = Vec::with_capacity(spec.endpoints.len());
    for (i, entry) in spec.endpoints.iter().enumerate() {
        let at = |field: &str| format!("spec.endpoints[{i}].{field}");
        let name = entry.name.clone().unwrap_or_else(|| format!("endpoints-{i}"));
        if !is_dns_label(&name) {
            return Err(ComposeError::new(
                at("name"),
                format!("{name:?} must be a DNS label: lower-case letters, digits and '-', at most 63"),
            ));
        }
        if !seen.insert(name.clone()) {
            return Err(ComposeError::new(
                at("name"),
                format!("{name:?} names another entry too; entry names must be unique"),
            ));
        }
        if !(1..=MAX_WEIGHT).contains(&entry.weight) {
            return Err(ComposeError::new(
                at("weight"),
                format!(
                    "{} is out of range 1..{MAX_WEIGHT}; to stop sending traffic to an entry, remove it",
                    entry.weight
                ),
            ));
        }
        if entry.priority > MAX_PRIORITY {
            return Err(ComposeError::new(
                at("priority"),
                format!("{} is out of range 0..{MAX_PRIORITY}", entry.priority),
            ));
        }
        if entry.selector.match_labels.is_empty() {
            return Err(ComposeError::new(
                at("selector.matchLabels"),
                "must name at least one label; an entry never selects every endpoint in the namespace",
            ));
        }
        names.push(name);
    }
    for (field, value) in [
        ("spec.timeouts.request", &spec.timeouts.request),
        ("spec.timeouts.idle", &spec.timeouts.idle),
    ] {
        if let Some(value) = value.as_deref().filter(|v| !is_duration(v)) {
            return Err(ComposeError::new(
                field,
                format!("{value:?} is not a duration like 30s, 5m or 1h30m"),
            ));
        }
    }
    Ok(names)
}

pub fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Gateway API's duration: 1 to 4 groups of up to 5 digits, each with a unit of h, m, s or ms.
pub fn is_duration(value: &str) -> bool {
    let mut groups = 0;
    let mut rest = value;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if !(1..=5).contains(&digits) {
            return false;
        }
        rest = &rest[digits..];
        let unit = if rest.starts_with("ms") { 2 } else { 1 };
        if !rest.starts_with(['h', 'm', 's']) {
            return false;
        }
        rest = &rest[unit..];
        groups += 1;
    }
    (1..=4).contains(&groups)
}

#[cfg(test)]
mod tests {
    use super::is_duration;

    #[test]
    fn durations_follow_gateway_api() {
        for ok in ["30s", "5m", "1h30m", "250ms", "0s", "1h2m3s4ms"] {
            assert!(is_duration(ok), "{ok}");
        }
        for bad in ["", "30", "s", "1d", "123456s", "1h1h1h1h1h", "-5s", "1.5s"] {
            assert!(!is_duration(bad), "{bad}");
        }
    }
}
