//! Workspace-level tests and benchmarks live in this crate.

pub mod fleet;
