//! A generic managed-resource reconciler: crossplane-runtime's `pkg/reconciler/managed` loop in Rust, over an
//! [`external::ExternalClient`] per kind. `decide` is pure; `reconciler` carries out its decision.

pub mod admission;
pub mod annotations;
pub mod conditions;
pub mod decide;
pub mod external;
pub mod external_fns;
pub mod kinds;
pub mod pacing;
pub mod policy;
pub mod reconciler;
pub mod recorder;
pub mod resource;
pub mod urgency;
pub mod usage;
pub mod watch_filter;
pub mod writes;
