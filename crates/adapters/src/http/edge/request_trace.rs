//! The server span of each request, when the binary exports traces (C11):
//! one span per request on [`crate::traces::TARGET`], named by method and
//! route template (`GET /items/{id}`), with the HTTP semantic conventions'
//! attributes, continuing the trace an incoming W3C `traceparent` names.
//!
//! Invariants:
//! - with no [`RequestTracer`] in
//!   [`HttpSettings::tracer`](crate::http::HttpSettings::tracer) (traces
//!   off) the edge makes no span and pays one `Option` check;
//! - what needs OpenTelemetry's own types (reading `traceparent` and
//!   `tracestate`, the span's ids, renaming a started span) is the
//!   tracer's, which the binary implements: this crate names no
//!   OpenTelemetry crate;
//! - a `traceparent` the tracer cannot read is ignored (the request starts
//!   a new trace), never an error; header values that are not visible
//!   ASCII are passed as absent;
//! - the store's and the limiter's spans are children of this one: the
//!   routes and the limiter run inside it.
//!
//! Why a trait: the adapters stay free of OpenTelemetry, and traces off
//! cost nothing measurable (docs/performance.md, "Traces, measured").

use std::fmt;
use std::sync::Arc;

use actix_web::dev::ServiceRequest;
use actix_web::http::Method;
use tracing::Span;
use tracing::field::Empty;

/// What the edge asks of the binary's tracing: the parts of a server span
/// that need OpenTelemetry's types. Implementations must not block: they
/// run on the worker serving the request.
pub trait RequestTracer: fmt::Debug + Send + Sync + 'static {
    /// Makes `span`, not yet entered, continue the trace the request's
    /// W3C `traceparent` and `tracestate` headers name. A missing or
    /// malformed `traceparent` leaves `span` the root of a new trace.
    fn continue_trace(&self, span: &Span, traceparent: Option<&str>, tracestate: Option<&str>);

    /// Gives the started `span` the name `name` (its route is known only
    /// once the routes ran).
    fn rename(&self, span: &Span, name: String);

    /// The ids of `span` when it is recorded (sampled); `None` otherwise.
    fn ids(&self, span: &Span) -> Option<TraceIds>;
}

/// A recorded span's trace id and span id, as W3C Trace Context writes
/// them in lowercase hexadecimal (32 and 16 digits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceIds {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
}

impl TraceIds {
    /// The trace id in 32 lowercase hexadecimal digits.
    pub fn trace_id_hex(&self) -> [u8; 32] {
        hex(self.trace_id)
    }

    /// The span id in 16 lowercase hexadecimal digits.
    pub fn span_id_hex(&self) -> [u8; 16] {
        hex(self.span_id)
    }
}

/// `bytes` in lowercase hexadecimal; `M` is twice `N`.
fn hex<const N: usize, const M: usize>(bytes: [u8; N]) -> [u8; M] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0; M];
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
    out
}

/// The server span of one traced request and the tracer that started it.
pub(crate) struct TracedRequest {
    pub(crate) span: Span,
    tracer: Arc<dyn RequestTracer>,
}

impl TracedRequest {
    /// Starts the server span of `request` (not entered yet), continuing
    /// the trace its headers name.
    pub(crate) fn start(tracer: &Arc<dyn RequestTracer>, request: &ServiceRequest) -> Box<Self> {
        let method = method_name(request.method());
        let headers = request.headers();
        let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
        let client = request.peer_addr().map(|peer| peer.ip().to_string());
        let span = tracing::trace_span!(
            target: crate::traces::TARGET,
            "request",
            otel.name = method,
            otel.kind = "server",
            otel.status_code = Empty,
            http.request.method = method,
            http.route = Empty,
            http.response.status_code = Empty,
            url.path = request.path(),
            url.scheme = "http",
            server.port = request.app_config().local_addr().port(),
            client.address = client,
            user_agent.original = header("user-agent"),
        );
        tracer.continue_trace(&span, header("traceparent"), header("tracestate"));
        Box::new(Self {
            span,
            tracer: Arc::clone(tracer),
        })
    }

    /// Records the answer: the route template matched (`None`: no route
    /// matched, and the span keeps the method alone as its name, as the
    /// conventions ask), the status, and an error status for a 5xx.
    pub(crate) fn finish(&self, method: &Method, route: Option<&str>, status: u16) {
        if let Some(route) = route {
            self.span.record("http.route", route);
            self.tracer
                .rename(&self.span, format!("{} {route}", method_name(method)));
        }
        self.span.record("http.response.status_code", status);
        if status >= 500 {
            self.span.record("otel.status_code", "error");
        }
    }

    /// The span's ids, for the request's log line, when it is recorded.
    pub(crate) fn ids(&self) -> Option<TraceIds> {
        self.tracer.ids(&self.span)
    }
}

/// The method as the conventions name it: a standard one as is, any other
/// `_OTHER`, so clients cannot mint span names.
fn method_name(method: &Method) -> &'static str {
    match crate::http::metrics::method_label(method) {
        "other" => "_OTHER",
        known => known,
    }
}

#[cfg(test)]
mod tests {
    use super::TraceIds;

    #[test]
    fn ids_are_written_in_lowercase_hexadecimal_as_w3c_trace_context_does_c11() {
        let ids = TraceIds {
            trace_id: [
                0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e,
                0x47, 0x36,
            ],
            span_id: [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7],
        };
        assert_eq!(&ids.trace_id_hex(), b"4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(&ids.span_id_hex(), b"00f067aa0ba902b7");
    }
}
