//! provider-eks: a Crossplane provider, in Rust, for what an EKS cluster needs in AWS, as namespaced managed
//! resources in group `eks.m.modelplane.ai`: `Cluster`, `NodePool` (managed node groups), `Network` (VPC,
//! subnets, gateways, routes, security group), `Role` (IAM), `Addon`, `PodIdentityAssociation` and
//! `FileSystem` (EFS), with `ProviderConfig`, `ClusterProviderConfig` and `ProviderConfigUsage`. The types
//! live in the `modelplane-eks-api` crate (`provider-eks/api`), shared with the composition function.
//!
//! The reconcile loop is crossplane-runtime's managed reconciler ([`managed`]): a pure `decide` picks one step
//! from the managed resource and what AWS reports, and the reconciler carries it out through an
//! `ExternalClient` per kind ([`eks`]). Nothing runs until Crossplane activates a kind's
//! ManagedResourceDefinition ([`activation`]): before that the process builds no AWS client and makes no AWS call.
//!
//! Modules:
//! - [`activation`]: SafeStart, starting a kind's controller once its MRD is Active and its CRD Established.
//! - [`controllers`]: one kube-runtime controller per managed kind, and the watches that wake node pools,
//!   add-ons and pod identities on their Cluster.
//! - [`managed`]: the generic managed reconciler, its conditions, events, pacing and ProviderConfigUsages.
//! - [`eks`]: the AWS clients, one per kind, the rate limiter and the connection secret's kubeconfig.
//! - [`provider_config`]: the `in-use.crossplane.io` finalizer on configs that usages name.
//! - [`leader`]: leader election on a Lease; [`metrics`]: Prometheus metrics and health endpoints.
//! - [`crds`]: the CRDs generated from the types (`modelplane-provider-eks crds`).

pub mod activation;
pub mod controllers;
pub mod crds;
pub mod eks;
pub mod leader;
pub mod managed;
pub mod metrics;
pub mod provider_config;
