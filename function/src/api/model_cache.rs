//! `ModelCache`: a Hugging Face repo staged once per cluster on shared storage. Namespaced.
//!
//! Only what a ModelDeployment needs to mount a cache lives here so far; the ModelCache composer and the
//! ModelDeployment composer both name the cache's volume claim through [`pvc_name`].

/// Where an engine sees the cache; `HF_HUB_CACHE` points here so a repo id resolves to the staged snapshot.
pub const MOUNT_PATH: &str = "/mnt/models";

/// The PersistentVolumeClaim holding cache `cache_name`, in the workload cluster namespace named like the
/// ModelCache's own namespace.
pub fn pvc_name(cache_name: &str) -> String {
    format!("modelcache-{cache_name}")
}
