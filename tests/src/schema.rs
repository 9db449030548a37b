//! Validates an object the way the API server would against a CRD-style schema. The implementation lives in the
//! function, which checks every composite against its XRD with it; the package checker uses the same copy.

pub use modelplane_function::validate::schema::*;
