//! What provider-upjet-vultr reports of a Ready resource, for `render --until-ready`.
//!
//! Vultr IDs are UUIDs; the simulated ones start with eight zeros, which no Vultr ID does in practice, and are
//! derived from the object's name so the same composition always observes the same IDs. Addresses come from
//! TEST-NET-3 (`203.0.113.0/24`), hostnames from `example.com`.

use serde_json::{Value, json};

use super::digest;
use crate::compose::crossplane::EXTERNAL_NAME;

/// `status.atProvider` of a Ready `kind`; metadata the provider sets (an external name) goes on `observed`.
pub fn observation(kind: &str, composed: &Value, observed: &mut Value) -> Value {
    let params = &composed["spec"]["forProvider"];
    let name = composed["metadata"]["name"].as_str().unwrap_or_default();
    let id = vultr_id(&format!("{kind}/{name}"));
    let at_provider = match kind {
        "VPC" => json!({
            "id": id,
            "region": params["region"],
            "description": params["description"],
            "v4Subnet": "10.1.0.0",
            "v4SubnetMask": 20,
            "dateCreated": "2026-01-01T00:00:00+00:00",
        }),
        "Kubernetes" => {
            let host = 1 + u8::from_str_radix(&digest(name, 2), 16).unwrap_or(0) % 254;
            let mut pool = params["nodePools"].clone();
            if let Some(pool) = pool.as_object_mut() {
                pool.insert("id".into(), json!(vultr_id(&format!("{name}/system"))));
                pool.insert("status".into(), json!("active"));
                pool.insert("tag".into(), json!(""));
            }
            json!({
                "id": id,
                "label": params["label"],
                "region": params["region"],
                "version": params["version"],
                "vpcId": params["vpcId"],
                "haControlplanes": params["haControlplanes"],
                "status": "active",
                "endpoint": format!("{}.vke.example.com", &id),
                "ip": format!("203.0.113.{host}"),
                "clusterSubnet": "10.244.0.0/16",
                "serviceSubnet": "10.96.0.0/12",
                "nodePools": pool,
            })
        }
        "KubernetesNodePool" => json!({
            "id": id,
            "clusterId": params["clusterId"],
            "label": params["label"],
            "plan": params["plan"],
            "nodeQuantity": params["nodeQuantity"],
            "autoScaler": params["autoScaler"],
            "status": "active",
        }),
        _ => return json!({}),
    };
    observed["metadata"]["annotations"][EXTERNAL_NAME] = json!(id);
    at_provider
}

/// A UUID-shaped ID, stable for `seed` and visibly not Vultr's.
fn vultr_id(seed: &str) -> String {
    let hex = digest(seed, 16);
    format!(
        "00000000-{}-{}-{}-{}",
        &hex[..4],
        &hex[4..8],
        &hex[8..12],
        digest(&format!("{seed}/"), 12)
    )
}
