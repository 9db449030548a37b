//! provider-eks: a Crossplane provider, in Rust, for EKS clusters (`Cluster`) and managed node groups
//! (`NodePool`) in group `eks.m.modelplane.ai`.
//!
//! The reconcile loop is crossplane-runtime's managed reconciler (`managed`): a pure `decide` picks one step
//! from the managed resource and what AWS reports, and the reconciler carries it out through an
//! `ExternalClient` per kind (`eks`). Nothing runs until Crossplane activates a kind's
//! ManagedResourceDefinition (`activation`): before that the process builds no AWS client and makes no AWS call.

pub mod activation;
pub mod controllers;
pub mod crds;
pub mod eks;
pub mod leader;
pub mod managed;
pub mod metrics;
pub mod provider_config;
