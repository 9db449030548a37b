//! Workspace-level tests, the package checker (`modelplane-package`) and the RunFunction benchmark.

pub mod examples;
pub mod fleet;
pub mod manifest;
pub mod meta;
pub mod package;
pub mod schema;
pub mod structural;
pub mod vendored;
pub mod xrd;
