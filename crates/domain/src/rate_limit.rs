//! Rate limiting (C9): each client has a budget of `limit` requests that
//! refills continuously, one request every `window / limit` (GCRA, the
//! generic cell rate algorithm that actix-governor and governor implement).
//!
//! GCRA keeps one number per client, the *theoretical arrival time* (TAT):
//! the moment at which the client's budget would be full again. A request at
//! `now` is allowed when `TAT - now` is within the burst tolerance
//! `(limit - 1) × period`; it then moves the TAT one period further. So a fresh
//! client may send `limit` requests at once, then one per period. Because the
//! state is one number, a store that can read-modify-write one key atomically
//! can hold it: an in-process map, or Redis (one Lua script per request,
//! shared by every instance).
//!
//! The domain holds the arithmetic ([`Gcra`]), the port stores implement
//! ([`RateLimitStore`]) and the use case ([`RateLimiter`]): a shared store when
//! one is configured, the local one whenever the shared one fails, so an
//! outage never turns limiting off.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

/// The budget: `limit` requests, one more every `period`.
///
/// ```
/// use std::num::NonZeroU32;
/// use std::time::Duration;
/// use items_domain::rate_limit::Gcra;
///
/// let gcra = Gcra::new(NonZeroU32::new(100).unwrap(), Duration::from_secs(900));
/// assert_eq!(gcra.period(), Duration::from_secs(9));
/// assert_eq!(gcra.tolerance(), Duration::from_secs(9 * 99));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    limit: NonZeroU32,
    period: Duration,
}

/// What a store answers for one request: whether it was allowed, and how
/// long until the client's budget is full again (`TAT - now`, after the
/// request when it was allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spent {
    pub allowed: bool,
    pub until_full: Duration,
}

/// What the limiter decided, in the terms of the `RateLimit-*` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Served; `remaining` requests are left right now.
    Allowed { remaining: u32, reset: Duration },
    /// Refused; one request is allowed again after `retry_after`.
    Refused {
        retry_after: Duration,
        reset: Duration,
    },
}

impl Gcra {
    /// `limit` requests per `window`. The period is at least a microsecond,
    /// the resolution of the Redis store's clock.
    pub fn new(limit: NonZeroU32, window: Duration) -> Self {
        let period = (window / limit.get()).max(Duration::from_micros(1));
        Self { limit, period }
    }

    /// Requests per window.
    pub fn limit(&self) -> u32 {
        self.limit.get()
    }

    /// How often one request's worth of budget comes back.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// How far ahead of `now` the TAT may be for a request to pass: the
    /// other `limit - 1` requests of a full burst.
    pub fn tolerance(&self) -> Duration {
        self.period * (self.limit.get() - 1)
    }

    /// One GCRA step on a clock counted in nanoseconds: `tat` is the stored
    /// TAT (`None` for a client not seen or forgotten). Returns the answer
    /// and, when the request was allowed, the TAT to store.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// use std::time::Duration;
    /// use items_domain::{Gcra, Verdict};
    ///
    /// // 2 requests per second: a fresh client may send both at once...
    /// let gcra = Gcra::new(NonZeroU32::new(2).unwrap(), Duration::from_secs(1));
    /// let (first, tat) = gcra.spend(None, 0);
    /// let (second, tat) = gcra.spend(tat, 0);
    /// let (third, _) = gcra.spend(tat, 0);
    /// assert!(first.allowed && second.allowed && !third.allowed);
    /// // ...then one more every half second.
    /// assert_eq!(
    ///     gcra.verdict(third),
    ///     Verdict::Refused {
    ///         retry_after: Duration::from_millis(500),
    ///         reset: Duration::from_secs(1),
    ///     }
    /// );
    /// ```
    pub fn spend(&self, tat: Option<u64>, now: u64) -> (Spent, Option<u64>) {
        let tat = tat.map_or(now, |tat| tat.max(now));
        let ahead = tat - now;
        if u128::from(ahead) > self.tolerance().as_nanos() {
            let spent = Spent {
                allowed: false,
                until_full: Duration::from_nanos(ahead),
            };
            return (spent, None);
        }
        let period = u64::try_from(self.period.as_nanos()).unwrap_or(u64::MAX);
        let next = tat.saturating_add(period);
        let spent = Spent {
            allowed: true,
            until_full: Duration::from_nanos(next - now),
        };
        (spent, Some(next))
    }

    /// The verdict a store's answer means for the client.
    pub fn verdict(&self, spent: Spent) -> Verdict {
        if spent.allowed {
            // Each period of `until_full` is one request not yet refilled.
            let owed = spent.until_full.as_nanos().div_ceil(self.period.as_nanos());
            let remaining = u128::from(self.limit.get()).saturating_sub(owed);
            Verdict::Allowed {
                remaining: u32::try_from(remaining).unwrap_or(0),
                reset: spent.until_full,
            }
        } else {
            Verdict::Refused {
                retry_after: spent.until_full.saturating_sub(self.tolerance()),
                reset: spent.until_full,
            }
        }
    }
}

/// Where budgets are kept.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait RateLimitStore: Send + Sync {
    /// Spends one request of `client`'s budget under `gcra`: reads the TAT,
    /// applies [`Gcra::spend`] and stores the new TAT, atomically (two
    /// concurrent requests of one client MUST NOT both see the old TAT).
    ///
    /// # Errors
    /// MUST return [`RateLimitStoreError`] when the store cannot answer now
    /// (unreachable, or slower than it may be); nothing is spent.
    async fn spend(&self, client: IpAddr, gcra: Gcra) -> Result<Spent, RateLimitStoreError>;
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
///     async fn spend(&self, client: IpAddr, gcra: Gcra) -> Result<Spent, RateLimitStoreError> {
///         let now = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
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
/// let first = limiter.check(client, once_a_minute).await?;
/// assert!(matches!(first, Verdict::Allowed { remaining: 0, .. }));
/// let second = limiter.check(client, once_a_minute).await?;
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

    /// Spends one request of `client`'s budget. The shared store's failure
    /// is not the client's: the request is then counted in the local budget,
    /// so limiting goes on, per instance, through an outage (C9).
    ///
    /// # Errors
    /// Only when the local store fails too.
    pub async fn check(&self, client: IpAddr, gcra: Gcra) -> Result<Verdict, RateLimitStoreError> {
        if let Some(shared) = &self.shared
            && let Ok(spent) = shared.spend(client, gcra).await
        {
            return Ok(gcra.verdict(spent));
        }
        let spent = self.local.spend(client, gcra).await?;
        Ok(gcra.verdict(spent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn gcra(limit: u32, window_secs: u64) -> Gcra {
        Gcra::new(
            NonZeroU32::new(limit).expect("non-zero"),
            Duration::from_secs(window_secs),
        )
    }

    fn client() -> IpAddr {
        IpAddr::from([203, 0, 113, 7])
    }

    #[test]
    fn a_fresh_client_may_send_the_whole_budget_at_once_then_waits_one_period_c9() {
        let gcra = gcra(3, 30);
        let mut tat = None;
        for remaining in [2, 1, 0] {
            let (spent, next) = gcra.spend(tat, 0);
            assert_eq!(
                gcra.verdict(spent),
                Verdict::Allowed {
                    remaining,
                    reset: Duration::from_secs(10 * u64::from(3 - remaining)),
                }
            );
            tat = next;
        }
        let (spent, next) = gcra.spend(tat, SECOND);
        assert_eq!(next, None);
        assert_eq!(
            gcra.verdict(spent),
            Verdict::Refused {
                retry_after: Duration::from_secs(9),
                reset: Duration::from_secs(29),
            }
        );
        // One period after the burst, exactly one request is back.
        let (spent, _) = gcra.spend(tat, 10 * SECOND);
        assert_eq!(
            gcra.verdict(spent),
            Verdict::Allowed {
                remaining: 0,
                reset: Duration::from_secs(30),
            }
        );
    }

    #[test]
    fn a_budget_left_alone_is_full_again_after_the_window_c9() {
        let gcra = gcra(2, 20);
        let (_, tat) = gcra.spend(None, 0);
        let (spent, _) = gcra.spend(tat, 100 * SECOND);
        assert_eq!(
            gcra.verdict(spent),
            Verdict::Allowed {
                remaining: 1,
                reset: Duration::from_secs(10),
            }
        );
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
            .return_once(|_, _| Ok(spent(false)));
        let mut local = MockRateLimitStore::new();
        local.expect_spend().never();
        let limiter = RateLimiter::shared(Arc::new(shared), Arc::new(local));

        let verdict = limiter.check(client(), gcra(2, 2)).await.unwrap();
        assert!(matches!(verdict, Verdict::Refused { .. }));
    }

    #[tokio::test]
    async fn a_failing_shared_store_falls_back_to_the_local_budget_c9() {
        let mut shared = MockRateLimitStore::new();
        shared
            .expect_spend()
            .times(1)
            .return_once(|_, _| Err(RateLimitStoreError::new("timed out")));
        let mut local = MockRateLimitStore::new();
        local
            .expect_spend()
            .times(1)
            .return_once(|_, _| Ok(spent(true)));
        let limiter = RateLimiter::shared(Arc::new(shared), Arc::new(local));

        let verdict = limiter.check(client(), gcra(2, 2)).await.unwrap();
        assert!(matches!(verdict, Verdict::Allowed { .. }));
    }
}
