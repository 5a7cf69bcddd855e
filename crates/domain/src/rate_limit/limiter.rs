//! The use case of rate limiting (C9), [`RateLimiter`]: a shared store
//! when one is configured, the local one whenever the shared one fails, so
//! an outage never turns limiting off.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use super::gcra::{Gcra, Verdict};
use super::store::{RateLimitStore, RateLimitStoreError};

/// The limiter: one budget per client, shared by every instance when a
/// shared store is configured, local otherwise and whenever the shared store
/// fails.
///
/// ```
/// use std::collections::HashMap;
/// use std::net::IpAddr;
/// use std::num::NonZeroU32;
/// use std::sync::{Arc, Mutex};
/// use std::time::{Duration, Instant};
///
/// use async_trait::async_trait;
/// use items_domain::{Gcra, RateLimitStore, RateLimitStoreError, RateLimiter, Spent, Verdict};
///
/// /// Each client's TAT in a map, on a clock that starts with the store.
/// struct Local {
///     started: Instant,
///     tats: Mutex<HashMap<IpAddr, u64>>,
/// }
///
/// #[async_trait]
/// impl RateLimitStore for Local {
///     async fn spend(
///         &self,
///         client: IpAddr,
///         gcra: Gcra,
///         arrived: Instant,
///     ) -> Result<Spent, RateLimitStoreError> {
///         let since = arrived.saturating_duration_since(self.started);
///         let now = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
///         let mut tats = self.tats.lock().unwrap();
///         let (spent, tat) = gcra.spend(tats.get(&client).copied(), now);
///         if let Some(tat) = tat {
///             tats.insert(client, tat);
///         }
///         Ok(spent)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), RateLimitStoreError> {
/// let store = Local { started: Instant::now(), tats: Mutex::default() };
/// let limiter = RateLimiter::local(Arc::new(store));
/// let once_a_minute = Gcra::new(NonZeroU32::MIN, Duration::from_secs(60));
/// let client = IpAddr::from([203, 0, 113, 7]);
///
/// let first = limiter.check(client, once_a_minute, Instant::now()).await?;
/// assert!(matches!(first, Verdict::Allowed { remaining: 0, .. }));
/// let second = limiter.check(client, once_a_minute, Instant::now()).await?;
/// assert!(matches!(second, Verdict::Refused { .. }));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RateLimiter {
    local: Arc<dyn RateLimitStore>,
    shared: Option<Arc<dyn RateLimitStore>>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("shared", &self.shared.is_some())
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// Budgets in `local` only.
    pub fn local(local: Arc<dyn RateLimitStore>) -> Self {
        Self {
            local,
            shared: None,
        }
    }

    /// Budgets in `shared`, falling back to `local` request by request.
    pub fn shared(shared: Arc<dyn RateLimitStore>, local: Arc<dyn RateLimitStore>) -> Self {
        Self {
            local,
            shared: Some(shared),
        }
    }

    /// Spends one request of `client`'s budget, for a request that
    /// `arrived` then (see [`RateLimitStore::spend`]). The shared store's
    /// failure is not the client's: the request is then counted in the local
    /// budget, so limiting goes on, per instance, through an outage (C9).
    ///
    /// # Errors
    /// Only when the local store fails too.
    pub async fn check(
        &self,
        client: IpAddr,
        gcra: Gcra,
        arrived: Instant,
    ) -> Result<Verdict, RateLimitStoreError> {
        if let Some(shared) = &self.shared
            && let Ok(spent) = shared.spend(client, gcra, arrived).await
        {
            return Ok(gcra.verdict(spent));
        }
        let spent = self.local.spend(client, gcra, arrived).await?;
        Ok(gcra.verdict(spent))
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;
    use std::time::Duration;

    use super::*;
    use crate::rate_limit::gcra::Spent;
    use crate::rate_limit::store::MockRateLimitStore;

    fn gcra(limit: u32, window_secs: u64) -> Gcra {
        Gcra::new(
            NonZeroU32::new(limit).expect("non-zero"),
            Duration::from_secs(window_secs),
        )
    }

    fn client() -> IpAddr {
        IpAddr::from([203, 0, 113, 7])
    }

    /// One request of [`client`] under a budget of two per two seconds.
    async fn check(limiter: &RateLimiter) -> Result<Verdict, RateLimitStoreError> {
        limiter.check(client(), gcra(2, 2), Instant::now()).await
    }

    fn spent(allowed: bool) -> Spent {
        Spent {
            allowed,
            until_full: Duration::from_secs(1),
        }
    }

    #[tokio::test]
    async fn the_shared_store_decides_when_it_answers_c9() {
        let mut shared = MockRateLimitStore::new();
        shared
            .expect_spend()
            .times(1)
            .return_once(|_, _, _| Ok(spent(false)));
        let mut local = MockRateLimitStore::new();
        local.expect_spend().never();
        let limiter = RateLimiter::shared(Arc::new(shared), Arc::new(local));

        let verdict = check(&limiter).await.unwrap();
        assert!(matches!(verdict, Verdict::Refused { .. }));
    }

    #[tokio::test]
    async fn a_failing_shared_store_falls_back_to_the_local_budget_c9() {
        let mut shared = MockRateLimitStore::new();
        shared
            .expect_spend()
            .times(1)
            .return_once(|_, _, _| Err(RateLimitStoreError::new("timed out")));
        let mut local = MockRateLimitStore::new();
        local
            .expect_spend()
            .times(1)
            .return_once(|_, _, _| Ok(spent(true)));
        let limiter = RateLimiter::shared(Arc::new(shared), Arc::new(local));

        let verdict = check(&limiter).await.unwrap();
        assert!(matches!(verdict, Verdict::Allowed { .. }));
    }

    #[tokio::test]
    async fn a_failing_local_store_is_the_checks_error() {
        let mut local = MockRateLimitStore::new();
        local
            .expect_spend()
            .times(1)
            .return_once(|_, _, _| Err(RateLimitStoreError::new("broken")));
        let limiter = RateLimiter::local(Arc::new(local));

        assert!(check(&limiter).await.is_err());
    }
}
