//! What provider-upjet-nebius reports of a Ready resource, for `render --until-ready`.
//!
//! Nebius IDs are `<service><kind>-<region code><suffix>`; the simulated ones keep that shape with `sim` in
//! place of a region code (no region is so named), so they are visibly not Nebius's, and derive the suffix from
//! the object's namespace and name, so the same composition always observes the same IDs.

use serde_json::{Value, json};

use super::digest;

/// `status.atProvider` of a Ready `kind`: its ID, and the fields it echoes that a later stage may read.
pub fn observation(kind: &str, composed: &Value, _observed: &mut Value) -> Value {
    let params = &composed["spec"]["forProvider"];
    let prefix = match kind {
        "Network" => "vpcnetwork",
        "Subnet" => "vpcsubnet",
        "Cluster" => "mk8scluster",
        "NodeGroup" => "mk8snodegroup",
        "Filesystem" => "computefilesystem",
        "GpuCluster" => "computegpucluster",
        _ => return json!({}),
    };
    let mut observation = json!({"id": id(prefix, composed), "name": params["name"]});
    match kind {
        "Subnet" => observation["networkId"] = params["networkId"].clone(),
        "Cluster" => {
            observation["controlPlane"] = params["controlPlane"].clone();
            observation["status"] = json!({"state": "RUNNING"});
        }
        "NodeGroup" => {
            observation["parentId"] = params["parentId"].clone();
            observation["status"] = json!({"state": "RUNNING"});
        }
        "GpuCluster" => observation["infinibandFabric"] = params["infinibandFabric"].clone(),
        _ => {}
    }
    observation
}

fn id(prefix: &str, composed: &Value) -> String {
    let seed = format!(
        "{prefix}/{}/{}",
        composed["metadata"]["namespace"].as_str().unwrap_or_default(),
        composed["metadata"]["name"].as_str().unwrap_or_default()
    );
    format!("{prefix}-sim{}", digest(&seed, 17))
}
