//! Validates an `InferenceClass` and reports what it offers. Composes nothing: a class is read by the
//! InferenceCluster and ModelDeployment composers as a required resource.
//!
//! Validation here catches what the XRD schema cannot express and what would otherwise only fail later, inside
//! the scheduler's CEL evaluation: device attribute names that are not CEL identifiers, duplicate device names,
//! attributes with zero or several typed values.

use super::{ComposeError, Output};
use crate::compose::conditions::{ConditionType, Reason};
use crate::{
    api::{
        Composite,
        inference_class::{Device, DeviceSummary, EksProvisioning, InferenceClassSpec, InferenceClassStatus},
    },
    proto::v1::{RunFunctionRequest, Status},
    wire::RawStruct,
};

pub fn compose(_req: &RunFunctionRequest, xr: &RawStruct) -> Result<Output, ComposeError> {
    let class: Composite<InferenceClassSpec> = xr.parse()?;
    validate(&class.spec)?;
    let mut out = Output::default();
    out.set_status(&InferenceClassStatus {
        devices: class.spec.devices.iter().map(summary).collect(),
    })?;
    out.condition(
        ConditionType::Valid,
        Status::ConditionTrue,
        Reason::ValidClass,
        "",
    );
    out.ready = Some(true);
    Ok(out)
}

fn summary(device: &Device) -> DeviceSummary {
    DeviceSummary {
        name: device.name.clone(),
        count: device.count,
        claim: device.claim,
    }
}

/// What the InferenceClass XRD cannot say (it is enforced before composing, `crate::validate`, and on every class
/// read as a required resource): a blank instance type, and EFA interfaces against the instance type's table.
pub fn validate(spec: &InferenceClassSpec) -> Result<(), ComposeError> {
    validate_eks(spec.provisioning.eks.as_ref())
}

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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

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

    /// Composes the class as `dispatch` does, after its XRD's check.
    fn compose_class(devices: Value) -> Result<Output, ComposeError> {
        with_class(class(devices).to_json().unwrap())
    }

    fn with_class(xr: Value) -> Result<Output, ComposeError> {
        crate::compose::fixtures::run(compose, &crate::compose::fixtures::request(xr))
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
    fn duplicate_device_names_are_rejected() {
        let err = compose_class(json!([gpu(), gpu()])).unwrap_err();
        assert_eq!(err.path, "spec.devices");
        assert!(err.reason.contains("unique"), "{err}");
    }

    #[test]
    fn attribute_names_must_be_cel_identifiers() {
        let mut bad = gpu();
        bad["attributes"] = json!({"compute-capability": {"version": "9.0.0"}});
        let err = compose_class(json!([bad])).unwrap_err();
        assert_eq!(err.path, "spec.devices[0].attributes");
        assert!(err.reason.contains("C identifiers"), "{err}");
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
        assert_eq!(err.path, "spec.devices[0].attributes.arch");
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
            with_class(xr)
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
    fn capacities_take_every_quantity_form_and_nothing_else() {
        let with_memory = |value: &str| {
            let mut device = gpu();
            device["capacity"] = json!({"memory": {"value": value}});
            compose_class(json!([device]))
        };
        for ok in ["141Gi", "1", "0.5", "100m", "1e3", "2E+2", "8k"] {
            assert!(with_memory(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Gi", "1.2.3", "12GB", "1e", "lots"] {
            let err = with_memory(bad).unwrap_err();
            assert_eq!(err.path, "spec.devices[0].capacity.memory.value", "{bad}: {err}");
        }
    }
}
