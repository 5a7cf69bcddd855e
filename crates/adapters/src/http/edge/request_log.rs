//! Where the edge's one line per request goes (C1: one line per request,
//! its level from `RUST_LOG`).
//!
//! By default ([`TracingRequestLog`]) the line is a `tracing` event at
//! `INFO` on the target [`REQUEST_TARGET`], so any subscriber, a test's or an
//! embedder's, sees it as it sees every other event. A program that owns its
//! log can hand the edge a [`RequestLog`] of its own through
//! [`HttpSettings::request_log`](crate::http::HttpSettings::request_log):
//! the `items-service` binary writes its text lines straight into its log
//! buffers, since an event's trip through the subscriber (the dispatch
//! through every layer, then a visit of each field) cost ~1,900
//! instructions of a `GET /` even behind a fast formatter, against 630 for
//! the direct line, where a bare actix-web handler serves the whole request
//! in 17,000 (callgrind; docs/performance.md "The HTTP edge and the request
//! log, measured").

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use super::request_trace::TraceIds;
use crate::http::support::REQUEST_TARGET;

/// The status logged for a request whose client closed or reset the
/// connection before the response was ready: nginx's 499 "client closed
/// request". It is never sent (nobody is there to read it).
pub const CLIENT_CLOSED: u16 = 499;

/// What the log is told about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestRecord<'a> {
    /// The request's method, as sent.
    pub method: &'a str,
    /// The request's path, without its query.
    pub path: &'a str,
    /// The response's status; [`CLIENT_CLOSED`] when the client went
    /// away before a response was ready.
    pub status: u16,
    /// From the request's arrival to its response (or to the client's
    /// leaving), in microseconds.
    pub latency_us: u64,
    /// When the response was ready (or the client left): the moment the
    /// line is about, read once by the edge for the latency and the line.
    pub finished: Instant,
    /// The ids of the request's server span when it is traced (C11):
    /// every format writes them as `trace_id` and `span_id`.
    pub trace: Option<TraceIds>,
}

impl RequestRecord<'_> {
    /// Whether the client went away before the response was ready.
    pub fn client_went_away(&self) -> bool {
        self.status == CLIENT_CLOSED
    }
}

/// A sink for request lines. Implementations decide themselves whether the
/// line is wanted (the default asks `tracing`'s filter) and must not block:
/// they run on the worker serving the request.
pub trait RequestLog: fmt::Debug + Send + Sync + 'static {
    /// Logs one request.
    fn write(&self, record: &RequestRecord<'_>);
}

/// The sink the edge uses unless told otherwise.
pub(crate) fn default_sink() -> Arc<dyn RequestLog> {
    Arc::new(TracingRequestLog)
}

/// Request lines as `tracing` events (see the module's documentation).
#[derive(Debug, Default, Clone, Copy)]
pub struct TracingRequestLog;

impl RequestLog for TracingRequestLog {
    fn write(&self, record: &RequestRecord<'_>) {
        // Present only for a traced request (C11): a field whose value is
        // `None` is left out of the line.
        let ids = record
            .trace
            .map(|ids| (ids.trace_id_hex(), ids.span_id_hex()));
        let trace_id = ids
            .as_ref()
            .and_then(|(id, _)| std::str::from_utf8(id).ok())
            .map(tracing::field::display);
        let span_id = ids
            .as_ref()
            .and_then(|(_, id)| std::str::from_utf8(id).ok())
            .map(tracing::field::display);
        if record.client_went_away() {
            tracing::info!(
                target: REQUEST_TARGET,
                method = %record.method,
                path = record.path,
                status = record.status,
                latency_us = record.latency_us,
                trace_id,
                span_id,
                "the client went away before the response",
            );
        } else {
            tracing::info!(
                target: REQUEST_TARGET,
                method = %record.method,
                path = record.path,
                status = record.status,
                latency_us = record.latency_us,
                trace_id,
                span_id,
            );
        }
    }
}
