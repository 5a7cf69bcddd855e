//! Rate limiting (C9) at the HTTP edge: the settings, the admission that
//! spends a client's budget (called by [the edge](super), right
//! before routing), and the standard `RateLimit-*` headers (never
//! `X-RateLimit-*`). Who the client is comes from `client.rs`.
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

use std::num::NonZeroU32;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use actix_web::dev::ServiceRequest;
use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_web::web::{Bytes, BytesMut};
use actix_web::{HttpResponse, ResponseError};
use items_domain::{Gcra, RateLimiter, Verdict, defaults};

use crate::http::metrics::RATE_LIMIT_REFUSALS;
use crate::http::support::ApiError;
use crate::report::ErrorChain;

mod client;

use client::client_key;

/// The limiter's settings (C1, C9).
#[derive(Debug, Clone, Copy)]
pub struct RateLimitSettings {
    /// Requests per client per window; `None` turns limiting off (`RATE_LIMIT_MAX=0`).
    pub max: Option<NonZeroU32>,
    pub window: Duration,
    /// How many proxies of ours stand in front (`TRUST_PROXY`): the client is
    /// the address that many entries from the right of `X-Forwarded-For`
    /// (or `Forwarded: for=`); `0` keys on the peer address.
    pub trust_proxy: u32,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        Self {
            max: NonZeroU32::new(defaults::RATE_LIMIT_MAX),
            window: Duration::from_millis(defaults::RATE_LIMIT_WINDOW_MS),
            trust_proxy: defaults::TRUST_PROXY,
        }
    }
}

/// What the headers announce: the budget, the window and the refill period.
/// The constant header values, and the names, are made once, not per
/// request.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    gcra: Gcra,
    trust_proxy: u32,
    policy_header: HeaderValue,
    limit_header: HeaderValue,
}

static POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
static LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
static REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
static RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

impl Policy {
    pub(crate) fn new(settings: RateLimitSettings) -> Option<Self> {
        let limit = settings.max?;
        Some(Self {
            gcra: Gcra::new(limit, settings.window),
            trust_proxy: settings.trust_proxy,
            policy_header: policy_header(limit.get(), settings.window),
            limit_header: HeaderValue::from(limit.get()),
        })
    }

    /// Adds the four headers. The limiter is their only writer, so they are
    /// appended: `insert` would move out a replaced value, about 90
    /// instructions a header (callgrind, `GET /`).
    fn add_headers(&self, headers: &mut HeaderMap, remaining: u32, reset: Duration) {
        headers.append(POLICY.clone(), self.policy_header.clone());
        headers.append(LIMIT.clone(), self.limit_header.clone());
        headers.append(REMAINING.clone(), number(u64::from(remaining)));
        headers.append(RESET.clone(), number(ceil_secs(reset)));
    }
}

/// A number as a header value. `HeaderValue::from(u64)` allocates a buffer
/// per value. A number below 1,000 (every `RateLimit-Reset` of a window up
/// to 16 minutes, every `RateLimit-Remaining` of a budget below 1,000, such
/// as the default 100) is a slice of one static string: nothing to
/// allocate, count or free. A larger one is cut from a block of this
/// thread's, one allocation per few hundred values; it keeps its block
/// alive until the response is written.
fn number(value: u64) -> HeaderValue {
    small_number(value).unwrap_or_else(|| large_number(value))
}

/// Numbers below 1,000, as [`number`] says.
fn small_number(value: u64) -> Option<HeaderValue> {
    const SMALL: usize = 1000;
    static DIGITS: LazyLock<String> = LazyLock::new(|| (0..SMALL).map(|n| n.to_string()).collect());
    let n = usize::try_from(value).ok().filter(|n| *n < SMALL)?;
    // 0–9 take one digit each, 10–99 two, 100–999 three.
    let (start, len) = match n {
        0..10 => (n, 1),
        10..100 => (10 + (n - 10) * 2, 2),
        _ => (190 + (n - 100) * 3, 3),
    };
    let digits: &'static str = DIGITS.get(start..start + len)?;
    HeaderValue::from_maybe_shared(Bytes::from_static(digits.as_bytes())).ok()
}

fn large_number(value: u64) -> HeaderValue {
    const BLOCK: usize = 4096;
    thread_local! {
        static DIGITS: std::cell::RefCell<BytesMut> = std::cell::RefCell::new(BytesMut::new());
    }
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(value).as_bytes();
    DIGITS
        .try_with(|block| {
            let mut block = block.try_borrow_mut().ok()?;
            if block.capacity() < digits.len() {
                *block = BytesMut::with_capacity(BLOCK);
            }
            block.extend_from_slice(digits);
            HeaderValue::from_maybe_shared(block.split().freeze()).ok()
        })
        .ok()
        .flatten()
        .unwrap_or_else(|| HeaderValue::from(value))
}

/// `RateLimit-Policy: 100;w=900`, the window in whole seconds, rounded up
/// like express-rate-limit's draft-6 headers.
fn policy_header(limit: u32, window: Duration) -> HeaderValue {
    HeaderValue::try_from(format!("{limit};w={}", ceil_secs(window)))
        .unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

/// The limiter of one server: its policy and the budgets, shared by every
/// worker. `None` policy: limiting is off.
#[derive(Debug, Clone)]
pub(crate) struct Limiter {
    policy: Option<Policy>,
    budgets: RateLimiter,
}

impl Limiter {
    pub(crate) fn new(settings: RateLimitSettings, budgets: RateLimiter) -> Self {
        Self {
            policy: Policy::new(settings),
            budgets,
        }
    }
}

/// What the limiter decided for one request.
pub(crate) enum Admission<'a> {
    /// Limiting is off, or no budget could be read: served, no headers.
    Unlimited,
    /// Served, with the `RateLimit-*` headers of what is left.
    Allowed {
        policy: &'a Policy,
        remaining: u32,
        reset: Duration,
    },
    /// Refused: the 429 problem, `Retry-After` rounded *up* (never `0`)
    /// and the same headers. Boxed: the edge holds an admission across the
    /// routes' `await`, and inline this rare answer made every request's
    /// future 100 bytes larger.
    Refused(Box<HttpResponse>),
}

impl Admission<'_> {
    /// Adds the `RateLimit-*` headers to the response of a request served.
    pub(crate) fn mark(&self, headers: &mut HeaderMap) {
        if let Admission::Allowed {
            policy,
            remaining,
            reset,
        } = self
        {
            policy.add_headers(headers, *remaining, *reset);
        }
    }
}

impl Limiter {
    /// Spends one request of the client's budget, for a request that
    /// `arrived` then (the edge's clock reading, so the budget needs none of
    /// its own). Called by the edge right before routing, after preflights
    /// were answered (so they are never counted).
    pub(crate) async fn admit(&self, request: &ServiceRequest, arrived: Instant) -> Admission<'_> {
        let Some(policy) = &self.policy else {
            return Admission::Unlimited;
        };
        let client = client_key(request, policy.trust_proxy);
        match self.budgets.check(client, policy.gcra, arrived).await {
            Ok(Verdict::Allowed { remaining, reset }) => Admission::Allowed {
                policy,
                remaining,
                reset,
            },
            Ok(Verdict::Refused { retry_after, reset }) => {
                metrics::counter!(RATE_LIMIT_REFUSALS).increment(1);
                let retry_after_secs = ceil_secs(retry_after).max(1);
                let mut response: HttpResponse =
                    ApiError::TooManyRequests { retry_after_secs }.error_response();
                policy.add_headers(response.headers_mut(), 0, reset);
                Admission::Refused(Box::new(response))
            }
            Err(cause) => {
                // Only the in-process store is left, and it cannot fail;
                // should it ever, serving unlimited beats refusing everyone.
                tracing::error!(error = %ErrorChain(&cause), "no rate-limit budget could be read; request served unlimited");
                Admission::Unlimited
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_header_names_the_budget_and_the_window_in_seconds_c9() {
        assert_eq!(
            policy_header(100, Duration::from_millis(900_000)),
            "100;w=900"
        );
        assert_eq!(policy_header(5, Duration::from_millis(1_500)), "5;w=2");
    }

    #[test]
    fn numbers_are_written_in_decimal_whatever_their_size_c9() {
        for value in [0, 7, 100, 86_400, 999_999_999, u64::MAX] {
            assert_eq!(number(value), value.to_string().as_str());
        }
        let values: Vec<HeaderValue> = (0..10_000).map(number).collect();
        for (value, header) in values.iter().enumerate() {
            assert_eq!(header, value.to_string().as_str());
        }
    }

    #[test]
    fn seconds_are_rounded_up_c9() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(9)), 9);
        assert_eq!(ceil_secs(Duration::from_millis(9_001)), 10);
    }
}
