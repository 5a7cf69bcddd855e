//! CORS (C8), as plain functions [the edge](super) calls.
//!
//! The service allows any origin, without credentials
//! (`Access-Control-Allow-Origin: *`), its own methods, any request header,
//! the exposed headers of C8 and a max-age of a day. So nothing here
//! depends on configuration and every header value is a constant.
//!
//! This replaced actix-cors, configured for the same policy, which cost a
//! layer of its own (a boxed future per request) and a `Vary` value built
//! per response (about 1,300 instructions per `GET /` in all, callgrind).
//! Its answers are kept, with two changes that were already made on top of
//! it:
//! - a preflight is answered `204` (C8 prefers it, as Express' `cors` does),
//!   not `200`;
//! - a preflight for a method outside the list (or no method at all) gets a
//!   `204` with the lists instead of a bare `400`: C8 wants every preflight
//!   to get a 2xx, and the browser itself refuses the actual request when
//!   its method is not in `Access-Control-Allow-Methods`, so the answer
//!   loses nothing and stays uniform.
//!
//! Any `OPTIONS` request with `Access-Control-Request-Method` is a
//! preflight: it is answered here, never routed and never counted by the
//! rate limiter.

use actix_web::HttpResponse;
use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use actix_web::http::{Method, StatusCode};

/// Every method some route of the service answers (spec §4, C7).
const METHODS: [Method; 6] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::OPTIONS,
];
/// [`METHODS`] as `Access-Control-Allow-Methods` lists them.
const ALLOW_METHODS: &str = "GET, HEAD, POST, PUT, DELETE, OPTIONS";
/// How long a browser may cache a preflight answer (one day, PostgREST's
/// choice), in seconds.
const MAX_AGE: &str = "86400";
/// The response headers a browser script may read (C8), and
/// `Idempotent-Replayed` (C7), so a browser client can tell a replay, and
/// `Consistency-Token` (C13), so it can send it back.
const EXPOSED: &str = "etag, location, link, x-total-count, retry-after, ratelimit-policy, \
                       ratelimit-limit, ratelimit-remaining, ratelimit-reset, idempotent-replayed, \
                       consistency-token";
/// The request headers a preflight's answer depends on, for caches
/// (<https://fetch.spec.whatwg.org/#cors-protocol-and-http-caches>).
static PREFLIGHT_VARY: HeaderValue = HeaderValue::from_static(
    "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
);
/// The one request header the CORS part of an actual request's answer
/// depends on: the two `Access-Control-Request-*` headers are sent only on
/// preflights, which are never answered by a route, so naming them on every
/// response told a cache nothing and cost 57 bytes a response.
static ACTUAL_VARY: HeaderValue = HeaderValue::from_static("Origin");

/// A preflight: `OPTIONS` with `Access-Control-Request-Method`.
pub(crate) fn is_preflight(request: &ServiceRequest) -> bool {
    request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// Whether the request names its origin: only then does its response say
/// which origins may read it.
pub(crate) fn has_origin(request: &ServiceRequest) -> bool {
    request.headers().contains_key(header::ORIGIN)
}

/// The answer to a preflight: always a `204` (see the module's
/// documentation).
pub(crate) fn answer_preflight(request: ServiceRequest) -> ServiceResponse<BoxBody> {
    let mut answer = HttpResponse::new(StatusCode::NO_CONTENT);
    let headers = answer.headers_mut();
    set_all(
        headers,
        [
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
            (header::ACCESS_CONTROL_ALLOW_METHODS, ALLOW_METHODS),
            (header::ACCESS_CONTROL_MAX_AGE, MAX_AGE),
        ],
    );
    // A refused method gets the lists alone: no request header is worth
    // allowing for a request the browser will not send.
    if requests_a_known_method(request.headers()) {
        // Any request header is allowed: the requested ones are echoed.
        if let Some(requested) = request
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        {
            headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, requested.clone());
        }
        add_vary(headers, &PREFLIGHT_VARY);
    }
    request.into_response(answer)
}

/// `Access-Control-Request-Method` names one of [`METHODS`].
fn requests_a_known_method(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCESS_CONTROL_REQUEST_METHOD)
        .and_then(|value| value.to_str().ok())
        .and_then(|name| Method::from_bytes(name.as_bytes()).ok())
        .is_some_and(|method| METHODS.contains(&method))
}

/// Marks the response to an actual (not preflight) request. When the
/// request named an origin: allowed to any origin (errors and 429s
/// included, C8) and its exposed headers listed. Either way `Vary` names
/// `Origin`, so a cache never hands a response made without CORS headers to
/// a request that needs them. (actix-cors also listed the exposed headers
/// when there was no `Origin`; browsers read them only on a CORS response,
/// so that header is skipped there.)
pub(crate) fn decorate(headers: &mut HeaderMap, origin: bool) {
    if origin {
        set_all(
            headers,
            [
                (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
                (header::ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSED),
            ],
        );
    }
    add_vary(headers, &ACTUAL_VARY);
}

/// Sets each header to its constant value.
fn set_all<const N: usize>(headers: &mut HeaderMap, values: [(HeaderName, &'static str); N]) {
    for (name, value) in values {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

/// Adds the CORS request headers `vary` to `Vary`, after any the route
/// named. `Vary` is a list (RFC 9110 §12.5.5), and a list's field lines
/// mean their join (§5.3), so a route's own `Vary` keeps its line and this
/// one follows it: no lookup of a value nearly no response has (~60
/// instructions a response, callgrind), nor a join of the two.
fn add_vary(headers: &mut HeaderMap, vary: &HeaderValue) {
    headers.append(header::VARY, vary.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_method_list_names_every_method() {
        let listed: Vec<&str> = ALLOW_METHODS.split(", ").collect();
        let methods: Vec<&str> = METHODS.iter().map(Method::as_str).collect();
        assert_eq!(listed, methods);
    }

    #[test]
    fn vary_is_extended_not_replaced() {
        let mut headers = HeaderMap::new();
        headers.insert(header::VARY, HeaderValue::from_static("Accept"));
        add_vary(&mut headers, &PREFLIGHT_VARY);
        let lines: Vec<&HeaderValue> = headers.get_all(header::VARY).collect();
        assert_eq!(
            lines,
            [&HeaderValue::from_static("Accept"), &PREFLIGHT_VARY]
        );
        let mut headers = HeaderMap::new();
        add_vary(&mut headers, &ACTUAL_VARY);
        let lines: Vec<&HeaderValue> = headers.get_all(header::VARY).collect();
        assert_eq!(lines, [&ACTUAL_VARY]);
    }
}
