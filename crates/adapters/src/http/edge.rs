//! The outermost middleware of the public server: everything that happens
//! to every request before routing and to every response after it, in one
//! layer.
//!
//! Each actix-web middleware layer costs a boxed future and a dynamic call
//! per request; the edge's concerns were four layers (connection fate,
//! metrics, log line, preflight status), and profiling `GET /` put their
//! plumbing at about a tenth of what the service spent above a bare
//! handler. They are one layer here, in this order around the inner
//! service (CORS → ETags and the rate limiter → routes):
//! 1. the request body is watched, so an unread one closes the connection
//!    (C5), and so does a stop in progress (C1) — [`connection`];
//! 2. the request is counted in flight and its duration recorded by route
//!    template (C11) — [`metrics`];
//! 3. a CORS preflight's answer becomes a `204` (C8) — [`cors`];
//! 4. every response is marked `nosniff` (C4) and logged in one line.
//!
//! [`connection`]: super::connection
//! [`metrics`]: super::metrics
//! [`cors`]: super::cors

use std::rc::Rc;
use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;

use super::connection::{self, Draining};
use super::cors;
use super::metrics::RequestMetrics;

/// What the edge of one worker holds.
pub(crate) struct Edge {
    pub(crate) draining: Draining,
    pub(crate) metrics: RequestMetrics,
}

/// The middleware (see the module's documentation).
pub(crate) async fn edge(
    edge: Rc<Edge>,
    mut request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let started = Instant::now();
    let method = request.method().clone();
    let preflight = cors::is_preflight(&request);
    let body = connection::watch_body(&mut request);
    let _in_flight = edge.metrics.enter();
    // No clone of the request may be held across `next.call`: routing needs
    // the only reference to write the path's match info. The path is read
    // back from the response's request instead. Inner layers answer with
    // `Ok` responses (errors are rendered by `ApiError`); an `Err` is
    // actix-web's own, answered before any route ran.
    let mut response = match next.call(request).await {
        Ok(response) => response.map_into_boxed_body(),
        Err(error) => {
            let status = error.as_response_error().status_code();
            edge.metrics
                .record(&method, None, status, started.elapsed());
            return Err(error);
        }
    };
    if preflight {
        response = cors::answer_preflight(response);
    }
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    let elapsed = started.elapsed();
    let request = response.request();
    let status = response.status();
    edge.metrics
        .record(&method, request.match_name(), status, elapsed);
    tracing::info!(
        target: "items_service::request",
        method = %method,
        path = request.path(),
        status = status.as_u16(),
        latency_us = elapsed.as_micros() as u64,
    );
    Ok(connection::finish(response, body.as_ref(), &edge.draining))
}
