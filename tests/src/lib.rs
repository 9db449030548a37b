//! Workspace-level tests, the package checker (`modelplane-package`) and the RunFunction benchmark.

pub mod composed;
pub mod dependencies;
pub mod examples;
pub mod fleet;
pub mod manifest;
pub mod meta;
pub mod package;
pub mod ranges;
pub mod schema;
pub mod semver;
pub mod structural;
pub mod vendored;
pub mod xrd;
