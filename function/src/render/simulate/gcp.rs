//! What provider-upjet-gcp reports of a Ready resource, for `render --until-ready`: the IDs, self links and
//! emails Google Cloud gives it, in a project that is visibly not a real one.

use serde_json::{Value, json};

use crate::compose::crossplane::EXTERNAL_NAME;

/// The project every simulated resource is in.
pub const PROJECT: &str = "modelplane-simulated";
const COMPUTE_API: &str = "https://www.googleapis.com/compute/v1";

/// `status.atProvider` of a Ready `kind`; the external name the provider records goes on `observed`.
pub fn observation(kind: &str, composed: &Value, observed: &mut Value) -> Value {
    let params = &composed["spec"]["forProvider"];
    let name = external_name(composed);
    let location = params["location"]
        .as_str()
        .or(params["region"].as_str())
        .unwrap_or("us-central1");
    let at_provider = match kind {
        "Network" => {
            let id = format!("projects/{PROJECT}/global/networks/{name}");
            json!({"id": id, "selfLink": format!("{COMPUTE_API}/{id}"), "autoCreateSubnetworks": false})
        }
        "Subnetwork" => {
            let id = format!("projects/{PROJECT}/regions/{location}/subnetworks/{name}");
            json!({"id": id, "selfLink": format!("{COMPUTE_API}/{id}"), "region": location})
        }
        "ServiceAccount" => {
            let email = format!("{name}@{PROJECT}.iam.gserviceaccount.com");
            json!({"id": format!("projects/{PROJECT}/serviceAccounts/{email}"), "email": email,
                   "member": format!("serviceAccount:{email}")})
        }
        "Cluster" => json!({
            "id": format!("projects/{PROJECT}/locations/{location}/clusters/{name}"),
            "endpoint": "203.0.113.10",
            "location": location,
        }),
        "NodePool" => {
            let cluster = params["cluster"].as_str().unwrap_or_default();
            json!({"id": format!("{cluster}/nodePools/{name}")})
        }
        "ProjectService" | "ProjectIAMMember" | "ServiceAccountKey" => {
            json!({"id": format!("{PROJECT}/{name}")})
        }
        _ => json!({}),
    };
    if let Some(metadata) = observed.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        annotations[EXTERNAL_NAME] = json!(name);
    }
    at_provider
}

/// The name the provider creates the resource under: its external-name annotation, else its own name.
fn external_name(composed: &Value) -> String {
    composed["metadata"]["annotations"][EXTERNAL_NAME]
        .as_str()
        .or(composed["metadata"]["name"].as_str())
        .unwrap_or_default()
        .to_owned()
}
