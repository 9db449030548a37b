//! ExternalClient implementations for `Cluster` and `NodePool` on aws-sdk-eks and aws-sdk-ec2.

pub mod account;
pub mod addon;
pub mod clients;
pub mod cluster;
pub mod convert;
pub mod errors;
pub mod file_system;
pub mod full_look;
pub mod kubeconfig;
pub mod launch_template;
pub mod network;
pub mod node_pool;
pub mod owned;
pub mod pod_identity;
pub mod role;
pub mod throttle;

use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};

use crate::managed::annotations::EXTERNAL_NAME;

/// The AWS name of a managed resource: its external-name annotation, else its own name.
pub fn external_name<M: Resource>(mr: &M) -> String {
    mr.annotations()
        .get(EXTERNAL_NAME)
        .cloned()
        .unwrap_or_else(|| mr.name_any())
}

/// A client request token that is the same for every retry of one spec of one object (uid + generation), so
/// a Create whose answer was lost can be sent again without making a second cluster or node group.
pub fn request_token<M: Resource>(mr: &M) -> String {
    let seed = format!(
        "{}:{}",
        mr.uid().unwrap_or_default(),
        mr.meta().generation.unwrap_or_default()
    );
    let digest = Sha256::digest(seed.as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}
