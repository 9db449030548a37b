//! How AWS SDK errors become reconciler errors: throttling, 5xx and transport failures are retried with
//! backoff; everything else is reported as the spec's problem.

use aws_sdk_eks::error::{ProvideErrorMetadata, SdkError};

use crate::managed::external::ExternalError;

/// Error codes AWS uses for "slow down", across EKS (rest-json) and EC2 (query).
const THROTTLING_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "ServerException",
    "InternalError",
];

pub fn code<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> Option<&str> {
    err.as_service_error().and_then(|e| e.code())
}

pub fn is_code<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>, wanted: &str) -> bool {
    code(err) == Some(wanted)
}

/// `what` reads "cannot <verb> <noun>", e.g. "cannot describe EKS cluster demo".
pub fn classify<E: ProvideErrorMetadata>(
    what: &str,
    err: &SdkError<E, aws_smithy_runtime_api::http::Response>,
) -> ExternalError {
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => {
            ExternalError::Transient(format!("{what}: AWS did not answer"))
        }
        SdkError::ResponseError(_) => ExternalError::Transient(format!("{what}: unreadable AWS response")),
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let code = service.err().code().unwrap_or("Unknown");
            let message = service.err().message().unwrap_or_default();
            if status >= 500 || THROTTLING_CODES.contains(&code) {
                ExternalError::Transient(format!("{what}: {code} (HTTP {status})"))
            } else {
                ExternalError::Rejected(format!("{what}: {code}: {message}"))
            }
        }
        _ => ExternalError::Rejected(format!("{what}: {err}")),
    }
}

/// How a Create of something that lives on an EKS cluster (an add-on, a pod identity association) ends, the
/// same for every such kind: already there (ours, from an earlier attempt whose answer was lost: Observe adopts
/// it) is success; no such cluster is Waiting on `spec.forProvider.clusterName`; a parameter EKS refuses is
/// Rejected naming `fields`; anything else is classified. `what` names the resource ("EKS add-on coredns").
pub fn created_on_cluster<T, E: ProvideErrorMetadata>(
    result: Result<T, SdkError<E, aws_smithy_runtime_api::http::Response>>,
    cluster: &str,
    fields: &str,
    what: &str,
) -> Result<(), ExternalError> {
    match result {
        Ok(_) => Ok(()),
        Err(e) if is_code(&e, "ResourceInUseException") => Ok(()),
        Err(e) if is_code(&e, "ResourceNotFoundException") => Err(ExternalError::Waiting(format!(
            "spec.forProvider.clusterName: EKS cluster {cluster} does not exist yet"
        ))),
        Err(e) if is_code(&e, "InvalidParameterException") => Err(ExternalError::Rejected(format!(
            "{fields}: {}",
            classify(&format!("EKS refused the {what}"), &e)
        ))),
        Err(e) => Err(classify(&format!("cannot create {what}"), &e)),
    }
}
