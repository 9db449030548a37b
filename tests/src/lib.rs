//! Workspace-level tests and the package checker (`modelplane-package`).

pub mod examples;
pub mod legacy;
pub mod manifest;
pub mod meta;
pub mod package;
pub mod schema;
pub mod structural;
pub mod xrd;
