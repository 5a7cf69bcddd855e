//! The arithmetic of rate limiting (C9): [`Gcra`], a budget of `limit`
//! requests refilled one every `period`, one step of the algorithm on a
//! stored TAT, and what the step means for a client ([`Spent`],
//! [`Verdict`]). No clock and no store: those are the callers'.

use std::num::NonZeroU32;
use std::time::Duration;

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
///
/// The period is kept in nanoseconds, worked out once: a step is then a
/// few `u64` operations and one hardware division, where working on
/// `Duration`s multiplied the tolerance out with overflow checks and
/// divided in `u128` (a library call) on every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    limit: NonZeroU32,
    /// Nanoseconds between two requests at the sustained rate.
    period: u64,
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
        let period = nanos((window / limit.get()).max(Duration::from_micros(1)));
        Self { limit, period }
    }

    /// Requests per window.
    pub fn limit(&self) -> u32 {
        self.limit.get()
    }

    /// How often one request's worth of budget comes back.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// How far ahead of `now` the TAT may be for a request to pass: the
    /// other `limit - 1` requests of a full burst.
    pub fn tolerance(&self) -> Duration {
        Duration::from_nanos(self.tolerance_nanos())
    }

    /// [`Gcra::tolerance`] in nanoseconds.
    fn tolerance_nanos(&self) -> u64 {
        self.period.saturating_mul(u64::from(self.limit.get() - 1))
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
        if ahead > self.tolerance_nanos() {
            let spent = Spent {
                allowed: false,
                until_full: Duration::from_nanos(ahead),
            };
            return (spent, None);
        }
        let next = tat.saturating_add(self.period);
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
            // (`period` is at least a microsecond: never a division by zero.)
            let owed = nanos(spent.until_full).div_ceil(self.period);
            let remaining = u64::from(self.limit.get()).saturating_sub(owed);
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

/// A duration in whole nanoseconds; beyond `u64` (584 years), the most.
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
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
}
