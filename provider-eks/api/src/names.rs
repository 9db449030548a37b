//! The Kubernetes name rules (apimachinery's DNS-1123 and label-value checks), written once for the function and
//! the provider: both build object names, namespaces and labels that an API server must admit.

/// Most characters in a DNS-1123 label, and in a label value.
pub const MAX_LABEL: usize = 63;
/// Most characters in a DNS-1123 subdomain.
pub const MAX_SUBDOMAIN: usize = 253;

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            b.len() <= MAX_LABEL
                && is_lower_alnum(first)
                && is_lower_alnum(last)
                && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// Dot-separated DNS labels, at most 253 characters.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= MAX_SUBDOMAIN && s.split('.').all(is_dns_label)
}

/// `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`, at most 63 characters: the empty value is a label value.
pub fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            b.len() <= MAX_LABEL
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_follow_rfc_1123() {
        for ok in ["a", "0", "a-b", "abc123", &"a".repeat(63)] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"a".repeat(64), "é"] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn dns_subdomains_are_dotted_labels() {
        for ok in ["a", "a.b", "cluster-gateway.modelplane.internal"] {
            assert!(is_dns_subdomain(ok), "{ok}");
        }
        let long = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(62)
        );
        assert_eq!(long.len(), 254);
        for bad in ["", ".", "a..b", "a.", "A.b", long.as_str()] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn label_values_allow_dots_underscores_and_case() {
        for ok in ["", "a", "A_b.c-D", &"x".repeat(63)] {
            assert!(is_label_value(ok), "{ok}");
        }
        for bad in ["_a", "a.", "a b", "a/b", &"x".repeat(64)] {
            assert!(!is_label_value(bad), "{bad}");
        }
    }
}
