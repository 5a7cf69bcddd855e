//! The limiter: its settings, and the admission that spends one request
//! of a client's budget and says what the response carries (C9).

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use actix_web::dev::ServiceRequest;
use actix_web::http::header::HeaderMap;
use actix_web::{HttpResponse, ResponseError};
use items_domain::{Gcra, RateLimiter, Verdict, defaults};

use super::client::client_key;
use super::headers::{RateLimitHeaders, ceil_secs};
use crate::http::metrics::RATE_LIMIT_REFUSALS;
use crate::http::support::ApiError;
use crate::report::ErrorChain;

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

/// What the limiter holds of its settings: the budget's arithmetic, how
/// the client is found, and the headers that announce the budget.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    gcra: Gcra,
    trust_proxy: u32,
    headers: RateLimitHeaders,
}

impl Policy {
    fn new(settings: RateLimitSettings) -> Option<Self> {
        let limit = settings.max?;
        Some(Self {
            gcra: Gcra::new(limit, settings.window),
            trust_proxy: settings.trust_proxy,
            headers: RateLimitHeaders::new(limit, settings.window),
        })
    }
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
            policy.headers.add(headers, *remaining, *reset);
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
                policy.headers.add(response.headers_mut(), 0, reset);
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
