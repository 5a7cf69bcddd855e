//! The `RateLimit-*` headers (C9), draft-6 as express-rate-limit sends
//! them, never `X-RateLimit-*`: their names, the values a policy never
//! changes made once, and numbers written without an allocation.

use std::num::NonZeroU32;
use std::sync::LazyLock;
use std::time::Duration;

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_web::web::{Bytes, BytesMut};

static POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
static LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
static REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
static RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

/// The headers of one policy: its budget and window, made once, not per
/// request.
#[derive(Debug, Clone)]
pub(super) struct RateLimitHeaders {
    policy: HeaderValue,
    limit: HeaderValue,
}

impl RateLimitHeaders {
    pub(super) fn new(limit: NonZeroU32, window: Duration) -> Self {
        Self {
            policy: policy_header(limit.get(), window),
            limit: HeaderValue::from(limit.get()),
        }
    }

    /// Adds the four headers. The limiter is their only writer, so they are
    /// appended: `insert` would move out a replaced value, about 90
    /// instructions a header (callgrind, `GET /`).
    pub(super) fn add(&self, headers: &mut HeaderMap, remaining: u32, reset: Duration) {
        headers.append(POLICY.clone(), self.policy.clone());
        headers.append(LIMIT.clone(), self.limit.clone());
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

/// Whole seconds, rounded up: `RateLimit-Reset`, and `Retry-After`.
pub(super) fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
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
