//! Rate limiting (C9) at the HTTP edge: who the client is, what its budget
//! says, and the standard `RateLimit-*` headers (never `X-RateLimit-*`).
//!
//! The budget itself is the domain's [`RateLimiter`] (GCRA over a store: in
//! this process, or in Redis shared by every instance). GCRA has no fixed
//! window: a fresh client may send `max` at once, then one request per
//! `window / max`. (Express' fixed window instead resets the whole budget at
//! the end of each window; GCRA has no such cliff, which is why
//! `RateLimit-Reset` here means "seconds until the full budget is back".)
//!
//! actix-governor, which this middleware replaced, keeps its budgets in a
//! map of its own: it can neither share them across instances nor bound how
//! many clients it tracks, both of which C9 requires.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpResponse, ResponseError};
use items_domain::{Gcra, RateLimiter, Verdict, defaults};

use super::metrics::RATE_LIMIT_REFUSALS;
use super::problem::ApiError;
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

/// What the headers announce: the budget, the window and the refill period.
/// The two constant header values are rendered once, not per request.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    gcra: Gcra,
    trust_proxy: u32,
    policy_header: HeaderValue,
    limit_header: HeaderValue,
}

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
fn client_key(request: &ServiceRequest, trust_proxy: u32) -> IpAddr {
    let forwarded = usize::try_from(trust_proxy)
        .ok()
        .filter(|hops| *hops > 0)
        .and_then(|hops| forwarded_client(request.headers(), hops));
    // A request with no peer address (never over TCP) shares one key rather
    // than failing: the limiter must not turn into a 500.
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

/// The client as `hops` proxies of ours report it: the `hops`-th address
/// from the right of `X-Forwarded-For`, or of `Forwarded: for=` when no
/// `X-Forwarded-For` was sent. Each proxy appends the address it received
/// from, so entries further left were written by the client itself and are
/// never used; with fewer entries than `hops`, the leftmost present is the
/// best there is. `X-Forwarded-For` comes first because it is the header
/// proxies append to (haproxy's `option forwardfor`, nginx's
/// `$proxy_add_x_forwarded_for`): a `Forwarded` header behind such a proxy
/// was written by the client. An entry that is not an address (`unknown`,
/// garbage) gives `None`: the peer is used.
fn forwarded_client(headers: &HeaderMap, hops: usize) -> Option<IpAddr> {
    let entries: Vec<&str> = if headers.contains_key(header::X_FORWARDED_FOR) {
        list_entries(headers, &header::X_FORWARDED_FOR).collect()
    } else {
        list_entries(headers, &header::FORWARDED)
            .filter_map(forwarded_for)
            .collect()
    };
    let index = entries.len().saturating_sub(hops);
    entries.get(index).copied().and_then(parse_address)
}

/// The comma-separated entries of every `name` header, in order (several
/// header lines are one list, RFC 9110 §5.3).
fn list_entries<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
}

/// The `for=` parameter of one `Forwarded` element (`for=1.2.3.4;proto=http`).
fn forwarded_for(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim().eq_ignore_ascii_case("for").then_some(value)
    })
}

/// Reads an address as proxies write it: `1.2.3.4`, `1.2.3.4:80`, `::1`,
/// `[::1]:80`, `"[::1]"`; `unknown` or garbage gives `None`.
fn parse_address(raw: &str) -> Option<IpAddr> {
    let raw = raw.trim().trim_matches('"');
    raw.parse::<IpAddr>()
        .ok()
        .or_else(|| raw.parse::<SocketAddr>().ok().map(|socket| socket.ip()))
        .or_else(|| raw.strip_prefix('[')?.split(']').next()?.parse().ok())
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

/// Middleware right on the router (CORS answers preflights further out, so
/// they are never counted): spends one request of the client's budget, and
/// either serves it with the `RateLimit-*` headers or refuses it with a 429
/// problem, `Retry-After` rounded *up* (never `0`) and the same headers.
pub(crate) async fn limit_rate(
    limiter: Arc<Limiter>,
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(policy) = &limiter.policy else {
        return Ok(next.call(request).await?.map_into_boxed_body());
    };
    let client = client_key(&request, policy.trust_proxy);
    let verdict = match limiter.budgets.check(client, policy.gcra).await {
        Ok(verdict) => verdict,
        Err(cause) => {
            // Only the in-process store is left, and it cannot fail; should
            // it ever, serving unlimited beats refusing everyone.
            tracing::error!(error = %ErrorChain(&cause), "no rate-limit budget could be read; request served unlimited");
            return Ok(next.call(request).await?.map_into_boxed_body());
        }
    };
    match verdict {
        Verdict::Allowed { remaining, reset } => {
            let mut response = next.call(request).await?.map_into_boxed_body();
            policy.insert(response.headers_mut(), remaining, reset);
            Ok(response)
        }
        Verdict::Refused { retry_after, reset } => {
            metrics::counter!(RATE_LIMIT_REFUSALS).increment(1);
            let retry_after_secs = ceil_secs(retry_after).max(1);
            let mut response: HttpResponse =
                ApiError::TooManyRequests { retry_after_secs }.error_response();
            policy.insert(response.headers_mut(), 0, reset);
            Ok(request.into_response(response))
        }
    }
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

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                HeaderName::try_from(*name).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        headers
    }

    fn ip(raw: &str) -> Option<IpAddr> {
        Some(raw.parse().unwrap())
    }

    #[test]
    fn the_client_is_the_nth_forwarded_address_from_the_right_c1_c9() {
        let sent = headers(&[("x-forwarded-for", "10.0.0.1, 198.51.100.2, 203.0.113.7")]);
        assert_eq!(forwarded_client(&sent, 1), ip("203.0.113.7"));
        assert_eq!(forwarded_client(&sent, 2), ip("198.51.100.2"));
        assert_eq!(forwarded_client(&sent, 3), ip("10.0.0.1"));
        // Fewer entries than proxies: the leftmost present, never beyond it.
        assert_eq!(forwarded_client(&sent, 9), ip("10.0.0.1"));
    }

    #[test]
    fn several_forwarded_for_lines_are_one_list_c9() {
        let sent = headers(&[
            ("x-forwarded-for", "10.0.0.1"),
            ("x-forwarded-for", "203.0.113.7"),
        ]);
        assert_eq!(forwarded_client(&sent, 1), ip("203.0.113.7"));
    }

    #[test]
    fn the_forwarded_header_is_read_by_its_for_parameters_c9() {
        let sent = headers(&[(
            "forwarded",
            "for=10.0.0.1;proto=http, for=\"[2001:db8::7]:4711\";by=proxy",
        )]);
        assert_eq!(forwarded_client(&sent, 1), ip("2001:db8::7"));
        assert_eq!(forwarded_client(&sent, 2), ip("10.0.0.1"));
    }

    #[test]
    fn a_forwarded_header_beside_x_forwarded_for_is_the_clients_own_c9() {
        let sent = headers(&[
            ("forwarded", "for=10.0.0.1"),
            ("x-forwarded-for", "10.0.0.2, 203.0.113.7"),
        ]);
        assert_eq!(forwarded_client(&sent, 1), ip("203.0.113.7"));
    }

    #[test]
    fn no_forwarded_header_or_garbage_names_no_client_c9() {
        assert_eq!(forwarded_client(&HeaderMap::new(), 1), None);
        let sent = headers(&[("x-forwarded-for", "10.0.0.1, unknown")]);
        assert_eq!(forwarded_client(&sent, 1), None);
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
