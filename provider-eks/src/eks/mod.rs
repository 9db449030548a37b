//! `ExternalClient` implementations, one per managed kind, on the AWS SDK (EKS, EC2, IAM, EFS, STS):
//!
//! - [`cluster`] (`Cluster`: an EKS cluster) and [`kubeconfig`] (its connection secret);
//! - [`node_pool`] (`NodePool`: a managed node group) and [`launch_template`] (capacity blocks, EFA, security
//!   groups);
//! - [`network`] (`Network`: VPC, subnets, gateways, route tables), with its pure plan, the finders, the parts
//!   it creates one by one, and its security group as submodules;
//! - [`role`] (`Role`: an IAM role and its policies);
//! - [`addon`] (`Addon`: an EKS add-on) and [`pod_identity`] (`PodIdentityAssociation`);
//! - [`file_system`] (`FileSystem`: EFS and its mount targets), with its pure plan and its NFS security group
//!   as submodules.
//!
//! Shared: [`clients`] (AWS clients per ProviderConfig), [`account`] (the AWS account credentials act in),
//! [`throttle`] (token buckets per account, region and API), [`admission`] (the queue in front of them),
//! [`errors`] (AWS errors to reconciler errors, and the call patterns every kind shares: describe or report
//! missing, in use means adopt, gone on delete, one-by-one attach and detach, health issues),
//! [`convert`] (pure status, drift and late-init mapping), [`full_look`] (cheap steady polls), and [`owned`]
//! (the ownership tag and the connector the newer kinds share).

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
