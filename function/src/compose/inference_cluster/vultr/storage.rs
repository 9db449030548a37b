//! ReadWriteMany storage for model caches, which VKE does not offer GPU nodes: its own ReadWriteMany class
//! (`vultr-vfs-storage`, Vultr File System) fails to attach to GPU plans, which is why upstream Modelplane ships
//! no cache storage on Vultr. So the cluster serves NFS itself: one NFS server on the system pool, its export a
//! Vultr block-storage volume (VKE's `vultr-block-storage` class, which system-pool plans attach), and the
//! csi-driver-nfs CSI driver, which provisions one directory of that export per cache volume and mounts it on any
//! node, GPU nodes included. The mount happens inside the driver's node plugin, so the nodes need no NFS client
//! of their own and the server is found by its Service's cluster DNS name.
//!
//! One server is one point of failure: while it restarts (a system node drained, the volume moving with it)
//! cache reads stall and resume. A cache holds weights that can always be downloaded again, so that is traded
//! for a class that exists on every stock cluster.

use super::Context;
use crate::{
    api::inference_cluster::POOL_LABEL,
    compose::{
        Output,
        crossplane::{self, Chart},
        inference_cluster::{
            check::SYSTEM_POOL,
            components::{self, provider_config_name},
            provision,
        },
        remote,
    },
    wire::tree::{Fields, Tree, tree},
};

pub const KEY_NAMESPACE: &str = "vultr-object-nfs-namespace";
pub const KEY_DRIVER: &str = "vultr-release-csi-driver-nfs";
pub const KEY_VOLUME: &str = "vultr-object-nfs-volume";
pub const KEY_SERVER: &str = "vultr-object-nfs-server";
pub const KEY_SERVICE: &str = "vultr-object-nfs-service";
pub const KEY_STORAGE_CLASS: &str = "vultr-object-storageclass-nfs";
/// Every key of this stack, for "has any of it been composed before".
const KEYS: &[&str] = &[
    KEY_NAMESPACE,
    KEY_DRIVER,
    KEY_VOLUME,
    KEY_SERVER,
    KEY_SERVICE,
    KEY_STORAGE_CLASS,
];

/// The ReadWriteMany StorageClass every Vultr cluster gets for model caches.
pub const STORAGE_CLASS: &str = "modelplane-rwx-fs";

/// The server's own namespace on the workload cluster, so nothing else lands beside it.
const NAMESPACE: &str = "modelplane-nfs";
const SERVER: &str = "nfs-server";
/// The server's export, as csi-driver-nfs reaches it: NFSv4 exports the shared directory as its root.
const SHARE: &str = "/";
const NFS_PORT: u16 = 2049;
/// A kernel NFS server that exports one directory over NFSv4, pinned to a release rather than `latest`.
const SERVER_IMAGE: &str = "itsthenetwork/nfs-server-alpine:12";
const EXPORT_DIRECTORY: &str = "/exports";
/// VKE's preinstalled block-storage class (NVMe-backed); block storage attaches to the system pool's plans.
const VOLUME_CLASS: &str = "vultr-block-storage";
/// Room for a few large checkpoints at once (a 70B model is about 140 GB in bf16); one volume is fixed at
/// creation, so it is sized for a fleet's working set rather than one model.
const VOLUME_SIZE: &str = "500Gi";

/// csi-driver-nfs: the release whose chart this table was written against.
const DRIVER_CHART: &str = "csi-driver-nfs";
const DRIVER_REPOSITORY: &str =
    "https://raw.githubusercontent.com/kubernetes-csi/csi-driver-nfs/master/charts";
const DRIVER_VERSION: &str = "v4.11.0";
const DRIVER_NAMESPACE: &str = "kube-system";
const DRIVER_PROVISIONER: &str = "nfs.csi.k8s.io";

/// provider-kubernetes reports the server's Deployment ready once this holds on the remote object.
const DEPLOYMENT_AVAILABLE: &str =
    "object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')";

/// Whether any part of the NFS stack was composed before: it then stays composed.
pub fn any_composed(ctx: &Context) -> bool {
    KEYS.iter().any(|key| ctx.seen.exists(key))
}

/// The stack, each part once what it needs is observed; whether the StorageClass is composed.
pub fn compose(out: &mut Output, ctx: &Context) -> bool {
    let name = ctx.name;
    out.compose(KEY_NAMESPACE, namespace(name), false);
    out.compose(KEY_DRIVER, driver(name), false);
    if !(ctx.seen.ready(KEY_NAMESPACE) || ctx.seen.exists(KEY_SERVER)) {
        return false;
    }
    out.compose(KEY_VOLUME, volume(name), false);
    out.compose(KEY_SERVER, server(name), false);
    out.compose(KEY_SERVICE, service(name), false);
    let serving = ctx.seen.ready(KEY_SERVER) && ctx.seen.ready(KEY_DRIVER);
    if !(serving || ctx.seen.exists(KEY_STORAGE_CLASS)) {
        return false;
    }
    out.compose(KEY_STORAGE_CLASS, storage_class(name), false);
    true
}

/// `manifest` on the cluster as a provider-kubernetes Object named `<cluster>-<part>`.
fn object(cluster: &str, part: &str, manifest: Tree) -> remote::Object {
    components::cluster_object(cluster, part, manifest)
}

fn labels() -> Tree {
    tree!({"app.kubernetes.io/name": SERVER, "app.kubernetes.io/part-of": "modelplane"})
}

fn namespace(cluster: &str) -> Fields {
    let manifest = tree!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    object(cluster, "nfs-namespace", manifest)
        .ready_once_created()
        .build()
}

fn volume(cluster: &str) -> Fields {
    let manifest = tree!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": SERVER, "namespace": NAMESPACE, "labels": labels()},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": VOLUME_CLASS,
            "resources": {"requests": {"storage": VOLUME_SIZE}},
        },
    });
    object(cluster, "nfs-volume", manifest)
        .ready_once_created()
        .build()
}

fn server(cluster: &str) -> Fields {
    let manifest = tree!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": SERVER, "namespace": NAMESPACE, "labels": labels()},
        "spec": {
            "replicas": 1,
            // The volume attaches to one node at a time: the old pod must let go before the new one starts.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels()},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    // Off the GPU nodes, on plans block storage attaches to.
                    "nodeSelector": {POOL_LABEL: SYSTEM_POOL},
                    "containers": [{
                        "name": SERVER,
                        "image": SERVER_IMAGE,
                        "env": [{"name": "SHARED_DIRECTORY", "value": EXPORT_DIRECTORY}],
                        "ports": [{"name": "nfs", "containerPort": NFS_PORT, "protocol": "TCP"}],
                        // The kernel NFS server needs the host's nfsd, which only a privileged container reaches.
                        "securityContext": {"privileged": true},
                        "volumeMounts": [{"name": "export", "mountPath": EXPORT_DIRECTORY}],
                    }],
                    "volumes": [{"name": "export", "persistentVolumeClaim": {"claimName": SERVER}}],
                },
            },
        },
    });
    object(cluster, "nfs-server", manifest)
        .ready_when(DEPLOYMENT_AVAILABLE)
        .build()
}

fn service(cluster: &str) -> Fields {
    let manifest = tree!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVER, "namespace": NAMESPACE, "labels": labels()},
        "spec": {
            "selector": labels(),
            "ports": [{"name": "nfs", "port": NFS_PORT, "targetPort": NFS_PORT, "protocol": "TCP"}],
        },
    });
    object(cluster, "nfs-service", manifest)
        .ready_once_created()
        .build()
}

/// csi-driver-nfs, its controller on the system pool and its node plugin on every node (the GPU taint and the
/// cluster's taints included, since caches mount on GPU nodes). Both run on the host network and resolve the
/// server's Service name through the cluster's DNS.
fn driver(cluster: &str) -> Fields {
    let chart = Chart {
        name: DRIVER_CHART,
        repository: DRIVER_REPOSITORY,
        version: DRIVER_VERSION,
    };
    let values = tree!({
        "controller": {
            "nodeSelector": {POOL_LABEL: SYSTEM_POOL},
            "dnsPolicy": "ClusterFirstWithHostNet",
        },
        "node": {
            "tolerations": [{"operator": "Exists"}],
            "dnsPolicy": "ClusterFirstWithHostNet",
        },
    });
    let config = provider_config_name(cluster);
    crossplane::release(cluster, DRIVER_CHART, &config, chart, DRIVER_NAMESPACE, values)
}

/// The class caches stage on: a directory of the server's export per volume, deleted with the volume.
fn storage_class(cluster: &str) -> Fields {
    let manifest = tree!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS},
        "provisioner": DRIVER_PROVISIONER,
        "parameters": {
            "server": format!("{SERVER}.{NAMESPACE}.svc.cluster.local"),
            "share": SHARE,
        },
        "mountOptions": ["nfsvers=4.1"],
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    });
    provision::storage_class_object(cluster, "storageclass-nfs", manifest)
}
