//! What provider-upjet-azure reports of a Ready resource, for `render --until-ready`: the Azure resource IDs the
//! AKS composer reads (`status.atProvider.id`, an identity's `principalId`) and the external name the provider
//! sets on every MR. IDs are under subscription `00000000-0000-0000-0000-000000000000`, which no Azure account
//! has; GUIDs are derived from the object, so the same composition always observes the same ones.

use serde_json::{Value, json};

use super::digest;
use crate::compose::crossplane::EXTERNAL_NAME;

/// The subscription every simulated ID is in: the nil GUID, visibly not a real one.
pub const SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";

/// `status.atProvider` of a Ready `kind`; metadata the provider sets (an external name) goes on `observed`.
pub fn observation(kind: &str, composed: &Value, observed: &mut Value) -> Value {
    let params = &composed["spec"]["forProvider"];
    let name = external_name(composed);
    if let Some(metadata) = observed.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(EXTERNAL_NAME.into(), json!(name));
        }
    }
    let text = |field: &str| params[field].as_str().unwrap_or_default().to_owned();
    let group = |group: &str| format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/{group}");
    let in_group = |provider: &str| {
        format!(
            "{}/providers/{provider}/{name}",
            group(&text("resourceGroupName"))
        )
    };
    match kind {
        "ResourceGroup" => json!({"id": group(&name), "location": params["location"]}),
        "VirtualNetwork" => json!({
            "id": in_group("Microsoft.Network/virtualNetworks"),
            "guid": super::stable_uid(&name),
            "resourceGroupName": params["resourceGroupName"],
            "addressSpace": params["addressSpace"],
        }),
        "Subnet" => json!({
            "id": format!(
                "{}/providers/Microsoft.Network/virtualNetworks/{}/subnets/{name}",
                group(&text("resourceGroupName")),
                text("virtualNetworkName")
            ),
            "addressPrefixes": params["addressPrefixes"],
        }),
        "UserAssignedIdentity" => json!({
            "id": in_group("Microsoft.ManagedIdentity/userAssignedIdentities"),
            "principalId": super::stable_uid(&format!("principal/{name}")),
            "clientId": super::stable_uid(&format!("client/{name}")),
            "tenantId": SUBSCRIPTION,
        }),
        "RoleAssignment" => json!({
            "id": format!(
                "{}/providers/Microsoft.Authorization/roleAssignments/{}",
                text("scope"),
                super::stable_uid(&name)
            ),
            "principalId": params["principalId"],
            "scope": params["scope"],
        }),
        "KubernetesCluster" => json!({
            "id": in_group("Microsoft.ContainerService/managedClusters"),
            "fqdn": format!(
                "{}-{}.hcp.{}.azmk8s.io",
                text("dnsPrefix"),
                digest(&name, 8),
                text("location")
            ),
            "currentKubernetesVersion": params["kubernetesVersion"],
            "nodeResourceGroup": params["nodeResourceGroup"],
        }),
        "KubernetesClusterNodePool" => json!({
            "id": format!("{}/agentPools/{name}", text("kubernetesClusterId")),
            "vmSize": params["vmSize"],
        }),
        _ => json!({}),
    }
}

/// The name in Azure: the external-name annotation where the MR sets one, else its own name (what the provider
/// defaults it to).
fn external_name(composed: &Value) -> String {
    let metadata = &composed["metadata"];
    metadata["annotations"][EXTERNAL_NAME]
        .as_str()
        .or_else(|| metadata["name"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observe(api_version: &str, kind: &str, name: &str, for_provider: Value) -> Value {
        let composed = json!({"apiVersion": api_version, "kind": kind,
                              "metadata": {"name": name, "namespace": "modelplane-system",
                                           "annotations": {"crossplane.io/composition-resource-name": name}},
                              "spec": {"forProvider": for_provider}});
        super::super::observe(&composed)
    }

    #[test]
    fn azure_resources_report_ids_in_a_fake_subscription_and_their_external_name() {
        let group = observe(
            "azure.m.upbound.io/v1beta1",
            "ResourceGroup",
            "west",
            json!({"location": "westeurope"}),
        );
        assert_eq!(group["metadata"]["annotations"][EXTERNAL_NAME], "west");
        assert_eq!(
            group["status"]["atProvider"]["id"],
            format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/west")
        );
        let subnet = observe(
            "network.azure.m.upbound.io/v1beta1",
            "Subnet",
            "west-nodes",
            json!({"resourceGroupName": "west", "virtualNetworkName": "west"}),
        );
        assert!(subnet["status"]["atProvider"]["id"].as_str().unwrap().ends_with(
            "/resourceGroups/west/providers/Microsoft.Network/virtualNetworks/west/subnets/west-nodes"
        ));
        let identity = observe(
            "managedidentity.azure.m.upbound.io/v1beta1",
            "UserAssignedIdentity",
            "west-control-plane",
            json!({"resourceGroupName": "west"}),
        );
        let principal = identity["status"]["atProvider"]["principalId"].as_str().unwrap();
        assert_eq!(principal.len(), 36);
        assert_eq!(
            principal,
            super::super::stable_uid("principal/west-control-plane")
        );
    }

    #[test]
    fn a_node_pool_is_named_in_azure_by_its_external_name_under_its_cluster() {
        let composed = json!({"apiVersion": "containerservice.azure.m.upbound.io/v1beta1",
                              "kind": "KubernetesClusterNodePool",
                              "metadata": {"name": "west-gpua10", "annotations": {EXTERNAL_NAME: "gpua10"}},
                              "spec": {"forProvider": {"kubernetesClusterId": "/c"}}});
        let observed = super::super::observe(&composed);
        assert_eq!(observed["status"]["atProvider"]["id"], "/c/agentPools/gpua10");
        assert_eq!(observed["metadata"]["annotations"][EXTERNAL_NAME], "gpua10");
    }
}
