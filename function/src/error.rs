//! The error every composer, the scheduler and the stacks report bad input with. It lives below all of them so
//! none has to import another to say what is wrong.

use std::{error::Error, sync::Arc};

use crate::wire::DecodeError;

/// Why a composite could not be composed: the field path at fault and what is wrong with it. Becomes a FATAL
/// result, so the message has to be enough for a user to fix their manifest.
///
/// An error found underneath another (a required InferenceClass's own field, a decoding failure) is kept as the
/// `source`, not flattened into the reason: [`ComposeError::chain`] is what `dispatch` reports, so the user still
/// reads the whole story, and code in between can still tell what the cause was.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ComposeError {
    pub path: String,
    pub reason: String,
    #[source]
    pub source: Option<Arc<dyn Error + Send + Sync>>,
}

impl ComposeError {
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            reason: reason.into(),
            source: None,
        }
    }

    /// An error at `path` caused by `source`.
    pub fn caused_by(
        path: impl Into<String>,
        reason: impl Into<String>,
        source: impl Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            source: Some(Arc::new(source)),
            ..Self::new(path, reason)
        }
    }

    /// The error and every cause under it, outermost first: `path: reason: cause: its cause`.
    pub fn chain(&self) -> String {
        let mut out = self.to_string();
        let mut next = self.source();
        while let Some(cause) = next {
            out.push_str(": ");
            out.push_str(&cause.to_string());
            next = cause.source();
        }
        out
    }
}

/// Two errors are the same when they say the same thing, causes included.
impl PartialEq for ComposeError {
    fn eq(&self, other: &Self) -> bool {
        self.chain() == other.chain()
    }
}

impl Eq for ComposeError {}

impl From<DecodeError> for ComposeError {
    fn from(e: DecodeError) -> Self {
        Self::new(e.path, e.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_reads_outermost_first_and_equality_counts_the_causes() {
        let inner = ComposeError::new("spec.devices[0].count", "value is less than the minimum of 1");
        let outer = ComposeError::caused_by(
            "spec.nodePools[0].className",
            "InferenceClass \"x\" is invalid",
            inner,
        );
        assert_eq!(
            outer.chain(),
            "spec.nodePools[0].className: InferenceClass \"x\" is invalid: spec.devices[0].count: value is less \
             than the minimum of 1"
        );
        assert_eq!(
            outer.to_string(),
            "spec.nodePools[0].className: InferenceClass \"x\" is invalid"
        );
        assert_ne!(
            outer,
            ComposeError::new("spec.nodePools[0].className", "InferenceClass \"x\" is invalid")
        );
    }
}
