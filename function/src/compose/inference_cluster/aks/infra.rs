//! The Azure side of a stock cluster besides its user pools: the resource group, the network and subnet, the
//! control plane's identity and its role on the subnet, the AKS cluster, and the StorageClass that puts Azure
//! Files to use.
//!
//! Every stage function takes what it is built from as found in the stage before (`None` while that is not
//! observed Ready), falls back to what the resource was last composed with once it exists, and composes only
//! when every input is known.

use crate::wire::tree::{Fields, tree};

use super::{
    AZURE_FILES_STORAGE_CLASS, Context, KEY_CLUSTER, KEY_IDENTITY, KEY_NETWORK, KEY_RESOURCE_GROUP,
    KEY_SUBNET, KEY_SUBNET_ROLE, external_name, node_pools, tags,
};
use crate::compose::{Output, inference_cluster::provision};

pub const RESOURCE_GROUP_API: &str = "azure.m.upbound.io/v1beta1";
pub const NETWORK_API: &str = "network.azure.m.upbound.io/v1beta1";
pub const IDENTITY_API: &str = "managedidentity.azure.m.upbound.io/v1beta1";
pub const AUTHORIZATION_API: &str = "authorization.azure.m.upbound.io/v1beta1";
pub const CONTAINER_SERVICE_API: &str = "containerservice.azure.m.upbound.io/v1beta1";

/// The virtual network and its one node subnet (upstream Modelplane's defaults). Azure subnets span every zone
/// of a region, so one subnet serves every pool; a /20 holds 4091 nodes, since pods take overlay addresses.
pub const VNET_CIDR: &str = "10.0.0.0/16";
pub const SUBNET_CIDR: &str = "10.0.0.0/20";

/// Azure CNI in overlay mode: nodes take subnet addresses, pods and services take ranges outside the network.
/// Pinned so neither overlaps [`VNET_CIDR`] (AKS's own service default, 10.0.0.0/16, would).
const NETWORK_PLUGIN: &str = "azure";
const NETWORK_PLUGIN_MODE: &str = "overlay";
const POD_CIDR: &str = "10.244.0.0/16";
const SERVICE_CIDR: &str = "10.96.0.0/16";
/// The cluster DNS service's address: inside [`SERVICE_CIDR`], by AKS's convention its tenth address.
const DNS_SERVICE_IP: &str = "10.96.0.10";

/// What AKS needs of the subnet it puts nodes and internal load balancers in, granted to the control plane's
/// identity: read the subnet and join NICs to it. Network Contributor is the built-in role that holds both.
const SUBNET_ROLE: &str = "Network Contributor";

/// The Azure Files share class (upstream Modelplane's parameters): Premium (SSD) file shares, so a cache of
/// hundreds of GB loads at disk speed; Premium shares are at least 100 GiB, which every model cache exceeds.
const AZURE_FILES_SKU: &str = "Premium_LRS";
/// SMB mount options: files readable by every engine's user, `mfsymlinks` to emulate the symlinks Hugging Face
/// caches are made of (SMB has none), strict caching with a 30 s attribute cache, and a connection per mount
/// so one cache's traffic does not queue behind another's.
const AZURE_FILES_MOUNT_OPTIONS: &[&str] = &[
    "dir_mode=0777",
    "file_mode=0777",
    "uid=0",
    "gid=0",
    "mfsymlinks",
    "cache=strict",
    "actimeo=30",
    "nosharesock",
];

/// The control plane's identity, once Azure has made it.
pub struct Identity {
    /// Its resource ID, which the cluster runs as.
    pub id: Option<String>,
    /// Its service principal, which roles are granted to.
    pub principal_id: Option<String>,
}

/// The resource group every Azure resource of the cluster lives in, named after the cluster; its name once it
/// is Ready (or as the resources in it carry it).
pub fn resource_group(out: &mut Output, ctx: &Context) -> Option<String> {
    let mr = ctx.managed(
        RESOURCE_GROUP_API,
        "ResourceGroup",
        ctx.name,
        tree!({"location": &ctx.cluster.location, "tags": tags(ctx.name)}),
    );
    out.compose(KEY_RESOURCE_GROUP, mr.build(), false);
    external_name(ctx, KEY_RESOURCE_GROUP).or_else(|| {
        [KEY_CLUSTER, KEY_NETWORK, KEY_IDENTITY, KEY_SUBNET]
            .iter()
            .find_map(|key| ctx.spec_string(key, "/spec/forProvider/resourceGroupName"))
    })
}

/// The virtual network in `group`; its name once it is Ready (or as the subnet carries it).
pub fn network(out: &mut Output, ctx: &Context, group: Option<&str>) -> Option<String> {
    let group = group
        .map(str::to_owned)
        .or_else(|| ctx.spec_string(KEY_NETWORK, "/spec/forProvider/resourceGroupName"))?;
    let mr = ctx.managed(
        NETWORK_API,
        "VirtualNetwork",
        ctx.name,
        tree!({
            "location": &ctx.cluster.location,
            "resourceGroupName": group,
            "addressSpace": [VNET_CIDR],
            "tags": tags(ctx.name),
        }),
    );
    out.compose(KEY_NETWORK, mr.build(), false);
    external_name(ctx, KEY_NETWORK)
        .or_else(|| ctx.spec_string(KEY_SUBNET, "/spec/forProvider/virtualNetworkName"))
}

/// The node subnet of `network`; its ID once it is Ready, or as the cluster carries it (even while the subnet
/// itself cannot be composed, so the cluster never loses it).
pub fn subnet(out: &mut Output, ctx: &Context, group: Option<&str>, network: Option<&str>) -> Option<String> {
    let group = group
        .map(str::to_owned)
        .or_else(|| ctx.spec_string(KEY_SUBNET, "/spec/forProvider/resourceGroupName"));
    let network = network
        .map(str::to_owned)
        .or_else(|| ctx.spec_string(KEY_SUBNET, "/spec/forProvider/virtualNetworkName"));
    if let (Some(group), Some(network)) = (group, network) {
        let mr = ctx.managed(
            NETWORK_API,
            "Subnet",
            &format!("{}-nodes", ctx.name),
            tree!({
                "resourceGroupName": group,
                "virtualNetworkName": network,
                "addressPrefixes": [SUBNET_CIDR],
            }),
        );
        out.compose(KEY_SUBNET, mr.build(), false);
    }
    ctx.ready_string(KEY_SUBNET, "/status/atProvider/id")
        .or_else(|| ctx.spec_string(KEY_CLUSTER, "/spec/forProvider/defaultNodePool/vnetSubnetId"))
}

/// The identity the control plane runs as, made before the cluster so its role on the subnet can be granted
/// before AKS first needs it (a system-assigned identity exists only once the cluster does).
pub fn identity(out: &mut Output, ctx: &Context, group: Option<&str>) -> Identity {
    let group = group
        .map(str::to_owned)
        .or_else(|| ctx.spec_string(KEY_IDENTITY, "/spec/forProvider/resourceGroupName"));
    if let Some(group) = group {
        let name = format!("{}-control-plane", ctx.name);
        let mr = ctx.managed(
            IDENTITY_API,
            "UserAssignedIdentity",
            &name,
            tree!({
                "name": &name,
                "location": &ctx.cluster.location,
                "resourceGroupName": group,
                "tags": tags(ctx.name),
            }),
        );
        out.compose(KEY_IDENTITY, mr.build(), false);
    }
    Identity {
        id: ctx
            .ready_string(KEY_IDENTITY, "/status/atProvider/id")
            .or_else(|| ctx.spec_string(KEY_CLUSTER, "/spec/forProvider/identity/identityIds/0")),
        principal_id: ctx
            .ready_string(KEY_IDENTITY, "/status/atProvider/principalId")
            .or_else(|| ctx.spec_string(KEY_SUBNET_ROLE, "/spec/forProvider/principalId")),
    }
}

/// Network Contributor on `subnet` for the identity `principal`; whether the grant is Ready.
pub fn subnet_role(out: &mut Output, ctx: &Context, subnet: Option<&str>, principal: Option<&str>) -> bool {
    let subnet = subnet
        .map(str::to_owned)
        .or_else(|| ctx.spec_string(KEY_SUBNET_ROLE, "/spec/forProvider/scope"));
    let principal = principal
        .map(str::to_owned)
        .or_else(|| ctx.spec_string(KEY_SUBNET_ROLE, "/spec/forProvider/principalId"));
    let (Some(subnet), Some(principal)) = (subnet, principal) else {
        return false;
    };
    let mr = ctx.managed(
        AUTHORIZATION_API,
        "RoleAssignment",
        &format!("{}-subnet", ctx.name),
        tree!({
            "scope": subnet,
            "principalId": principal,
            "roleDefinitionName": SUBNET_ROLE,
            // A managed identity's service principal is new to Entra ID when the grant is made; skipping the
            // directory lookup avoids failing on replication lag.
            "principalType": "ServicePrincipal",
            "skipServicePrincipalAadCheck": true,
        }),
    );
    out.compose(KEY_SUBNET_ROLE, mr.build(), false);
    ctx.seen.ready(KEY_SUBNET_ROLE)
}

/// The AKS control plane in `group`, running as `identity`, with the system pool on `subnet` as its default pool;
/// it writes its kubeconfig for the provider configs. Whether it was composed (every input known).
pub fn cluster(
    out: &mut Output,
    ctx: &Context,
    group: Option<&str>,
    subnet: Option<&str>,
    identity: Option<&str>,
) -> bool {
    let (Some(group), Some(subnet), Some(identity)) = (group, subnet, identity) else {
        return false;
    };
    let mr = ctx.cluster_managed(
        CONTAINER_SERVICE_API,
        "KubernetesCluster",
        tree!({
            "location": &ctx.cluster.location,
            "resourceGroupName": group,
            "kubernetesVersion": &ctx.cluster.kubernetes_version,
            "dnsPrefix": ctx.name,
            // Where AKS puts the nodes' scale sets, disks and load balancers. Named, since its default
            // MC_<group>_<cluster>_<location> outgrows Azure's 80-character limit for long cluster names.
            "nodeResourceGroup": format!("{}-nodes", ctx.name),
            "identity": {"type": "UserAssigned", "identityIds": [identity]},
            "defaultNodePool": node_pools::system_pool(subnet),
            "networkProfile": {
                "networkPlugin": NETWORK_PLUGIN,
                "networkPluginMode": NETWORK_PLUGIN_MODE,
                "podCidr": POD_CIDR,
                "serviceCidr": SERVICE_CIDR,
                "dnsServiceIp": DNS_SERVICE_IP,
            },
            // The kubeconfig in the connection secret authenticates with the local account's client
            // certificate; with local accounts off it would need Entra ID, which provider-kubernetes would then
            // have to be given.
            "localAccountDisabled": false,
            "roleBasedAccessControlEnabled": true,
            // The Azure Files CSI driver the cache StorageClass names (on by default; stated, since the cache
            // depends on it).
            "storageProfile": {"fileDriverEnabled": true},
            "tags": tags(ctx.name),
        }),
    );
    let mr = mr
        // The system pool's node count belongs to AKS's autoscaler, as a user pool's does.
        .management_policies(tree!(node_pools::MANAGEMENT_POLICIES));
    out.compose(KEY_CLUSTER, mr.build(), false);
    true
}

/// The StorageClass ModelCaches stage on: an Azure Files share per volume, in a storage account the CSI driver
/// creates in the node resource group on first use (as the cluster's identity, which AKS lets manage that
/// group).
pub fn storage_class(cluster: &str) -> Fields {
    let manifest = tree!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": AZURE_FILES_STORAGE_CLASS},
        "provisioner": "file.csi.azure.com",
        "parameters": {"skuName": AZURE_FILES_SKU},
        "mountOptions": AZURE_FILES_MOUNT_OPTIONS,
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": true,
        // A share is regional: any node of any zone mounts it, so there is no zone to wait for a pod to pick.
        "volumeBindingMode": "Immediate",
    });
    provision::storage_class_object(cluster, "storageclass-azurefile", manifest)
}
