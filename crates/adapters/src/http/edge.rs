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
//! 4. every response is marked `nosniff` (C4) and logged in one line, also
//!    a request whose client went away before it was answered.
//!
//! When a client resets its connection mid-request, actix drops the
//! request's future: no response, so without the [`RequestLine`] guard no
//! line either, and an upload cut that way left no trace in the log (issue
//! 20). The line of such a request says status [`CLIENT_CLOSED`].
//!
//! [`connection`]: super::connection
//! [`metrics`]: super::metrics
//! [`cors`]: super::cors

use std::rc::Rc;
use std::time::{Duration, Instant};

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, Uri};
use actix_web::middleware::Next;

use super::connection::{self, Draining};
use super::cors;
use super::metrics::RequestMetrics;

/// The status logged for a request whose client closed or reset the
/// connection before the response was ready: nginx's 499 "client closed
/// request". It is never sent (nobody is there to read it).
pub const CLIENT_CLOSED: u16 = 499;

/// The request line still to be written; written on drop as
/// [`CLIENT_CLOSED`] when the request's future is dropped before a response.
struct RequestLine {
    method: Method,
    /// Cloning a `Uri` shares its bytes: no copy of the path per request.
    uri: Uri,
    started: Instant,
    written: bool,
}

impl RequestLine {
    fn write(&mut self, status: u16, latency: Duration) {
        self.written = true;
        tracing::info!(
            target: "items_service::request",
            method = %self.method,
            path = self.uri.path(),
            status,
            latency_us = latency.as_micros() as u64,
        );
    }
}

impl Drop for RequestLine {
    fn drop(&mut self) {
        if !self.written {
            self.written = true;
            tracing::info!(
                target: "items_service::request",
                method = %self.method,
                path = self.uri.path(),
                status = CLIENT_CLOSED,
                latency_us = self.started.elapsed().as_micros() as u64,
                "the client went away before the response",
            );
        }
    }
}

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
    let mut line = RequestLine {
        method: request.method().clone(),
        uri: request.uri().clone(),
        started: Instant::now(),
        written: false,
    };
    let preflight = cors::is_preflight(&request);
    let body = connection::watch_body(&mut request);
    let _in_flight = edge.metrics.enter();
    // No clone of the request may be held across `next.call`: routing needs
    // the only reference to write the path's match info; method and URI are
    // cheap clones of their own. Inner layers answer with `Ok` responses
    // (errors are rendered by `ApiError`); an `Err` is actix-web's own,
    // answered before any route ran.
    let mut response = match next.call(request).await {
        Ok(response) => response.map_into_boxed_body(),
        Err(error) => {
            let status = error.as_response_error().status_code();
            let elapsed = line.started.elapsed();
            edge.metrics.record(&line.method, None, status, elapsed);
            line.write(status.as_u16(), elapsed);
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
    let elapsed = line.started.elapsed();
    let status = response.status();
    edge.metrics.record(
        &line.method,
        response.request().match_name(),
        status,
        elapsed,
    );
    line.write(status.as_u16(), elapsed);
    Ok(connection::finish(response, body.as_ref(), &edge.draining))
}
