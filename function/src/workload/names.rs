//! Names for objects on a workload cluster, kept inside the length limits the consuming controllers impose.

/// Joins `parts` with `-`. When the result is longer than `max`, it is cut and given a short hash of the full
/// name, so different long names stay different and the same name always comes out the same.
pub fn child_name(parts: &[&str], max: usize) -> String {
    let full = parts.join("-");
    if full.len() <= max {
        return full;
    }
    let hash = format!("{:08x}", fnv1a(full.as_bytes()));
    let suffix = &hash[..5];
    let keep = max.saturating_sub(suffix.len() + 1);
    let mut cut: String = full.chars().take(keep).collect();
    while cut.ends_with('-') {
        cut.pop();
    }
    format!("{cut}-{suffix}")
}

/// A short, stable digest of `bytes`, for annotations that change when what they digest changes.
pub fn short_hash(bytes: &[u8]) -> String {
    format!("{:08x}", fnv1a(bytes))
}

/// FNV-1a: tiny, stable across releases and platforms, which a name hash must be.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash: u32, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_joined_unchanged() {
        assert_eq!(
            child_name(&["qwen3-coder", "0", "engine"], 35),
            "qwen3-coder-0-engine"
        );
    }

    #[test]
    fn long_names_are_cut_to_the_limit_with_a_stable_hash() {
        let a = child_name(&["a-very-long-model-deployment-name", "12", "engine"], 24);
        let b = child_name(&["a-very-long-model-deployment-name", "13", "engine"], 24);
        assert!(a.len() <= 24, "{a}");
        assert!(!a.contains("--"), "{a}");
        assert_ne!(a, b);
        assert_eq!(
            a,
            child_name(&["a-very-long-model-deployment-name", "12", "engine"], 24)
        );
    }
}
