//! Everything of a Nebius cluster besides its node groups: the network and subnet, the mk8s cluster, the shared
//! filesystem with what mounts it and serves it, and the GPU clusters of InfiniBand pools.
//!
//! Every MR carries `forProvider.name`: the Nebius API requires a name, and the provider does not derive one
//! from the object's.

use super::{
    API_COMPUTE, API_MK8S, API_VPC, Context, FS_STORAGE_CLASS, KEY_CLOUD_INIT, KEY_CLUSTER, KEY_FILESYSTEM,
    KEY_NETWORK, KEY_SUBNET, gpu_cluster_key, id_input,
};
use crate::{
    api::inference_cluster::{FabricType, InferenceClusterSpec},
    compose::Output,
    compose::{
        crossplane::{self, Chart},
        inference_cluster::{components::provider_config_name, provision},
        shared::CONTROL_NAMESPACE,
    },
    wire::tree::{Fields, fields, tree},
};

/// Nebius shared filesystems have a fixed size (nothing elastic like EFS): 1 TiB holds the weights of several
/// large models. Network SSD is the type every region offers.
const FS_TYPE: &str = "NETWORK_SSD";
const FS_SIZE_GIB: u32 = 1024;

/// The tag node groups attach the filesystem under, and where cloud-init mounts it; the CSI driver serves
/// volumes from a directory on that mount.
pub const FS_MOUNT_TAG: &str = "modelplane-cache";
const FS_MOUNT_POINT: &str = "/mnt/data";
pub const CLOUD_INIT_KEY: &str = "userData";

/// Nebius's csi-mounted-fs-path driver: ReadWriteMany volumes as directories of a filesystem every node has
/// mounted (Nebius has no CSI driver that attaches a shared filesystem itself). The release upstream Modelplane
/// validated; the driver name is the chart's default.
const CSI_CHART_REPOSITORY: &str = "oci://cr.eu-north1.nebius.cloud/mk8s/helm";
const CSI_CHART: &str = "csi-mounted-fs-path";
const CSI_CHART_VERSION: &str = "0.1.6";
const CSI_NAMESPACE: &str = "kube-system";
pub const CSI_DRIVER_NAME: &str = "mounted-fs-path.csi.nebius.ai";

pub fn network(out: &mut Output, ctx: &Context) {
    let mr = ctx.managed(API_VPC, "Network", ctx.name, tree!({"name": ctx.name}));
    out.compose(KEY_NETWORK, mr.build(), false);
}

/// The subnet, once the network has an ID; its addresses come from the network's default private pools, so
/// there is no CIDR to choose. Whether it is composed.
pub fn subnet(out: &mut Output, ctx: &Context) -> bool {
    let Some(network) = id_input(ctx, KEY_NETWORK, KEY_SUBNET, "/spec/forProvider/networkId") else {
        return false;
    };
    let mr = ctx.managed(
        API_VPC,
        "Subnet",
        ctx.name,
        tree!({"name": ctx.name, "networkId": network,
               "ipv4PrivatePools": {"useNetworkPools": true}}),
    );
    out.compose(KEY_SUBNET, mr.build(), false);
    true
}

/// The mk8s control plane on the subnet, with a public endpoint (the control plane reaches it from outside
/// Nebius), writing its kubeconfig for the provider configs. Whether it is composed.
pub fn cluster(out: &mut Output, ctx: &Context) -> bool {
    let Some(subnet) = id_input(
        ctx,
        KEY_SUBNET,
        KEY_CLUSTER,
        "/spec/forProvider/controlPlane/subnetId",
    ) else {
        return false;
    };
    let mr = ctx.cluster_managed(
        API_MK8S,
        "Cluster",
        tree!({"name": ctx.name,
               "controlPlane": {"version": &ctx.cluster.kubernetes_version, "subnetId": subnet,
                                "endpoints": {"publicEndpoint": {}}}}),
    );
    out.compose(KEY_CLUSTER, mr.build(), false);
    true
}

pub fn filesystem(out: &mut Output, ctx: &Context) {
    let name = format!("{}-cache", ctx.name);
    let mr = ctx.managed(
        API_COMPUTE,
        "Filesystem",
        &name,
        tree!({"name": &name, "type": FS_TYPE, "sizeGibibytes": FS_SIZE_GIB}),
    );
    out.compose(KEY_FILESYSTEM, mr.build(), false);
}

pub fn cloud_init_secret(cluster: &str) -> String {
    format!("{cluster}-cloud-init")
}

/// The user data that mounts the attached filesystem on every node at first boot, kept in fstab for reboots
/// (Nebius's filesystem-over-CSI recipe). A NodeGroup takes user data only from a Secret in its own namespace.
pub fn cloud_init(out: &mut Output, ctx: &Context) {
    let user_data = format!(
        "#cloud-config\nruncmd:\n  - mkdir -p {FS_MOUNT_POINT}\n  - mount -t virtiofs {FS_MOUNT_TAG} \
         {FS_MOUNT_POINT}\n  - echo '{FS_MOUNT_TAG} {FS_MOUNT_POINT} virtiofs defaults,nofail 0 2' >> /etc/fstab\n"
    );
    let secret = fields!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": cloud_init_secret(ctx.name), "namespace": CONTROL_NAMESPACE},
        "type": "Opaque",
        "stringData": {CLOUD_INIT_KEY: user_data},
    });
    out.compose(KEY_CLOUD_INIT, secret, false);
}

/// One GPU cluster per InfiniBand fabric the pools join: the nodes of a group on it share that fabric.
pub fn gpu_clusters(out: &mut Output, ctx: &Context, spec: &InferenceClusterSpec) {
    let fabrics = spec
        .node_pools
        .iter()
        .filter(|p| p.fabric.type_ == FabricType::InfiniBand)
        .filter_map(|p| p.fabric.infiniband.as_ref());
    for fabric in fabrics {
        let name = format!("{}-{}", ctx.name, fabric.fabric);
        let mr = ctx.managed(
            API_COMPUTE,
            "GpuCluster",
            &name,
            tree!({"name": &name, "infinibandFabric": &fabric.fabric}),
        );
        out.compose(gpu_cluster_key(&fabric.fabric), mr.build(), false);
    }
}

/// The CSI driver on the cluster, through the cluster's own provider-helm config.
pub fn csi_driver(cluster: &str) -> Fields {
    let chart = Chart {
        name: CSI_CHART,
        repository: CSI_CHART_REPOSITORY,
        version: CSI_CHART_VERSION,
    };
    let values = tree!({
        "dataDir": format!("{FS_MOUNT_POINT}/csi-mounted-fs-path-data/"),
        // The node plugin must register on every node whose pods mount a cache, GPU nodes (the GPU taint, the
        // cluster's own taints) included; the chart tolerates nothing by default.
        "tolerations": [{"operator": "Exists"}],
    });
    let config = provider_config_name(cluster);
    crossplane::release(cluster, CSI_CHART, &config, chart, CSI_NAMESPACE, values)
}

/// The StorageClass ModelCaches stage on: directories of the shared filesystem, through the CSI driver. Bound
/// where the first consumer is scheduled, since the driver serves volumes from the node's own mount.
pub fn storage_class(cluster: &str) -> Fields {
    let manifest = tree!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": FS_STORAGE_CLASS},
        "provisioner": CSI_DRIVER_NAME,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    });
    provision::storage_class_object(cluster, "storageclass-fs", manifest)
}
