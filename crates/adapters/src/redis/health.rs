//! Whether Redis failed a moment ago: after a failure the store does not ask
//! Redis again for a while, so an outage costs each request nothing, and
//! each change of state is logged once, not once per request (C9).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The store's view of Redis, shared by its callers and its lanes.
#[derive(Debug)]
pub(super) struct Health {
    /// Whether the last attempt failed.
    degraded: AtomicBool,
    /// When Redis may be asked again, in milliseconds since `origin`.
    retry_at_ms: AtomicU64,
    origin: Instant,
    retry_every: Duration,
}

impl Health {
    pub(super) fn new(retry_every: Duration) -> Self {
        Self {
            degraded: AtomicBool::new(false),
            retry_at_ms: AtomicU64::new(0),
            origin: Instant::now(),
            retry_every,
        }
    }

    fn ms(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_millis()).unwrap_or(u64::MAX)
    }

    pub(super) fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
    }

    /// Whether Redis failed so recently that it is not to be asked `now`.
    pub(super) fn wait_before_retry(&self, now: Instant) -> bool {
        self.is_degraded() && self.ms(now) < self.retry_at_ms.load(Ordering::Relaxed)
    }

    /// Redis failed (or was too slow) for `cause`.
    pub(super) fn failed(&self, cause: &str) {
        let retry_at = self.ms(Instant::now()) + self.ms_of(self.retry_every);
        self.retry_at_ms.store(retry_at, Ordering::Relaxed);
        if !self.degraded.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = %cause,
                "Redis does not answer: rate-limit budgets are per instance until it does"
            );
        }
    }

    /// Redis answered.
    pub(super) fn answered(&self) {
        // A load first: the swap's write would otherwise bounce the cache
        // line between threads on every batch of a healthy Redis.
        if self.is_degraded() && self.degraded.swap(false, Ordering::Relaxed) {
            tracing::info!("Redis answers again: rate-limit budgets are shared again");
        }
    }

    fn ms_of(&self, duration: Duration) -> u64 {
        u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
    }
}
