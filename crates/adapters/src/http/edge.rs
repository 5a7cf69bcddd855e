//! The edge middleware: marks every response `nosniff` (C4) and writes the
//! one log line of each request (method, path, status, latency), also for a
//! request whose client went away before it was answered.
//!
//! When a client resets its connection mid-request, actix drops the
//! request's future: no response, so before this guard no line either, and
//! an upload cut that way left no trace in the log (issue 20). The line of
//! such a request says status [`CLIENT_CLOSED`].

use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, Uri};
use actix_web::middleware::Next;

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
    fn write(&mut self, status: u16) {
        self.written = true;
        tracing::info!(
            target: "items_service::request",
            method = %self.method,
            path = self.uri.path(),
            status,
            latency_us = self.started.elapsed().as_micros() as u64,
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

/// The outermost middleware but the connection's and the metrics' layers.
pub(super) async fn edge(
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    // No clone of the request may be held across `next.call`: routing needs
    // the only reference to write the path's match info. Method and URI are
    // cheap clones of their own.
    let mut line = RequestLine {
        method: request.method().clone(),
        uri: request.uri().clone(),
        started: Instant::now(),
        written: false,
    };
    // Inner layers answer with `Ok` responses (errors are rendered by
    // `ApiError`); an `Err` is what actix-web itself would render.
    let mut response = match next.call(request).await {
        Ok(response) => response.map_into_boxed_body(),
        Err(error) => {
            line.write(error.as_response_error().status_code().as_u16());
            return Err(error);
        }
    };
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    line.write(response.status().as_u16());
    Ok(response)
}
