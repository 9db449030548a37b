//! Everything of a GKE cluster besides its node pools: the project's APIs, the VPC and subnetwork, the service
//! accounts and their roles, the cluster, and the Filestore StorageClass.
//!
//! Each input a resource needs from another is read the way provider-upjet-gcp's own references would resolve it
//! (a network's or subnetwork's `selfLink`, a service account's `id` or `email`, a cluster's `id`), from that
//! resource's observed status once Ready; a resource that exists keeps what it was composed with.

use crate::wire::tree::{Fields, tree};

use super::{
    Context, FILESTORE_STORAGE_CLASS, KEY_ADMIN_ACCOUNT, KEY_ADMIN_KEY, KEY_ADMIN_ROLE, KEY_CLUSTER,
    KEY_NETWORK, KEY_NODE_ACCOUNT, KEY_NODE_ROLE, KEY_SUBNET, admin_key_secret,
};
use crate::{
    compose::{Output, crossplane::EXTERNAL_NAME_POINTER, inference_cluster::provision},
    workload::names::child_name,
};

const COMPUTE: &str = "compute.gcp.m.upbound.io/v1beta1";
const CONTAINER: &str = "container.gcp.m.upbound.io/v1beta1";
const CLOUD_PLATFORM: &str = "cloudplatform.gcp.m.upbound.io/v1beta1";

/// The secondary ranges of the subnetwork, which the cluster's IP allocation names: pods and services get
/// VPC-native addresses.
const PODS_RANGE: &str = "pods";
const SERVICES_RANGE: &str = "services";
/// Upstream Modelplane's ranges: a /24 of nodes (~250), a /16 of pods (110 per node) and a /16 of services.
const NODE_CIDR: &str = "10.0.0.0/24";
const POD_CIDR: &str = "10.1.0.0/16";
const SERVICE_CIDR: &str = "10.2.0.0/16";

/// REGULAR gets new minors a few months after RAPID: the channel `kubernetesVersion` (a minimum) rides on.
const RELEASE_CHANNEL: &str = "REGULAR";

/// The APIs a fresh project must have on. Compute for the VPC and nodes, Kubernetes Engine for the cluster, IAM
/// for the service accounts, Filestore for the cache volumes (only the StorageClass waits for it).
const CORE_APIS: [&str; 3] = [
    "compute.googleapis.com",
    "container.googleapis.com",
    "iam.googleapis.com",
];
const FILESTORE_API: &str = "file.googleapis.com";

/// A service account the cluster needs, and the one role it is granted on the project.
pub struct Account {
    key: &'static str,
    role_key: &'static str,
    part: &'static str,
    role: &'static str,
    display: &'static str,
}

/// The nodes' own identity, with the one role GKE documents for it (logs, metrics, the node's metadata) instead
/// of the Compute Engine default account's Editor.
pub const NODES: Account = Account {
    key: KEY_NODE_ACCOUNT,
    role_key: KEY_NODE_ROLE,
    part: "nodes",
    role: "roles/container.defaultNodeServiceAccount",
    display: "Modelplane GKE nodes",
};
/// What provider-kubernetes and provider-helm reach the cluster as: installing the components needs
/// cluster-wide RBAC, which on GKE is granted through IAM.
pub const ADMIN: Account = Account {
    key: KEY_ADMIN_ACCOUNT,
    role_key: KEY_ADMIN_ROLE,
    part: "admin",
    role: "roles/container.admin",
    display: "Modelplane GKE admin",
};

/// The APIs once observed on.
pub struct Apis {
    pub core: bool,
    pub filestore: bool,
}

pub fn api_key(api: &str) -> String {
    format!("{}{}", super::API_PREFIX, api.trim_end_matches(".googleapis.com"))
}

/// The ManagedResourceActivationPolicy that activates exactly the kinds a GKE cluster composes.
pub fn activation_policy(cluster: &str) -> Fields {
    provision::activation_policy(
        cluster,
        "provider-upjet-gcp",
        &[
            "projectservices.cloudplatform.gcp.m.upbound.io",
            "serviceaccounts.cloudplatform.gcp.m.upbound.io",
            "serviceaccountkeys.cloudplatform.gcp.m.upbound.io",
            "projectiammembers.cloudplatform.gcp.m.upbound.io",
            "networks.compute.gcp.m.upbound.io",
            "subnetworks.compute.gcp.m.upbound.io",
            "clusters.container.gcp.m.upbound.io",
            "nodepools.container.gcp.m.upbound.io",
        ],
    )
}

pub fn project_services(out: &mut Output, ctx: &Context) -> Apis {
    let mut service = |api: &str| {
        let key = api_key(api);
        // Left on when the cluster goes: other workloads of the project may use them.
        let for_provider =
            tree!({"service": api, "disableOnDestroy": false, "disableDependentServices": false});
        let name = format!("{}-{}", ctx.name, key.trim_start_matches(super::API_PREFIX));
        out.compose(
            &key,
            ctx.managed(CLOUD_PLATFORM, "ProjectService", &name, for_provider)
                .build(),
            false,
        );
        ctx.seen.ready(&key)
    };
    // Every API is composed whether or not the ones before it are on yet.
    let core: Vec<bool> = CORE_APIS.iter().map(|api| service(api)).collect();
    let core = !core.contains(&false);
    Apis {
        core,
        filestore: service(FILESTORE_API),
    }
}

/// The VPC, with no automatic subnetworks: the cluster gets one subnetwork of its own.
pub fn network(out: &mut Output, ctx: &Context) {
    let for_provider = tree!({"autoCreateSubnetworks": false, "routingMode": "REGIONAL"});
    out.compose(
        KEY_NETWORK,
        ctx.managed(COMPUTE, "Network", ctx.name, for_provider).build(),
        false,
    );
}

/// The VPC's name in Google Cloud, once the provider has reported it.
pub fn network_name(ctx: &Context) -> Option<String> {
    ctx.input(
        (KEY_NETWORK, EXTERNAL_NAME_POINTER),
        (
            super::KEY_STORAGE_CLASS,
            "/spec/forProvider/manifest/parameters/network",
        ),
    )
}

/// The cluster's subnetwork in its region, once the network's self link is known.
pub fn subnet(out: &mut Output, ctx: &Context) -> bool {
    let Some(network) = ctx.input(
        (KEY_NETWORK, "/status/atProvider/selfLink"),
        (KEY_SUBNET, "/spec/forProvider/network"),
    ) else {
        return false;
    };
    let for_provider = tree!({
        "region": &ctx.cluster.region,
        "network": network,
        "ipCidrRange": NODE_CIDR,
        "secondaryIpRange": [
            {"rangeName": PODS_RANGE, "ipCidrRange": POD_CIDR},
            {"rangeName": SERVICES_RANGE, "ipCidrRange": SERVICE_CIDR},
        ],
        // Nodes have no external addresses of their own to reach Google APIs with otherwise.
        "privateIpGoogleAccess": true,
    });
    out.compose(
        KEY_SUBNET,
        ctx.managed(COMPUTE, "Subnetwork", ctx.name, for_provider).build(),
        false,
    );
    true
}

/// The account's ID in Google Cloud: 6 to 30 characters, starting with a letter, unique in the project, so
/// derived from the cluster's name with a hash when that is too long.
pub fn account_id(cluster: &str, part: &str) -> String {
    child_name(&["mp", cluster, part], 30)
}

pub fn service_account(out: &mut Output, ctx: &Context, account: &Account) {
    let name = format!("{}-{}", ctx.name, account.part);
    let mr = ctx
        .managed(
            CLOUD_PLATFORM,
            "ServiceAccount",
            &name,
            tree!({"displayName": format!("{} ({})", account.display, ctx.name)}),
        )
        .external_name(account_id(ctx.name, account.part));
    out.compose(account.key, mr.build(), false);
}

/// The account's `email` once Ready, else what `own` (a resource composed with it) was composed with.
pub fn account_email(ctx: &Context, account: &Account, own: (&str, &str)) -> Option<String> {
    ctx.input((account.key, "/status/atProvider/email"), own)
}

/// The account's one project role, once its email is known.
pub fn role_binding(out: &mut Output, ctx: &Context, account: &Account) -> bool {
    let Some(member) = ctx
        .seen
        .ready_field(account.key, "/status/atProvider/email")
        .and_then(|v| v.as_str().map(|email| format!("serviceAccount:{email}")))
        .or_else(|| {
            ctx.seen
                .spec_field(account.role_key, "/spec/forProvider/member")
                .and_then(|v| v.as_str().map(str::to_owned))
        })
    else {
        return false;
    };
    let name = format!("{}-{}", ctx.name, account.part);
    let for_provider = tree!({"role": account.role, "member": member});
    out.compose(
        account.role_key,
        ctx.managed(CLOUD_PLATFORM, "ProjectIAMMember", &name, for_provider)
            .build(),
        false,
    );
    true
}

/// A key of the admin account, written to the Secret the provider configs present as their identity.
pub fn admin_key(out: &mut Output, ctx: &Context) -> bool {
    let Some(account) = ctx.input(
        (KEY_ADMIN_ACCOUNT, "/status/atProvider/id"),
        (KEY_ADMIN_KEY, "/spec/forProvider/serviceAccountId"),
    ) else {
        return false;
    };
    let name = format!("{}-{}", ctx.name, ADMIN.part);
    let mr = ctx.managed(
        CLOUD_PLATFORM,
        "ServiceAccountKey",
        &name,
        tree!({"serviceAccountId": account}),
    );
    out.compose(
        KEY_ADMIN_KEY,
        mr.connection_secret(admin_key_secret(ctx.name)).build(),
        false,
    );
    true
}

/// The cluster, once its subnetwork and node account are known. The default pool is removed as soon as the
/// cluster exists (every pool is composed on its own), but GKE still creates it, so it runs as the node account.
pub fn cluster(out: &mut Output, ctx: &Context) -> bool {
    let own = |pointer| (KEY_CLUSTER, pointer);
    let network = ctx.input(
        (KEY_NETWORK, "/status/atProvider/selfLink"),
        own("/spec/forProvider/network"),
    );
    let subnetwork = ctx.input(
        (KEY_SUBNET, "/status/atProvider/selfLink"),
        own("/spec/forProvider/subnetwork"),
    );
    let email = account_email(ctx, &NODES, own("/spec/forProvider/nodeConfig/serviceAccount"));
    let (Some(network), Some(subnetwork), Some(email)) = (network, subnetwork, email) else {
        return false;
    };
    let for_provider = tree!({
        "location": &ctx.cluster.region,
        "minMasterVersion": &ctx.cluster.kubernetes_version,
        "releaseChannel": {"channel": RELEASE_CHANNEL},
        "network": network,
        "subnetwork": subnetwork,
        "ipAllocationPolicy": {"clusterSecondaryRangeName": PODS_RANGE, "servicesSecondaryRangeName": SERVICES_RANGE},
        "removeDefaultNodePool": true,
        "initialNodeCount": 1,
        "nodeConfig": {"serviceAccount": email, "oauthScopes": [super::node_pools::OAUTH_SCOPE]},
        // The caches' ReadWriteMany volumes: GKE runs the Filestore CSI driver as a managed add-on.
        "addonsConfig": {"gcpFilestoreCsiDriverConfig": {"enabled": true}},
        // Deletion is Modelplane's to order (the InferenceCluster going is the intent); GKE's guard would wedge it.
        "deletionProtection": false,
    });
    let mr = ctx.cluster_managed(CONTAINER, "Cluster", for_provider);
    out.compose(KEY_CLUSTER, mr.build(), false);
    true
}

/// The cluster's ID, as its node pools name it.
pub fn cluster_id(ctx: &Context, pool_key: &str) -> Option<String> {
    ctx.input(
        (KEY_CLUSTER, "/status/atProvider/id"),
        (pool_key, "/spec/forProvider/cluster"),
    )
}

/// The caches' StorageClass: regional Filestore (its Enterprise tier, so volumes survive a zone and serve pools
/// in any zone of the region) on the cluster's own VPC, which Filestore would otherwise look for as `default`.
pub fn storage_class(cluster: &str, vpc: &str) -> Fields {
    let manifest = tree!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": FILESTORE_STORAGE_CLASS},
        "provisioner": "filestore.csi.storage.gke.io",
        "parameters": {"tier": "enterprise", "network": vpc},
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": true,
    });
    provision::storage_class_object(cluster, "storageclass-filestore", manifest)
}
