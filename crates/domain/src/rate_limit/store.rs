//! The port where budgets are kept, [`RateLimitStore`], and its one error,
//! [`RateLimitStoreError`]: the in-process map and Redis implement it.

use std::net::IpAddr;
use std::time::Instant;

use async_trait::async_trait;

use super::gcra::{Gcra, Spent};

/// Where budgets are kept.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait RateLimitStore: Send + Sync {
    /// Spends one request of `client`'s budget under `gcra`: reads the TAT,
    /// applies [`Gcra::spend`] and stores the new TAT, atomically (two
    /// concurrent requests of one client MUST NOT both see the old TAT).
    ///
    /// `arrived` is when the request arrived, on this process's monotonic
    /// clock. A store in this process MUST measure budgets on it: the caller
    /// has read the clock already, and a read costs ~25 ns on the project's
    /// machines, a few percent of a whole request. A store shared by several
    /// processes MUST use a clock of its own, the same for all of them.
    ///
    /// # Errors
    /// MUST return [`RateLimitStoreError`] when the store cannot answer now
    /// (unreachable, or slower than it may be); nothing is spent.
    async fn spend(
        &self,
        client: IpAddr,
        gcra: Gcra,
        arrived: Instant,
    ) -> Result<Spent, RateLimitStoreError>;
}

/// A [`RateLimitStore`] could not answer now; nothing was spent. The cause
/// (its [`source`](std::error::Error::source)) is for the logs.
///
/// ```
/// use std::error::Error;
/// use items_domain::RateLimitStoreError;
///
/// let error = RateLimitStoreError::new("timed out");
/// assert_eq!(error.to_string(), "the rate-limit store did not answer");
/// assert_eq!(error.source().unwrap().to_string(), "timed out");
/// ```
#[derive(Debug, thiserror::Error)]
#[error("the rate-limit store did not answer")]
pub struct RateLimitStoreError(#[source] Box<dyn std::error::Error + Send + Sync>);

impl RateLimitStoreError {
    /// The store did not answer, for this `cause` (an error or a message).
    pub fn new(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(cause.into())
    }
}
