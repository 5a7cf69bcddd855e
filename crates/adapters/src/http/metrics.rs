//! What the public server reports to `/metrics` (C11), through the `metrics`
//! facade: the adapters only emit; whichever recorder the binary installs
//! (the Prometheus exporter) keeps and renders the values. Without a
//! recorder every call here is a no-op.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Duration;

use actix_web::http::{Method, StatusCode};
use metrics::{
    Gauge, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge,
    histogram,
};

/// Latency of every request, by `method`, `route` (template) and `status`.
pub const REQUEST_DURATION: &str = "http_server_request_duration_seconds";
/// Requests received and not yet answered.
pub const REQUESTS_IN_FLIGHT: &str = "http_server_active_requests";
/// Bytes of uploaded files kept (after the request's files were committed).
pub const UPLOADED_BYTES: &str = "uploaded_bytes_total";
/// Requests refused with 429 by the rate limiter (C9).
pub const RATE_LIMIT_REFUSALS: &str = "rate_limit_refusals_total";
/// Whether the instance is ready, as `/readyz` would say at the scrape: 1
/// ready (or degraded: serving on local budgets), 0 not ready or shutting
/// down (C11); what an alert on readiness reads. Set by the admin listener.
pub const READY: &str = "service_ready";
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
    describe_gauge!(
        READY,
        "1 while the instance is ready (its store answers), 0 while not or shutting down."
    );
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
    changes::describe();
}

/// The change streams' metrics (C14): streams open, events sent,
/// streams refused and cut, and how long a change took from its commit
/// to its subscriber's buffer.
pub mod changes {
    use std::time::SystemTime;

    use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge};

    /// Change streams open now in this process.
    pub const STREAMS_OPEN: &str = "changes_streams_open";
    /// Change events sent (into subscribers' buffers).
    pub const EVENTS_SENT: &str = "changes_events_sent_total";
    /// Streams ended by the service, by `reason`: `slow` (the subscriber's
    /// buffer was full), `store` (the store failed), `stopping` (drain).
    pub const DISCONNECTS: &str = "changes_disconnects_total";
    /// Streams refused because `CHANGES_MAX_STREAMS` were open.
    pub const REFUSED: &str = "changes_streams_refused_total";
    /// From a change's commit (the store's clock) to its event's sending.
    pub const LAG: &str = "changes_feed_lag_seconds";
    /// Buckets of [`LAG`], in seconds: from a change in memory (under a
    /// millisecond) to one a poller found late (C14 allows 1 s).
    pub const LAG_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];

    pub(super) fn describe() {
        describe_gauge!(
            STREAMS_OPEN,
            "Change streams (GET /items, text/event-stream) open now."
        );
        describe_counter!(EVENTS_SENT, "Change events sent to subscribers.");
        describe_counter!(
            DISCONNECTS,
            "Change streams the service ended, by reason: slow (the subscriber fell behind), store (the store failed), stopping (drain)."
        );
        describe_counter!(
            REFUSED,
            "Change streams refused with 503: CHANGES_MAX_STREAMS were open."
        );
        describe_histogram!(
            LAG,
            Unit::Seconds,
            "Time from a change's commit to its event being sent to a subscriber."
        );
        gauge!(STREAMS_OPEN).set(0.0);
        counter!(EVENTS_SENT).increment(0);
        counter!(DISCONNECTS, "reason" => "slow").increment(0);
        counter!(REFUSED).increment(0);
    }

    pub(crate) fn opened() {
        gauge!(STREAMS_OPEN).increment(1.0);
    }

    pub(crate) fn closed() {
        gauge!(STREAMS_OPEN).decrement(1.0);
    }

    pub(crate) fn refused() {
        counter!(REFUSED).increment(1);
    }

    pub(crate) fn disconnected(reason: &'static str) {
        counter!(DISCONNECTS, "reason" => reason).increment(1);
    }

    /// An event sent for a change recorded `at`.
    pub(crate) fn sent(at: SystemTime) {
        counter!(EVENTS_SENT).increment(1);
        let lag = SystemTime::now()
            .duration_since(at)
            .unwrap_or_default()
            .as_secs_f64();
        metrics::histogram!(LAG).record(lag);
    }
}

/// Counts the bytes of files an upload request stored.
pub(crate) fn count_uploaded_bytes(bytes: u64) {
    counter!(UPLOADED_BYTES).increment(bytes);
}

/// The request metrics of one worker thread: the in-flight gauge, and the
/// duration histograms by method, route and status, each looked up in the
/// recorder once and then kept, so a request records with no allocation
/// and no lock. Made by each worker after the binary installed its recorder
/// (before that, every handle is a no-op).
pub(crate) struct RequestMetrics {
    in_flight: Gauge,
    /// Keyed by the method label's address, the route template's address
    /// and length (the template lives in the worker's route table, as long
    /// as this cache) and the status. The key space is bounded by the route
    /// table, nine method labels and the status codes.
    durations: RefCell<HashMap<DurationKey, Histogram, BuildHasherDefault<KeyHasher>>>,
}

/// Method label address, route template address and length, status.
type DurationKey = (usize, usize, usize, u16);

/// The hasher of [`DurationKey`]s: FxHash's mixing step per integer. The
/// keys are addresses and small numbers chosen by the service, not by
/// clients, so nothing needs SipHash's resistance to chosen collisions, and
/// SipHash cost about 400 instructions per request (callgrind, `GET /`).
#[derive(Default)]
struct KeyHasher(u64);

impl KeyHasher {
    fn add(&mut self, value: u64) {
        const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(SEED);
    }
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.add(u64::from(byte));
        }
    }

    fn write_u16(&mut self, value: u16) {
        self.add(u64::from(value));
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }
}

impl RequestMetrics {
    pub(crate) fn new() -> Self {
        Self {
            in_flight: gauge!(REQUESTS_IN_FLIGHT),
            durations: RefCell::default(),
        }
    }

    /// Counts a request in flight until the guard is dropped: when the
    /// response is ready, or when the client went away and actix dropped the
    /// request's future.
    pub(crate) fn enter(&self) -> InFlight {
        InFlight::enter(self.in_flight.clone())
    }

    /// Records a request's duration under its method, route template (the
    /// template actix matched, never the raw path, so the number of series
    /// is bounded by the route table; `None`: [`UNMATCHED_ROUTE`]) and
    /// status.
    pub(crate) fn record(
        &self,
        method: &Method,
        route: Option<&str>,
        status: StatusCode,
        elapsed: Duration,
    ) {
        let method = method_label(method);
        let route = route.unwrap_or(UNMATCHED_ROUTE);
        let key = (
            method.as_ptr() as usize,
            route.as_ptr() as usize,
            route.len(),
            status.as_u16(),
        );
        let mut durations = self.durations.borrow_mut();
        let histogram = durations.entry(key).or_insert_with(|| {
            histogram!(
                REQUEST_DURATION,
                "method" => method,
                "route" => route.to_owned(),
                "status" => status_label(status),
            )
        });
        histogram.record(elapsed.as_secs_f64());
    }
}

/// The in-flight gauge, raised for as long as this guard lives: dropped when
/// the response is ready, or when the client went away and actix dropped the
/// request's future.
pub(crate) struct InFlight(Gauge);

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
pub(crate) fn method_label(method: &Method) -> &'static str {
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
