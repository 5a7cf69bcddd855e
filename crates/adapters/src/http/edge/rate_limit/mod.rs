//! Rate limiting (C9) at the HTTP edge, decided here alone: the settings
//! and the admission that spends a client's budget, called by
//! [the edge](super) right before routing (`limiter.rs`); who the client is
//! (`client.rs`); the standard `RateLimit-*` headers (`headers.rs`).
//!
//! The budget itself is the domain's [`RateLimiter`] (GCRA over a store: in
//! this process, or in Redis shared by every instance). GCRA has no fixed
//! window: a fresh client may send `max` at once, then one request per
//! `window / max`. (Express' fixed window instead resets the whole budget at
//! the end of each window; GCRA has no such cliff, which is why
//! `RateLimit-Reset` here means "seconds until the full budget is back".)
//!
//! actix-governor, which this replaced, keeps its budgets in a
//! map of its own: it can neither share them across instances nor bound how
//! many clients it tracks, both of which C9 requires.

mod client;
mod headers;
mod limiter;

pub use limiter::RateLimitSettings;
pub(crate) use limiter::{Admission, Limiter};
