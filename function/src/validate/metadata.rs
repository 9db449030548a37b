//! The checks the API server makes on every custom resource's metadata (apimachinery's `ValidateObjectMeta` with
//! `NameIsDNSSubdomain`): composers build object names, namespaces and labels from these, so they must be what
//! the API server would have admitted.

use serde_json::Value;

use super::schema::Finding;
use crate::limits::quote;

use modelplane_eks_api::names::{MAX_LABEL, MAX_SUBDOMAIN, is_dns_label, is_dns_subdomain, is_label_value};

/// The most annotation bytes one object may carry.
const MAX_ANNOTATION_BYTES: usize = 256 * 1024;

pub fn check(metadata: Option<&Value>) -> Vec<Finding> {
    let mut out = Vec::new();
    let text = |field: &str| metadata.and_then(|m| m.get(field)).and_then(Value::as_str);
    match text("name") {
        None | Some("") => out.push(("metadata.name".into(), "a name is required".into())),
        Some(name) if !is_dns_subdomain(name) => out.push((
            "metadata.name".into(),
            format!(
                "{} must be a lowercase RFC 1123 subdomain of at most {MAX_SUBDOMAIN} characters",
                quote(name, 64)
            ),
        )),
        Some(_) => {}
    }
    if let Some(namespace) = text("namespace")
        && !namespace.is_empty()
        && !is_dns_label(namespace)
    {
        out.push((
            "metadata.namespace".into(),
            format!(
                "{} must be a lowercase RFC 1123 label of at most {MAX_LABEL} characters",
                quote(namespace, 64)
            ),
        ));
    }
    let map = |field: &str| {
        metadata
            .and_then(|m| m.get(field))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
    };
    for (key, value) in map("labels") {
        let at = format!("metadata.labels.{}", crate::limits::cut(key, 64));
        if let Some(why) = qualified_name(key) {
            out.push((at.clone(), format!("key {}: {why}", quote(key, 64))));
        }
        match value.as_str() {
            Some(v) if is_label_value(v) => {}
            _ => out.push((
                at,
                format!(
                    "{} must be at most {MAX_LABEL} characters, alphanumerics, '-', '_' or '.', starting and \
                     ending with an alphanumeric",
                    quote(&value.to_string(), 64)
                ),
            )),
        }
    }
    let mut annotation_bytes = 0usize;
    for (key, value) in map("annotations") {
        if let Some(why) = qualified_name(key) {
            out.push((
                format!("metadata.annotations.{}", crate::limits::cut(key, 64)),
                format!("key {}: {why}", quote(key, 64)),
            ));
        }
        annotation_bytes += key.len() + value.as_str().map_or(0, str::len);
    }
    if annotation_bytes > MAX_ANNOTATION_BYTES {
        out.push((
            "metadata.annotations".into(),
            format!("{annotation_bytes} bytes; at most {MAX_ANNOTATION_BYTES} are allowed"),
        ));
    }
    out
}

/// Why `key` is not a qualified name (`[prefix/]name`, the prefix a DNS subdomain), if it is not.
pub fn qualified_name(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && !is_dns_subdomain(prefix)
    {
        return Some("the prefix must be a lowercase RFC 1123 subdomain".into());
    }
    if name.is_empty() || !is_label_value(name) {
        return Some(
            "the name part must be 1-63 characters, alphanumerics, '-', '_' or '.', starting and ending with an \
             alphanumeric"
                .into(),
        );
    }
    None
}
