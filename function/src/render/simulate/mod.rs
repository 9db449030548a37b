//! What a control plane would observe of a composed resource once its provider has made it Ready, invented for
//! `render --until-ready`: Crossplane's name and UID, `Ready` and `Synced`, and the provider status the
//! function's later stages read (IDs and ARNs from provider-eks, the remote object from provider-kubernetes).
//!
//! Chosen by the composed object's apiVersion and kind, never by its composition key, so it simulates a
//! provider and not this function's expectations. Every value is derived from the object itself, so the same
//! composition always observes the same IDs, and every ID is visibly not AWS's: account `123456789012` (the
//! account AWS's own documentation uses), addresses from TEST-NET-3 (`203.0.113.0/24`).

use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use super::composition_key;
use crate::{
    compose::remote::OBJECT_API_VERSION,
    workload::cluster_gateway::{client_tls, tls},
};

/// The account every simulated ARN is in.
pub const ACCOUNT: &str = "123456789012";

/// The CA the simulated cluster gateway publishes: a real certificate (the function checks it parses as a trust
/// anchor) whose private key was never kept, so nothing can be served under it.
pub const SIMULATED_CA: &str = include_str!("../../../../tests/fixtures/tls/cluster-gateway-ca.pem");
/// The fleet gateway's client CA as trust-manager would publish it (a fixed test certificate, as above).
pub const SIMULATED_CLIENT_CA: &str = include_str!("../../../../tests/fixtures/tls/fleet-client-ca.pem");

const PROVIDER_EKS_GROUP: &str = "eks.m.modelplane.ai";
const PROVIDER_KUBERNETES_FINALIZER: &str = "finalizer.managedresource.crossplane.io";
/// What provider-kubernetes, run with `--sanitize-secrets` as Modelplane's install runs it, reports in place of a
/// remote Secret's data.
const SANITIZED_SECRET_DATA: &str = "redacted";
/// The upjet providers' namespaced groups end so (`container.gcp.m.upbound.io`, ...).
const UPJET_GROUP_SUFFIX: &str = ".m.upbound.io";

/// `composed` (a desired composed resource with the metadata Crossplane adds) as it would be observed once
/// Ready.
pub fn observe(composed: &Value) -> Value {
    let mut observed = composed.clone();
    name_as_crossplane_does(&mut observed, composition_key(composed).unwrap_or_default());
    let api_version = composed["apiVersion"].as_str().unwrap_or_default();
    let kind = composed["kind"].as_str().unwrap_or_default();
    let mut status = match (api_version.split_once('/').map(|(group, _)| group), kind) {
        (Some(PROVIDER_EKS_GROUP), kind) => json!({"atProvider": eks_observation(kind, composed)}),
        (Some(group), kind) if group.ends_with(UPJET_GROUP_SUFFIX) => {
            json!({"atProvider": upjet_observation(group, kind, composed, &mut observed)})
        }
        _ if api_version == OBJECT_API_VERSION && kind == "Object" => {
            // provider-kubernetes puts its finalizer on every Object it manages.
            observed["metadata"]["finalizers"] = json!([PROVIDER_KUBERNETES_FINALIZER]);
            json!({"atProvider": {"manifest": remote_object(composed)}})
        }
        _ => composed.get("status").cloned().unwrap_or_else(|| json!({})),
    };
    status["conditions"] = json!([
        {"type": "Ready", "status": "True", "reason": "Available"},
        {"type": "Synced", "status": "True", "reason": "ReconcileSuccess"},
    ]);
    observed["status"] = status;
    observed
}

/// A short, stable hex digest of `seed` (FNV-1a), for IDs that must differ between objects and never between
/// runs.
pub(super) fn digest(seed: &str, digits: usize) -> String {
    let hash = seed.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}").chars().take(digits).collect()
}

/// Crossplane names a composed resource from its `generateName` and gives it a UID.
fn name_as_crossplane_does(object: &mut Value, key: &str) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if !metadata.contains_key("name") {
        let prefix = metadata
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = format!("{prefix}{}", digest(key, 5));
        metadata.insert("name".into(), json!(name));
    }
    let identity = format!(
        "{}/{}",
        metadata
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        metadata.get("name").and_then(Value::as_str).unwrap_or_default()
    );
    metadata.insert("uid".into(), json!(stable_uid(&identity)));
}

/// A UUID-shaped identifier stable for `seed`: what the API server or a cloud would have assigned.
pub(super) fn stable_uid(seed: &str) -> String {
    let hex = format!("{}{}", digest(seed, 16), digest(&format!("{seed}/"), 16));
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// What provider-eks reports under `status.atProvider` for a Ready resource of `kind`.
fn eks_observation(kind: &str, composed: &Value) -> Value {
    let params = &composed["spec"]["forProvider"];
    let name = composed["metadata"]["name"].as_str().unwrap_or_default();
    let region = params["region"].as_str().unwrap_or("us-east-1");
    let id = |prefix: &str| aws_id(prefix, name);
    let arn = |service: &str, resource: &str| format!("arn:aws:{service}:{region}:{ACCOUNT}:{resource}");
    match kind {
        "Network" => {
            let Some(network) = parse::<modelplane_eks_api::NetworkParameters>(params) else {
                return json!({});
            };
            encode(&network_observation(&network, name))
        }
        "Role" => encode(&modelplane_eks_api::RoleObservation {
            arn: Some(format!("arn:aws:iam::{ACCOUNT}:role/{name}")),
            role_id: Some(format!("AROA{}", digest(name, 16).to_uppercase())),
            attached_policy_arns: parse(&params["policyArns"]).unwrap_or_default(),
        }),
        "Cluster" => encode(&modelplane_eks_api::ClusterObservation {
            arn: Some(arn("eks", &format!("cluster/{name}"))),
            status: Some("ACTIVE".into()),
            endpoint: Some(format!(
                "https://{}.gr7.{region}.eks.amazonaws.com",
                digest(name, 16).to_uppercase()
            )),
            version: params["version"].as_str().map(str::to_owned),
            platform_version: Some("eks.1".into()),
            oidc_issuer: Some(format!(
                "https://oidc.eks.{region}.amazonaws.com/id/{}",
                digest(name, 16).to_uppercase()
            )),
            vpc_id: Some(id("vpc")),
            subnet_ids: parse(&params["networking"]["subnetIds"]).unwrap_or_default(),
        }),
        "NodePool" => encode(&modelplane_eks_api::NodePoolObservation {
            arn: Some(arn("eks", &format!("nodegroup/{name}"))),
            status: Some("ACTIVE".into()),
            cluster_name: params["clusterRef"]["name"].as_str().map(str::to_owned),
            subnet_ids: parse(&params["subnetIds"]).unwrap_or_default(),
            ..Default::default()
        }),
        "Addon" => encode(&modelplane_eks_api::AddonObservation {
            arn: Some(arn("eks", &format!("addon/{name}"))),
            status: Some("ACTIVE".into()),
            addon_version: params["addonVersion"].as_str().map(str::to_owned),
        }),
        "PodIdentityAssociation" => encode(&modelplane_eks_api::PodIdentityAssociationObservation {
            association_id: Some(id("a")),
            association_arn: Some(arn("eks", &format!("podidentityassociation/{name}"))),
        }),
        "FileSystem" => {
            let Some(file_system) = parse::<modelplane_eks_api::FileSystemParameters>(params) else {
                return json!({});
            };
            encode(&modelplane_eks_api::FileSystemObservation {
                file_system_id: Some(id("fs")),
                life_cycle_state: Some("available".into()),
                security_group_id: file_system.nfs_security_group_ids.first().cloned(),
                mount_targets: file_system
                    .subnet_ids
                    .iter()
                    .map(|subnet| modelplane_eks_api::MountTarget {
                        subnet_id: subnet.clone(),
                        mount_target_id: aws_id("fsmt", subnet),
                        life_cycle_state: "available".into(),
                    })
                    .collect(),
            })
        }
        _ => json!({}),
    }
}

/// What an upjet provider reports under `status.atProvider` for a Ready resource of `kind` in `group`; some also
/// set metadata on the object (an external name), which `observed` gets.
fn upjet_observation(group: &str, kind: &str, composed: &Value, observed: &mut Value) -> Value {
    let family = group.trim_end_matches(UPJET_GROUP_SUFFIX);
    match family.rsplit_once('.').map_or(family, |(_, cloud)| cloud) {
        "gcp" => gcp::observation(kind, composed, observed),
        "azure" => azure::observation(kind, composed, observed),
        "nebius" => nebius::observation(kind, composed, observed),
        "vultr" => vultr::observation(kind, composed, observed),
        _ => json!({}),
    }
}

/// A VPC with a public and a private /24 in each zone, carved from the network's CIDR.
fn network_observation(
    network: &modelplane_eks_api::NetworkParameters,
    name: &str,
) -> modelplane_eks_api::NetworkObservation {
    let id = |prefix: &str| aws_id(prefix, name);
    let octets: Vec<&str> = network.cidr_block.split('.').take(2).collect();
    let prefix = octets.join(".");
    let subnets = |first: usize, tier: &str| {
        network
            .zones
            .iter()
            .enumerate()
            .map(|(i, zone)| modelplane_eks_api::Subnet {
                zone: zone.clone(),
                id: aws_id("subnet", &format!("{name}/{tier}/{zone}")),
                cidr_block: format!("{prefix}.{}.0/24", first + i),
            })
            .collect()
    };
    modelplane_eks_api::NetworkObservation {
        vpc_id: Some(id("vpc")),
        cidr_block: Some(network.cidr_block.clone()),
        public_subnets: subnets(0, "public"),
        private_subnets: subnets(128, "private"),
        internet_gateway_id: Some(id("igw")),
        nat_gateway_id: Some(id("nat")),
        elastic_ip_allocation_id: Some(id("eipalloc")),
        route_table_ids: vec![
            aws_id("rtb", &format!("{name}/public")),
            aws_id("rtb", &format!("{name}/private")),
        ],
        security_group_id: Some(id("sg")),
    }
}

/// The remote object a provider-kubernetes `Object` reports once it exists: its manifest, with the UID the API
/// server gave it and the status the function reads of a few kinds.
fn remote_object(composed: &Value) -> Value {
    let mut manifest = composed["spec"]["forProvider"]["manifest"].clone();
    let identity = format!(
        "{}/{}/{}",
        manifest["kind"].as_str().unwrap_or_default(),
        manifest["metadata"]["namespace"].as_str().unwrap_or_default(),
        manifest["metadata"]["name"].as_str().unwrap_or_default()
    );
    if let Some(metadata) = manifest.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("uid".into(), json!(stable_uid(&identity)));
    }
    let kind = manifest["kind"].as_str().unwrap_or_default().to_owned();
    let name = manifest["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    match kind.as_str() {
        // trust-manager's copy of the cluster gateway's CA, which the composition only observes.
        "ConfigMap" if name == tls::PUBLISHED_CA => {
            manifest["data"] = json!({tls::CA_KEY: SIMULATED_CA});
        }
        // trust-manager's copy of the fleet gateway's client CA, likewise only observed.
        "ConfigMap" if name == client_tls::CLIENT_CA => {
            manifest["data"] = json!({tls::CA_KEY: SIMULATED_CLIENT_CA});
        }
        // Envoy Gateway's load balancer address; one per provider config, so each cluster gets its own.
        "Gateway" => {
            let cluster = composed["spec"]["providerConfigRef"]["name"]
                .as_str()
                .unwrap_or_default();
            let host = 1 + u8::from_str_radix(&digest(cluster, 2), 16).unwrap_or(0) % 254;
            manifest["status"] =
                json!({"addresses": [{"type": "IPAddress", "value": format!("203.0.113.{host}")}]});
        }
        "Job" => {
            manifest["status"] =
                json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]});
        }
        // Whatever it holds, copied by reference or not.
        "Secret" => manifest["data"] = json!({SANITIZED_SECRET_DATA: null}),
        _ => {}
    }
    manifest
}

fn parse<T: DeserializeOwned>(value: &Value) -> Option<T> {
    serde_json::from_value(value.clone()).ok()
}

/// A provider-eks observation as `status.atProvider` holds it.
fn encode(observation: &impl Serialize) -> Value {
    serde_json::to_value(observation).unwrap_or_default()
}

/// An AWS-shaped ID (`vpc-0…`, `subnet-0…`) stable for `seed`.
fn aws_id(prefix: &str, seed: &str) -> String {
    format!("{prefix}-0{}", digest(&format!("{prefix}/{seed}"), 16))
}

mod azure;
mod gcp;
mod nebius;
mod vultr;

#[cfg(test)]
mod tests;
