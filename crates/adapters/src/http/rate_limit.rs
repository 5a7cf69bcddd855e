//! Rate limiting (C9) with actix-governor, speaking the standard
//! `RateLimit-*` headers instead of actix-governor's `x-ratelimit-*`.
//!
//! The budget is GCRA, as actix-governor does it: a bucket of `max` requests
//! per client that refills one request every `window / max`. A fresh client
//! may send `max` at once; after that one request per period. (Express'
//! fixed window instead resets the whole budget at the end of each window;
//! GCRA has no such cliff, which is why `RateLimit-Reset` here means "seconds
//! until the full budget is back".)
//!
//! Division of labour:
//! - [`ClientIp`] is the key (peer address, or the proxy's word for it with
//!   `TRUST_PROXY`) and builds the 429 itself, where the exact wait is known:
//!   a problem body, `Retry-After` rounded *up* (actix-governor floors it,
//!   which can say `0`) and the `RateLimit-*` headers;
//! - [`standard_headers`], registered just outside the limiter, swaps the
//!   `x-ratelimit-*` headers of allowed responses for `RateLimit-*`, from the
//!   `GovernorResult` actix-governor leaves in the request's extensions.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::time::Duration;

use actix_governor::governor::NotUntil;
use actix_governor::governor::clock::{Clock, DefaultClock, QuantaInstant};
use actix_governor::governor::middleware::StateInformationMiddleware;
use actix_governor::{
    Governor, GovernorConfig, GovernorConfigBuilder, GovernorResult, KeyExtractor,
};
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_web::middleware::{Condition, Next};
use actix_web::{HttpMessage, HttpResponse, HttpResponseBuilder, ResponseError};

use super::problem::ApiError;

/// The limiter's settings (C1, C9).
#[derive(Debug, Clone, Copy)]
pub struct RateLimitSettings {
    /// Requests per client per window; `None` turns limiting off (`RATE_LIMIT_MAX=0`).
    pub max: Option<NonZeroU32>,
    pub window: Duration,
    /// Key clients by `Forwarded` / `X-Forwarded-For` rather than the peer.
    pub trust_proxy: bool,
}

/// What the headers announce: the budget, the window and the refill period.
/// The two constant header values are rendered once, not per request.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    limit: u32,
    period: Duration,
    policy_header: HeaderValue,
    limit_header: HeaderValue,
}

impl Policy {
    fn new(limit: u32, window: Duration, period: Duration) -> Self {
        Self {
            limit,
            period,
            policy_header: policy_header(limit, window),
            limit_header: HeaderValue::from(limit),
        }
    }

    fn insert(&self, headers: &mut HeaderMap, remaining: u32, reset: Duration) {
        headers.insert(
            HeaderName::from_static("ratelimit-policy"),
            self.policy_header.clone(),
        );
        headers.insert(
            HeaderName::from_static("ratelimit-limit"),
            self.limit_header.clone(),
        );
        headers.insert(
            HeaderName::from_static("ratelimit-remaining"),
            HeaderValue::from(remaining),
        );
        headers.insert(
            HeaderName::from_static("ratelimit-reset"),
            HeaderValue::from(ceil_secs(reset)),
        );
    }
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

/// The rate-limit key: the client's IP address; IPv6 clients by their /56
/// prefix (one subscriber's usual allocation, and express-rate-limit's default).
#[derive(Debug, Clone)]
pub(crate) struct ClientIp {
    trust_proxy: bool,
    policy: Policy,
}

impl ClientIp {
    fn address(&self, request: &ServiceRequest) -> IpAddr {
        let forwarded = self
            .trust_proxy
            .then(|| {
                request
                    .connection_info()
                    .realip_remote_addr()
                    .and_then(parse_address)
            })
            .flatten();
        // A request with no peer address (never over TCP) shares one key
        // rather than failing: the limiter must not turn into a 500.
        let address = forwarded
            .or_else(|| request.peer_addr().map(|peer| peer.ip()))
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        match address.to_canonical() {
            IpAddr::V6(v6) => {
                let mut octets = v6.octets();
                octets[7..].fill(0);
                IpAddr::from(octets)
            }
            v4 => v4,
        }
    }
}

/// Reads an address as proxies write it: `1.2.3.4`, `1.2.3.4:80`, `::1`,
/// `[::1]:80`, `"[::1]"`; `unknown` or garbage gives `None` (and the peer
/// address is used instead).
fn parse_address(raw: &str) -> Option<IpAddr> {
    let raw = raw.trim().trim_matches('"');
    raw.parse::<IpAddr>()
        .ok()
        .or_else(|| raw.parse::<SocketAddr>().ok().map(|socket| socket.ip()))
        .or_else(|| raw.strip_prefix('[')?.split(']').next()?.parse().ok())
}

impl KeyExtractor for ClientIp {
    type Key = IpAddr;
    type KeyExtractionError = ApiError;

    fn extract(&self, request: &ServiceRequest) -> Result<IpAddr, ApiError> {
        Ok(self.address(request))
    }

    fn exceed_rate_limit_response(
        &self,
        negative: &NotUntil<QuantaInstant>,
        _: HttpResponseBuilder,
    ) -> HttpResponse {
        let wait = negative.wait_time_from(DefaultClock::default().now());
        let retry_after_secs = ceil_secs(wait).max(1);
        let mut response = ApiError::TooManyRequests { retry_after_secs }.error_response();
        // The whole budget is back once this request's cell and the other
        // `limit - 1` have refilled.
        let full = wait + self.policy.period * self.policy.limit.saturating_sub(1);
        self.policy.insert(response.headers_mut(), 0, full);
        response
    }
}

type Config = GovernorConfig<ClientIp, StateInformationMiddleware>;

/// The limiter for one server: built once and shared by every worker (each
/// worker's middleware points at the same keyed state).
#[derive(Debug)]
pub(crate) struct RateLimiter {
    config: Config,
    policy: Policy,
    enabled: bool,
}

impl RateLimiter {
    pub(crate) fn new(settings: RateLimitSettings) -> Self {
        let limit = settings.max.map_or(1, NonZeroU32::get);
        // At least one nanosecond: governor refuses a zero period.
        let period = (settings.window / limit).max(Duration::from_nanos(1));
        let policy = Policy::new(limit, settings.window, period);
        let config = GovernorConfigBuilder::default()
            .key_extractor(ClientIp {
                trust_proxy: settings.trust_proxy,
                policy: policy.clone(),
            })
            .period(period)
            .burst_size(limit)
            .use_headers()
            .finish();
        // `finish` is `None` only for a zero period or burst, excluded above.
        let Some(config) = config else {
            unreachable!("period and burst are non-zero")
        };
        Self {
            config,
            policy,
            enabled: settings.max.is_some(),
        }
    }

    pub(crate) fn policy(&self) -> Policy {
        self.policy.clone()
    }

    /// The middleware; a pass-through when limiting is off.
    pub(crate) fn middleware(&self) -> Condition<Governor<ClientIp, StateInformationMiddleware>> {
        Condition::new(self.enabled, Governor::new(&self.config))
    }

    /// Forgets clients whose budget is full again, every `every`: without it
    /// the keyed state grows with every address ever seen.
    pub(crate) fn prune_periodically(
        &self,
        every: Duration,
    ) -> Option<impl Future<Output = ()> + use<>> {
        let limiter = self.enabled.then(|| self.config.limiter())?;
        Some(async move {
            let mut ticks = tokio::time::interval(every);
            loop {
                ticks.tick().await;
                limiter.retain_recent();
                limiter.shrink_to_fit();
            }
        })
    }
}

/// actix-governor's own header names, never sent (spec §8: no `X-RateLimit-*`).
const LEGACY: [&str; 4] = [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-after",
    "x-ratelimit-whitelisted",
];

/// Middleware just outside the limiter: `RateLimit-*` on every counted
/// response, from the verdict actix-governor left in the request extensions.
/// After an allowed request `remaining` cells are left, so the budget is full
/// again after the other `limit - remaining` refill — an upper bound, off by
/// less than one period, since governor keeps the exact arrival time private.
pub(crate) async fn standard_headers(
    policy: std::sync::Arc<Policy>,
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut response = next.call(request).await?;
    let remaining = match response
        .request()
        .extensions()
        .get::<GovernorResult<ApiError>>()
    {
        Some(GovernorResult::Ok {
            remaining: Some(remaining),
            ..
        }) => Some(*remaining),
        _ => None,
    };
    let headers = response.headers_mut();
    for name in LEGACY {
        headers.remove(name);
    }
    if let Some(remaining) = remaining {
        let spent = policy.limit.saturating_sub(remaining);
        policy.insert(headers, remaining, policy.period * spent);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_addresses_are_read_leniently_c9() {
        assert_eq!(
            parse_address("203.0.113.7"),
            Some("203.0.113.7".parse().unwrap())
        );
        assert_eq!(
            parse_address("203.0.113.7:4711"),
            Some("203.0.113.7".parse().unwrap())
        );
        assert_eq!(
            parse_address("[2001:db8::1]:80"),
            Some("2001:db8::1".parse().unwrap())
        );
        assert_eq!(
            parse_address("\"[2001:db8::1]\""),
            Some("2001:db8::1".parse().unwrap())
        );
        assert_eq!(
            parse_address("2001:db8::1"),
            Some("2001:db8::1".parse().unwrap())
        );
        assert_eq!(parse_address("unknown"), None);
        assert_eq!(parse_address("_hidden"), None);
        assert_eq!(parse_address(""), None);
    }

    #[test]
    fn the_policy_header_names_the_budget_and_the_window_in_seconds_c9() {
        assert_eq!(
            policy_header(100, Duration::from_millis(900_000)),
            "100;w=900"
        );
        assert_eq!(policy_header(5, Duration::from_millis(1_500)), "5;w=2");
    }

    #[test]
    fn seconds_are_rounded_up_c9() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(9)), 9);
        assert_eq!(ceil_secs(Duration::from_millis(9_001)), 10);
    }
}
