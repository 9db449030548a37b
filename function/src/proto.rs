//! Messages and services generated from `proto/` (see build.rs for why `Struct` is a [`crate::wire::RawStruct`]).

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod v1 {
    tonic::include_proto!("apiextensions.r#fn.proto.v1");
}

/// The pre-v1.17 package. Identical on the wire to [`v1`]; the server converts by re-encoding.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod v1beta1 {
    tonic::include_proto!("apiextensions.r#fn.proto.v1beta1");
}
