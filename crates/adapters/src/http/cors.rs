//! CORS (C8) with actix-cors, and the wrapper for where it falls short.
//!
//! actix-cors is configured for `Access-Control-Allow-Origin: *` without
//! credentials, the service's methods, any request header, the exposed
//! headers of C8 and a max-age. It answers preflights itself, before the rate
//! limiter, so they are never counted (it is registered outside it). Two gaps
//! are closed by [`answer_preflight`]:
//! - it answers preflights `200`; C8 prefers `204`, as Express' `cors` does;
//! - it answers a preflight it rejects (a method outside the list, a bad
//!   header) with a bare `400`. C8 wants every preflight to get a 2xx: the
//!   browser itself refuses the actual request when the method is not in
//!   `Access-Control-Allow-Methods`, so a `204` with the lists loses nothing
//!   and keeps the answer uniform.

use actix_cors::Cors;
use actix_web::HttpResponse;
use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode};

/// Every method some route of the service answers (spec §4, C7).
const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"];
/// How long a browser may cache a preflight answer (one day, PostgREST's choice).
const MAX_AGE_SECS: usize = 86_400;
/// The response headers a browser script may read (C8), and
/// `Idempotent-Replayed` (C7), so a browser client can tell a replay.
const EXPOSED: [&str; 10] = [
    "etag",
    "location",
    "link",
    "x-total-count",
    "retry-after",
    "ratelimit-policy",
    "ratelimit-limit",
    "ratelimit-remaining",
    "ratelimit-reset",
    "idempotent-replayed",
];

/// The actix-cors middleware configured for C8.
pub(crate) fn cors() -> Cors {
    Cors::default()
        .allow_any_origin()
        .send_wildcard()
        .allowed_methods(METHODS)
        .allow_any_header()
        .expose_headers(EXPOSED)
        .max_age(MAX_AGE_SECS)
}

/// A preflight as actix-cors recognises one: `OPTIONS` with
/// `Access-Control-Request-Method`.
pub(crate) fn is_preflight(request: &ServiceRequest) -> bool {
    request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// What becomes of actix-cors' answer to a preflight: always a `204`.
pub(crate) fn answer_preflight(mut response: ServiceResponse<BoxBody>) -> ServiceResponse<BoxBody> {
    match response.status() {
        StatusCode::OK => *response.response_mut().status_mut() = StatusCode::NO_CONTENT,
        status if status.is_client_error() => {
            let (request, _) = response.into_parts();
            let refused = HttpResponse::NoContent()
                .insert_header((
                    header::ACCESS_CONTROL_ALLOW_ORIGIN,
                    HeaderValue::from_static("*"),
                ))
                .insert_header((header::ACCESS_CONTROL_ALLOW_METHODS, METHODS.join(", ")))
                .insert_header((header::ACCESS_CONTROL_MAX_AGE, MAX_AGE_SECS))
                .finish();
            response = ServiceResponse::new(request, refused);
        }
        _ => {}
    }
    response
}
