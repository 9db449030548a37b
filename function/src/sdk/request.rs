//! Readers for a `RunFunctionRequest`.

use serde::Deserialize;

use crate::{
    proto::v1::{Capability, Resource, RunFunctionRequest},
    wire::RawStruct,
};

/// The observed composite resource, if Crossplane sent one.
pub fn observed_composite(req: &RunFunctionRequest) -> Option<&RawStruct> {
    req.observed.as_ref()?.composite.as_ref()?.resource.as_ref()
}

/// The resources Crossplane found for requirement `name`.
///
/// `None` when Crossplane has not resolved the requirement yet; an empty slice when it looked and found nothing.
pub fn required_resources<'a>(req: &'a RunFunctionRequest, name: &str) -> Option<&'a [Resource]> {
    req.required_resources
        .get(name)
        .or_else(|| req.extra_resources.get(name))
        .map(|found| found.items.as_slice())
}

/// The resource among `found` named `name` in `namespace`: whatever else arrives under a requirement (another
/// namespace's object of that name) is not it. One without a namespace, as `render`'s inputs may be written,
/// counts as being in `namespace`.
pub fn named_in<'a>(found: &'a [Resource], name: &str, namespace: &str) -> Option<&'a RawStruct> {
    #[derive(Deserialize)]
    struct Named<'s> {
        #[serde(borrow, default)]
        metadata: NamedMeta<'s>,
    }
    #[derive(Default, Deserialize)]
    struct NamedMeta<'s> {
        #[serde(borrow, default)]
        name: std::borrow::Cow<'s, str>,
        #[serde(borrow, default)]
        namespace: Option<std::borrow::Cow<'s, str>>,
    }
    found.iter().filter_map(|r| r.resource.as_ref()).find(|raw| {
        raw.parse::<Named<'_>>()
            .is_ok_and(|o| o.metadata.name == name && o.metadata.namespace.is_none_or(|ns| ns == namespace))
    })
}

/// The observed composed resource under composition resource name `key`.
pub fn observed_composed<'a>(req: &'a RunFunctionRequest, key: &str) -> Option<&'a Resource> {
    req.observed.as_ref()?.resources.get(key)
}

/// Whether the caller advertised `capability`. Callers older than Crossplane v2.2 advertise nothing, so a
/// missing capability proves nothing unless `Capability::Capabilities` is present.
pub fn has_capability(req: &RunFunctionRequest, capability: Capability) -> bool {
    req.meta
        .as_ref()
        .is_some_and(|meta| meta.capabilities.contains(&(capability as i32)))
}

/// Whether the caller said it cannot do `capability`: it advertises its capabilities (Crossplane v2.2 and later
/// do, `Capability::Capabilities` among them) and this one is not among them. A caller that advertises nothing
/// lacks nothing as far as we can tell.
pub fn lacks_capability(req: &RunFunctionRequest, capability: Capability) -> bool {
    has_capability(req, Capability::Capabilities) && !has_capability(req, capability)
}
