//! What Modelplane runs on a workload cluster the same way whichever serving stack the cluster has: an engine's
//! pod and the Deployment, claims and Service around it ([`pod`]), the flags read off its command line
//! ([`engine_flags`]), prefill/decode disaggregation ([`disaggregation`]), how a replica is reached
//! ([`replica_routing`]) through the cluster gateway ([`cluster_gateway`]), the engine metrics vocabulary
//! ([`engine_metrics`]), and the names other software knows ([`well_known`], [`names`]). Where the stacks differ is
//! [`crate::stack`]'s.

pub mod cluster_gateway;
pub mod disaggregation;
pub mod engine_flags;
pub mod engine_metrics;
pub mod metallb;
pub mod names;
pub mod own_image;
pub mod pod;
pub mod pod_report;
pub mod replica_routing;
pub mod well_known;
