//! The error every composer, the scheduler and the stacks report bad input with. It lives below all of them so
//! none has to import another to say what is wrong.

use crate::wire::DecodeError;

/// Why a composite could not be composed: the field path at fault and what is wrong with it. Becomes a FATAL
/// result, so the message has to be enough for a user to fix their manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ComposeError {
    pub path: String,
    pub reason: String,
}

impl ComposeError {
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl From<DecodeError> for ComposeError {
    fn from(e: DecodeError) -> Self {
        Self {
            path: e.path,
            reason: e.message,
        }
    }
}
