//! How AWS SDK errors become reconciler errors: throttling, 5xx and transport failures are retried with
//! backoff; everything else is reported as the spec's problem. Also the answers every kind reads the same way:
//! a Describe of what is not there ([`found`]), a Create of what an earlier attempt made ([`adopted`]), a Delete
//! of what is gone ([`gone`]), any other code that means "done" or "not yet" ([`answer`]), a list attached or
//! detached one item at a time ([`one_by_one`]), and the health issues EKS reports ([`health_issues`]).

use std::future::Future;

use aws_sdk_eks::error::{ProvideErrorMetadata, SdkError};

use crate::managed::external::ExternalError;

/// EKS's error code for "no such cluster, node group, add-on or association".
pub const NOT_FOUND: &str = "ResourceNotFoundException";
/// EKS's error code for "exists already" on a Create, and "busy" on a Delete.
pub const IN_USE: &str = "ResourceInUseException";
/// IAM's error code for "no such role, policy or attachment".
pub const NO_SUCH_ENTITY: &str = "NoSuchEntity";
/// EC2's error code for a security group rule that is there already.
pub const RULE_EXISTS: &str = "InvalidPermission.Duplicate";
/// EC2's error code for "something else still refers to it" on a Delete.
pub const DEPENDENCY_VIOLATION: &str = "DependencyViolation";

/// What one AWS call returned: its output or the SDK's error.
pub type Sent<T, E> = Result<T, SdkError<E, aws_smithy_runtime_api::http::Response>>;
/// What the caller makes of it: the output, None where the error code says there is none and that is fine, or
/// the reconciler's error.
pub type Answer<T> = Result<Option<T>, ExternalError>;
/// The same for a call whose output nobody reads.
pub type Done = Result<(), ExternalError>;

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
    let connector = match err {
        SdkError::DispatchFailure(failure) => failure.as_connector_error(),
        _ => None,
    };
    if let Some(wait) = connector.and_then(|c| super::throttle::deferred(c)) {
        return ExternalError::Deferred(wait);
    }
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

/// What an error code says about the call that got it, when it is not a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Meaning {
    /// There is nothing to return, and that is the answer: a Describe of what does not exist, a Create of what an
    /// earlier attempt (whose answer was lost) made, a Delete of what is gone, an attachment made before.
    Settled,
    /// Something has to finish or go first: the call is Waiting, with this message.
    Wait(String),
}

/// The answer of one AWS call: its output; None where its error code is one `meanings` calls Settled; Waiting
/// where one it calls Wait; any other error classified as `what` ("cannot <verb> <noun>").
pub fn answer<T, E: ProvideErrorMetadata>(
    sent: Sent<T, E>,
    what: &str,
    meanings: &[(&str, Meaning)],
) -> Answer<T> {
    let err = match sent {
        Ok(out) => return Ok(Some(out)),
        Err(err) => err,
    };
    let meaning = code(&err).and_then(|c| meanings.iter().find(|(listed, _)| *listed == c));
    match meaning {
        Some((_, Meaning::Settled)) => Ok(None),
        Some((_, Meaning::Wait(why))) => Err(ExternalError::Waiting(why.clone())),
        None => Err(classify(what, &err)),
    }
}

/// Describe, or report missing: the output, or None where `missing` (the service's not-found code) says there
/// is no such thing.
pub fn found<T, E: ProvideErrorMetadata>(sent: Sent<T, E>, missing: &str, what: &str) -> Answer<T> {
    answer(sent, what, &[(missing, Meaning::Settled)])
}

/// A Create (or an attach, an authorization) where `exists` says it is there already: ours, from an earlier
/// attempt whose answer was lost, so it is not an error and the next Observe adopts it. The output, or None
/// where it existed.
pub fn adopted<T, E: ProvideErrorMetadata>(sent: Sent<T, E>, exists: &str, what: &str) -> Answer<T> {
    answer(sent, what, &[(exists, Meaning::Settled)])
}

/// A Delete (or a detach, a release) where `missing` says it is gone already, which is what it was for.
pub fn gone<T, E: ProvideErrorMetadata>(sent: Sent<T, E>, missing: &str, what: &str) -> Done {
    answer(sent, what, &[(missing, Meaning::Settled)]).map(drop)
}

/// A Delete where `missing` says it is gone already and `held` that something still holds it (Waiting, `why`).
pub fn gone_unless_held<T, E: ProvideErrorMetadata>(
    sent: Sent<T, E>,
    [missing, held]: [&str; 2],
    why: String,
    what: &str,
) -> Done {
    let meanings = [(missing, Meaning::Settled), (held, Meaning::Wait(why))];
    answer(sent, what, &meanings).map(drop)
}

/// How a Create of something that lives on an EKS cluster (an add-on, a pod identity association) ends, the
/// same for every such kind: already there (ours, from an earlier attempt whose answer was lost: Observe adopts
/// it) is success; no such cluster is Waiting on `spec.forProvider.clusterName`; a parameter EKS refuses is
/// Rejected naming `fields`; anything else is classified. `what` names the resource ("EKS add-on coredns").
pub fn created_on_cluster<T, E: ProvideErrorMetadata>(
    result: Sent<T, E>,
    cluster: &str,
    fields: &str,
    what: &str,
) -> Done {
    let result = match result {
        Err(e) if is_code(&e, "InvalidParameterException") => {
            let why = classify(&format!("EKS refused the {what}"), &e);
            return Err(ExternalError::Rejected(format!("{fields}: {why}")));
        }
        other => other,
    };
    let no_cluster = format!("spec.forProvider.clusterName: EKS cluster {cluster} does not exist yet");
    let meanings = [(IN_USE, Meaning::Settled), (NOT_FOUND, Meaning::Wait(no_cluster))];
    answer(result, &format!("cannot create {what}"), &meanings).map(drop)
}

/// Attaches or detaches a list one item at a time, in order: `settled` is the code saying an item needs nothing
/// (attached before, detached already); the first other error stops the loop, classified as `what(item)`.
pub async fn one_by_one<'i, I, T, E, Fut>(
    items: impl IntoIterator<Item = &'i I>,
    settled: Option<&str>,
    what: impl Fn(&I) -> String,
    mut call: impl FnMut(&'i I) -> Fut,
) -> Done
where
    I: ?Sized + 'i,
    E: ProvideErrorMetadata,
    Fut: Future<Output = Sent<T, E>>,
{
    let meanings: Vec<(&str, Meaning)> = settled.into_iter().map(|c| (c, Meaning::Settled)).collect();
    for item in items {
        answer(call(item).await, &what(item), &meanings)?;
    }
    Ok(())
}

/// The health issues AWS reports on an add-on or a node group, (code, message) each, as "<code>: <message>".
pub fn health_issues<'a>(
    issues: impl IntoIterator<Item = (Option<&'a str>, Option<&'a str>)>,
) -> Vec<String> {
    issues
        .into_iter()
        .map(|(code, message)| format!("{}: {}", code.unwrap_or("Unknown"), message.unwrap_or("")))
        .collect()
}
