//! The failures of the storage ports: the store could not answer, and nothing
//! was written; or a write was sent for commit and whether it was applied
//! could not be learned.

/// A store operation failed. Implementations keep the cause for logs; it is
/// never shown to a client.
///
/// The cause is the error's [`source`](std::error::Error::source), not part
/// of its message, so whoever logs the whole chain prints it once:
///
/// ```
/// use std::error::Error;
/// use items_domain::RepositoryError;
///
/// let error = RepositoryError::unavailable("connection refused");
/// assert_eq!(error.to_string(), "the repository is unavailable");
/// assert_eq!(error.source().unwrap().to_string(), "connection refused");
/// assert!(!error.is_outcome_unknown());
/// ```
#[derive(Debug, thiserror::Error)]
pub enum RepositoryError {
    /// The backing store is unreachable or timed out, and nothing of the
    /// operation was written: retrying later is safe (C12's 503).
    #[error("the repository is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A write was sent for commit, its answer was lost, and its fate could
    /// not be learned from the store: it may or may not have been applied
    /// (C12's 504). A store returns this only when it cannot tell, never for
    /// a write it knows was not applied.
    #[error("the repository could not tell whether the write was applied")]
    OutcomeUnknown(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl RepositoryError {
    /// The store is unreachable, for this `cause` (an error or a message):
    /// nothing was written.
    pub fn unavailable(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Unavailable(cause.into())
    }

    /// The write may have been applied, for this `cause`.
    pub fn outcome_unknown(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::OutcomeUnknown(cause.into())
    }

    /// Whether the write this error answers may have been applied.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Self::OutcomeUnknown(_))
    }

    /// The same kind of failure for another cause: a store that answers many
    /// callers for one failure (a batch) gives each the batch's kind.
    #[must_use]
    pub fn with_cause(&self, cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        match self {
            Self::Unavailable(_) => Self::unavailable(cause),
            Self::OutcomeUnknown(_) => Self::outcome_unknown(cause),
        }
    }
}
