//! What the public server reports to `/metrics` (C11), through the `metrics`
//! facade: the adapters only emit; whichever recorder the binary installs
//! (the Prometheus exporter) keeps and renders the values. Without a
//! recorder every call here is a no-op.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use metrics::{
    Gauge, Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};

/// Latency of every request, by `method`, `route` (template) and `status`.
pub const REQUEST_DURATION: &str = "http_server_request_duration_seconds";
/// Requests received and not yet answered.
pub const REQUESTS_IN_FLIGHT: &str = "http_server_active_requests";
/// Bytes of uploaded files kept (after the request's files were committed).
pub const UPLOADED_BYTES: &str = "uploaded_bytes_total";
/// Requests refused with 429 by the rate limiter (C9).
pub const RATE_LIMIT_REFUSALS: &str = "rate_limit_refusals_total";
/// The `route` label of requests that matched no route: one fixed value, so a
/// scan of random paths cannot create a series per path.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Histogram buckets for [`REQUEST_DURATION`], in seconds: from 0.5 ms (a
/// read from memory) to 10 s (an upload, or a request waiting on a sick
/// database).
pub const REQUEST_DURATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Describes the metrics this module emits (their `# HELP` lines); called
/// once, after the recorder is installed.
pub fn describe() {
    describe_histogram!(
        REQUEST_DURATION,
        Unit::Seconds,
        "Time from receiving a request to its response, by method, route template and status."
    );
    describe_gauge!(REQUESTS_IN_FLIGHT, "Requests being served now.");
    describe_counter!(
        UPLOADED_BYTES,
        Unit::Bytes,
        "Bytes of uploaded files stored."
    );
    describe_counter!(
        RATE_LIMIT_REFUSALS,
        "Requests refused with 429 because the client's budget was spent."
    );
    // Shown as 0 from the first scrape rather than missing until the first
    // event, so a rate over them is defined from the start.
    counter!(UPLOADED_BYTES).increment(0);
    counter!(RATE_LIMIT_REFUSALS).increment(0);
}

/// Counts the bytes of files an upload request stored.
pub(crate) fn count_uploaded_bytes(bytes: u64) {
    counter!(UPLOADED_BYTES).increment(bytes);
}

/// The handles the middleware records into, looked up once per server
/// rather than once per request. Made after the binary installed its
/// recorder (before that, every handle is a no-op).
#[derive(Clone)]
pub(crate) struct RequestMetrics {
    in_flight: Gauge,
}

impl RequestMetrics {
    pub(crate) fn new() -> Self {
        Self {
            in_flight: gauge!(REQUESTS_IN_FLIGHT),
        }
    }
}

/// Middleware: counts the request in flight while it is served and records
/// its duration. The route label is the template actix matched
/// (`/items/{id}`), never the raw path, so the number of series is bounded by
/// the route table.
pub(crate) async fn record_request(
    metrics: RequestMetrics,
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let method = method_label(request.method());
    let _in_flight = InFlight::enter(metrics.in_flight);
    let result = next.call(request).await;
    let (route, status) = match &result {
        Ok(response) => (
            response
                .request()
                .match_pattern()
                .map_or(UNMATCHED_ROUTE.into(), metrics::SharedString::from),
            response.status(),
        ),
        // Inner layers render their own errors; what reaches here is
        // actix-web's, answered before any route ran.
        Err(error) => (
            UNMATCHED_ROUTE.into(),
            error.as_response_error().status_code(),
        ),
    };
    histogram!(
        REQUEST_DURATION,
        "method" => method,
        "route" => route,
        "status" => status_label(status),
    )
    .record(started.elapsed().as_secs_f64());
    result
}

/// The in-flight gauge, raised for as long as this guard lives: dropped when
/// the response is ready, or when the client went away and actix dropped the
/// request's future.
struct InFlight(Gauge);

impl InFlight {
    fn enter(gauge: Gauge) -> Self {
        gauge.increment(1.0);
        Self(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// The method as a static label (no allocation); a method outside the
/// standard ones is one label, so clients cannot mint series.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

/// The status code as a label; the common ones without allocating.
fn status_label(status: StatusCode) -> metrics::SharedString {
    match status.as_u16() {
        200 => "200".into(),
        201 => "201".into(),
        204 => "204".into(),
        304 => "304".into(),
        400 => "400".into(),
        404 => "404".into(),
        429 => "429".into(),
        other => other.to_string().into(),
    }
}
