//! Validates an `InferenceClass` and reports what it offers. Composes nothing: a class is read by the
//! InferenceCluster and ModelDeployment composers as a required resource.
//!
//! Validation here catches what the XRD schema cannot express and what would otherwise only fail later, inside
//! the scheduler's CEL evaluation: device attribute names that are not CEL identifiers, duplicate device names,
//! attributes with zero or several typed values.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{ComposeError, Output};
use crate::{
    api::{
        Composite,
        inference_class::{Attribute, Claim, Device, EksProvisioning, InferenceClassSpec},
    },
    proto::v1::{RunFunctionRequest, Status},
    wire::RawStruct,
};

pub fn compose(_req: &RunFunctionRequest, xr: &RawStruct) -> Result<Output, ComposeError> {
    let class: Composite<InferenceClassSpec> = xr.parse()?;
    validate(&class.spec)?;
    let mut out = Output::default();
    out.status.insert(
        "devices".into(),
        Value::Array(class.spec.devices.iter().map(summary).collect()),
    );
    out.condition("Valid", Status::ConditionTrue, "ValidClass", "");
    out.ready = Some(true);
    Ok(out)
}

fn summary(device: &Device) -> Value {
    json!({"name": device.name, "count": device.count, "claim": device.claim})
}

/// Checks what the scheduler relies on.
pub fn validate(spec: &InferenceClassSpec) -> Result<(), ComposeError> {
    if spec.devices.is_empty() {
        return Err(ComposeError::new(
            "spec.devices",
            "a class must describe at least one device",
        ));
    }
    let mut names = BTreeSet::new();
    for (i, device) in spec.devices.iter().enumerate() {
        let path = format!("spec.devices[{i}]");
        if !is_dns_label(&device.name) {
            return Err(ComposeError::new(
                format!("{path}.name"),
                format!("{:?} is not a DNS label", device.name),
            ));
        }
        if !names.insert(device.name.as_str()) {
            return Err(ComposeError::new(
                format!("{path}.name"),
                format!("duplicate device name {:?}", device.name),
            ));
        }
        if device.count == 0 {
            return Err(ComposeError::new(format!("{path}.count"), "must be at least 1"));
        }
        if device.claim == Claim::Dra && (device.driver.is_empty() || device.device_class_name.is_empty()) {
            return Err(ComposeError::new(
                path,
                "a DRA device needs driver and deviceClassName (the DeviceClass its claims use)",
            ));
        }
        for (name, attribute) in &device.attributes {
            validate_attribute(&format!("{path}.attributes.{name}"), name, attribute)?;
        }
        for (name, capacity) in &device.capacity {
            let at = format!("{path}.capacity.{name}");
            if !is_cel_identifier(name) {
                return Err(ComposeError::new(
                    at,
                    "capacity names must be C identifiers of at most 32 characters",
                ));
            }
            if !is_quantity(&capacity.value) {
                return Err(ComposeError::new(
                    format!("{at}.value"),
                    format!("{:?} is not a Kubernetes quantity", capacity.value),
                ));
            }
        }
    }
    validate_eks(spec.provisioning.eks.as_ref())
}

/// Smallest root volume EKS accepts for a managed node group.
const MIN_DISK_GIB: u32 = 20;

/// EFA-capable EC2 instance types Modelplane provisions GPU pools on, with the most EFA interfaces each takes
/// (EC2's "Elastic Fabric Adapter for AI/ML and HPC workloads" tables). An EFA pool on any other type is refused:
/// the node group would launch, but without a fabric the gang's collectives fall back to TCP.
const EFA_INSTANCE_TYPES: &[(&str, u32)] = &[
    ("g5.8xlarge", 1),
    ("g5.12xlarge", 1),
    ("g5.16xlarge", 1),
    ("g5.24xlarge", 1),
    ("g5.48xlarge", 1),
    ("g6.8xlarge", 1),
    ("g6.12xlarge", 1),
    ("g6.16xlarge", 1),
    ("g6.24xlarge", 1),
    ("g6.48xlarge", 1),
    ("g6e.8xlarge", 1),
    ("g6e.12xlarge", 1),
    ("g6e.16xlarge", 1),
    ("g6e.24xlarge", 2),
    ("g6e.48xlarge", 4),
    ("p4d.24xlarge", 4),
    ("p4de.24xlarge", 4),
    ("p5.48xlarge", 32),
    ("p5e.48xlarge", 32),
    ("p5en.48xlarge", 16),
    ("p6-b200.48xlarge", 8),
    ("trn1.32xlarge", 8),
    ("trn1n.32xlarge", 16),
    ("trn2.48xlarge", 16),
];

/// EFA interfaces a node of `instance_type` takes at most; `None` when the type has no EFA.
pub fn max_efa_interfaces(instance_type: &str) -> Option<u32> {
    EFA_INSTANCE_TYPES
        .iter()
        .find(|(t, _)| *t == instance_type)
        .map(|(_, n)| *n)
}

/// EFA interfaces each node of an EFA pool of this class gets: the class's own number, else the type's maximum.
pub fn efa_interfaces(eks: &EksProvisioning) -> Option<u32> {
    eks.efa_interfaces
        .filter(|n| *n > 0)
        .or_else(|| max_efa_interfaces(&eks.instance_type))
}

fn validate_eks(eks: Option<&EksProvisioning>) -> Result<(), ComposeError> {
    let Some(eks) = eks else { return Ok(()) };
    if eks.instance_type.trim().is_empty() {
        return Err(ComposeError::new(
            "spec.provisioning.eks.instanceType",
            "must name an EC2 instance type such as p5en.48xlarge",
        ));
    }
    if let Some(wanted) = eks.efa_interfaces.filter(|n| *n > 0) {
        match max_efa_interfaces(&eks.instance_type) {
            None => {
                return Err(ComposeError::new(
                    "spec.provisioning.eks.efaInterfaces",
                    format!("{} has no EFA interfaces", eks.instance_type),
                ));
            }
            Some(max) if wanted > max => {
                return Err(ComposeError::new(
                    "spec.provisioning.eks.efaInterfaces",
                    format!("{} takes at most {max} EFA interfaces", eks.instance_type),
                ));
            }
            Some(_) => {}
        }
    }
    if eks.disk_size_gb < MIN_DISK_GIB {
        return Err(ComposeError::new(
            "spec.provisioning.eks.diskSizeGb",
            format!("EKS node groups need at least {MIN_DISK_GIB} GB"),
        ));
    }
    Ok(())
}

fn validate_attribute(path: &str, name: &str, attribute: &Attribute) -> Result<(), ComposeError> {
    if !is_cel_identifier(name) {
        // DRA publishes attributes under the driver's domain; CEL reaches them as
        // device.attributes["<driver>"].<name>, so the name must be an identifier.
        return Err(ComposeError::new(
            path,
            "attribute names must be C identifiers of at most 32 characters",
        ));
    }
    let set = [
        attribute.string.is_some(),
        attribute.version.is_some(),
        attribute.bool.is_some(),
        attribute.int.is_some(),
    ]
    .iter()
    .filter(|set| **set)
    .count();
    if set != 1 {
        return Err(ComposeError::new(
            path,
            "set exactly one of string, version, bool or int",
        ));
    }
    if let Some(version) = &attribute.version
        && !is_semver(version)
    {
        return Err(ComposeError::new(
            format!("{path}.version"),
            format!("{version:?} is not a semantic version (MAJOR.MINOR.PATCH)"),
        ));
    }
    Ok(())
}

pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_cel_identifier(s: &str) -> bool {
    let mut bytes = s.bytes();
    s.len() <= 32
        && bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn is_semver(s: &str) -> bool {
    let core = s.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Accepts the forms Kubernetes quantities take: a decimal number with an optional binary (Ki..Ei), decimal
/// (m, k, M..E) or exponent suffix.
pub fn is_quantity(s: &str) -> bool {
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    let digits = number.trim_start_matches(['+', '-']);
    let valid_number = !digits.is_empty()
        && digits.matches('.').count() <= 1
        && digits.bytes().any(|b| b.is_ascii_digit())
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let valid_suffix = matches!(
        suffix,
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "m" | "k" | "M" | "G" | "T" | "P" | "E"
    ) || (suffix.starts_with(['e', 'E'])
        && suffix[1..]
            .trim_start_matches(['+', '-'])
            .bytes()
            .all(|b| b.is_ascii_digit())
        && suffix.len() > 1);
    valid_number && valid_suffix
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(devices: Value) -> RawStruct {
        RawStruct::from_value(&json!({
            "apiVersion": "modelplane.ai/v1alpha1", "kind": "InferenceClass",
            "metadata": {"name": "eks-h200-8x"},
            "spec": {"devices": devices}
        }))
        .unwrap()
    }

    fn gpu() -> Value {
        json!({"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 8,
               "attributes": {"architecture": {"string": "Hopper"}, "cudaComputeCapability": {"version": "9.0.0"}},
               "capacity": {"memory": {"value": "141Gi"}}})
    }

    fn compose_class(devices: Value) -> Result<Output, ComposeError> {
        compose(&RunFunctionRequest::default(), &class(devices))
    }

    #[test]
    fn valid_class_reports_its_devices_and_is_ready() {
        let out = compose_class(json!([gpu()])).unwrap();
        assert_eq!(
            out.status["devices"],
            json!([{"name": "gpu", "count": 8, "claim": "DRA"}])
        );
        assert_eq!(out.ready, Some(true));
        assert!(out.resources.is_empty());
    }

    #[test]
    fn duplicate_device_names_are_rejected_at_the_second_one() {
        let err = compose_class(json!([gpu(), gpu()])).unwrap_err();
        assert_eq!(err.path, "spec.devices[1].name");
    }

    #[test]
    fn attribute_names_must_be_cel_identifiers() {
        let mut bad = gpu();
        bad["attributes"] = json!({"compute-capability": {"version": "9.0.0"}});
        let err = compose_class(json!([bad])).unwrap_err();
        assert_eq!(err.path, "spec.devices[0].attributes.compute-capability");
    }

    #[test]
    fn attributes_need_exactly_one_typed_value() {
        let mut bad = gpu();
        bad["attributes"] = json!({"arch": {"string": "Hopper", "int": 9}});
        assert!(
            compose_class(json!([bad]))
                .unwrap_err()
                .reason
                .contains("exactly one")
        );
    }

    #[test]
    fn unknown_attribute_types_name_the_field() {
        let mut bad = gpu();
        bad["attributes"] = json!({"arch": {"text": "Hopper"}});
        let err = compose_class(json!([bad])).unwrap_err();
        assert_eq!(err.path, "spec.devices[0].attributes.arch.text");
    }

    #[test]
    fn capacities_must_be_quantities() {
        let mut bad = gpu();
        bad["capacity"] = json!({"memory": {"value": "lots"}});
        assert_eq!(
            compose_class(json!([bad])).unwrap_err().path,
            "spec.devices[0].capacity.memory.value"
        );
    }

    #[test]
    fn eks_provisioning_needs_an_instance_type_and_a_possible_efa_count() {
        let with = |eks: Value| {
            let mut xr = class(json!([gpu()])).to_json().unwrap();
            xr["spec"]["provisioning"] = json!({"eks": eks});
            compose(
                &RunFunctionRequest::default(),
                &RawStruct::from_value(&xr).unwrap(),
            )
        };
        assert!(with(json!({"instanceType": "p5.48xlarge", "efaInterfaces": 32})).is_ok());
        let cases = [
            (json!({"instanceType": ""}), "spec.provisioning.eks.instanceType"),
            (
                json!({"instanceType": "p5.48xlarge", "efaInterfaces": 33}),
                "spec.provisioning.eks.efaInterfaces",
            ),
            (
                json!({"instanceType": "g6.xlarge", "efaInterfaces": 1}),
                "spec.provisioning.eks.efaInterfaces",
            ),
            (
                json!({"instanceType": "g6.xlarge", "diskSizeGb": 8}),
                "spec.provisioning.eks.diskSizeGb",
            ),
            (
                json!({"instanceType": "p5en.48xlarge", "efaInterfaces": 32}),
                "spec.provisioning.eks.efaInterfaces",
            ),
        ];
        for (eks, path) in cases {
            assert_eq!(with(eks).unwrap_err().path, path);
        }
    }

    #[test]
    fn quantity_forms() {
        for ok in ["141Gi", "1", "0.5", "100m", "1e3", "2E+2", "8k"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "Gi", "1.2.3", "12GB", "1e", "lots"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }
}
