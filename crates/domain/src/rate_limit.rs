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
//!
//! - [`gcra`]: the arithmetic, [`Gcra`], [`Spent`], [`Verdict`];
//! - [`store`]: the port, [`RateLimitStore`], and [`RateLimitStoreError`];
//! - [`limiter`]: the use case, [`RateLimiter`].

pub mod gcra;
pub mod limiter;
pub mod store;

pub use gcra::{Gcra, Spent, Verdict};
pub use limiter::RateLimiter;
#[cfg(any(test, feature = "mocks"))]
pub use store::MockRateLimitStore;
pub use store::{RateLimitStore, RateLimitStoreError};
