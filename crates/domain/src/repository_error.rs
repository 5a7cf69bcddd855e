//! The one failure of the storage ports: the store could not answer.

/// The store could not answer. Implementations keep the cause for logs; it is
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
/// ```
#[derive(Debug, thiserror::Error)]
pub enum RepositoryError {
    /// The backing store is unreachable or timed out; retrying later may work.
    #[error("the repository is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl RepositoryError {
    /// The store is unreachable, for this `cause` (an error or a message).
    pub fn unavailable(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Unavailable(cause.into())
    }
}
