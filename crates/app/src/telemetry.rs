//! Logging: one line per request from the HTTP adapter, as text or JSON
//! (`LOG_FORMAT`), at the level `RUST_LOG` asks for (default: [`DEFAULT_FILTER`]);
//! and, with the `otel` feature and `OTEL_EXPORTER_OTLP_ENDPOINT` set,
//! traces over OTLP (C11, [`traces`]).
//!
//! Lines are gathered per thread and written by a background thread in
//! batches (`telemetry/line_batches.rs`): a worker serving a request formats
//! its line but never waits on a `write` to stdout, and under load many
//! lines leave in one system call. Against a line-buffered stdout, a
//! non-blocking writer alone took `GET /` from 8.9 to 8.3 µs of CPU
//! (docs/performance.md "The HTTP edge and the request log, measured"). If
//! stdout is blocked long enough for a thread's buffer to fill, further
//! lines are dropped rather than stalling requests.
//!
//! A client's faults that actix-http reports as errors are written as
//! rate-limited warnings instead ([`client_faults`]).
//!
//! With traces off the subscriber is exactly the log's: one `EnvFilter`
//! for every layer, which leaves the adapters' span callsites disabled.
//! With traces on, each layer has its own filter: the log's layers the
//! `EnvFilter`, the trace layer the spans' target alone.

pub mod client_faults;
mod line_batches;
mod request_lines;
#[cfg(feature = "otel")]
pub mod traces;

use std::sync::{Arc, OnceLock};

use items_adapters::http::{RequestLog, RequestTracer, TracingRequestLog};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, fmt};

use client_faults::{ClientFaults, NotAClientFault};
pub use line_batches::LogWriterGuard;

use crate::config::LogFormat;

/// The filter when `RUST_LOG` is unset: `info`, without actix-server's
/// `starting N workers`, which it logs as each listener is built, before the
/// service's own start-up line. So the first line of the log is the
/// `listening` line, naming the addresses and the store (README). Its other
/// lines (shutdown of the workers) come from other modules and stay.
pub const DEFAULT_FILTER: &str = "info,actix_server::builder=warn";

/// What [`init`] started: the log's writer and, when on, the trace
/// pipeline. Keep it until exit, and drop it outside async code while the
/// runtime still runs: the last spans are sent first, then the lines still
/// buffered are written.
#[derive(Debug)]
pub struct Telemetry {
    #[cfg(feature = "otel")]
    traces: Option<traces::Traces>,
    log: Option<LogWriterGuard>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        drop(self.traces.take());
        drop(self.log.take());
    }
}

/// Installs the subscriber: the log and, when the `OTEL_*` variables ask
/// for them, traces (call it inside the Tokio runtime then: the gRPC
/// exporter's channel runs on it). Without a thread for the log's writer
/// the service runs without a log rather than not at all.
///
/// # Errors
/// One line naming an `OTEL_*` variable whose value cannot be used (C1:
/// exit status 2).
pub fn init(format: LogFormat) -> Result<Telemetry, String> {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    #[cfg(feature = "otel")]
    let traces = match traces::Settings::from_env()? {
        None => None,
        Some(settings) => Some(traces::start(&settings)?),
    };
    let (writer, guard) = match line_batches::start(std::io::stdout()) {
        Ok(started) => started,
        Err(error) => {
            eprintln!("items-service: no log: cannot start its writer thread: {error}");
            return Ok(Telemetry {
                #[cfg(feature = "otel")]
                traces: None,
                log: None,
            });
        }
    };
    let direct_writer = writer.clone();
    #[cfg(feature = "otel")]
    let traces = match traces {
        None => {
            install_log(filter, lines(format, writer));
            None
        }
        Some((traces, layer)) => {
            // Each layer filtered on its own: the log's `EnvFilter` would
            // otherwise disable the spans for every layer.
            let both_filter = EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
            // `try_init` so that a second call (never expected) is not a panic.
            let _ = tracing_subscriber::registry()
                .with(layer)
                .with(
                    lines_with_trace_ids(format, writer)
                        .with_filter(NotAClientFault)
                        .with_filter(filter),
                )
                .with(ClientFaults::default().with_filter(both_filter))
                .try_init();
            let _ = REQUEST_TRACER.set(Arc::new(traces::OtelRequestTracer::default()));
            Some(traces)
        }
    };
    #[cfg(not(feature = "otel"))]
    install_log(filter, lines(format, writer));
    // Text request lines skip the event and its formatter
    // (`request_lines.rs`); JSON ones stay events.
    if format == LogFormat::Text {
        let _ = REQUEST_LOG.set(request_lines::text_request_log(direct_writer));
    }
    Ok(Telemetry {
        #[cfg(feature = "otel")]
        traces,
        log: Some(guard),
    })
}

/// The log's line layer in `format`, writing through `writer`.
fn lines<S>(format: LogFormat, writer: line_batches::LineBatches) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    match format {
        LogFormat::Text => fmt::layer().with_ansi(false).with_writer(writer).boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(writer)
            .boxed(),
    }
}

/// [`lines`], each event logged inside a traced request ending with its
/// span's ids (`traces::WithTraceIds`).
#[cfg(feature = "otel")]
fn lines_with_trace_ids<S>(
    format: LogFormat,
    writer: line_batches::LineBatches,
) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    match format {
        LogFormat::Text => fmt::layer()
            .with_ansi(false)
            .with_writer(writer)
            .map_event_format(|format| traces::WithTraceIds::new(format, false))
            .boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(writer)
            .map_event_format(|format| traces::WithTraceIds::new(format, true))
            .boxed(),
    }
}

/// The subscriber of the log alone: one filter for every layer.
fn install_log(
    filter: EnvFilter,
    lines: Box<
        dyn Layer<tracing_subscriber::layer::Layered<EnvFilter, tracing_subscriber::Registry>>
            + Send
            + Sync,
    >,
) {
    // `try_init` so that a second call (never expected) is not a panic.
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(lines.with_filter(NotAClientFault))
        .with(ClientFaults::default())
        .try_init();
}

/// The server span's tracer [`init`] installed with traces on; unset
/// otherwise.
static REQUEST_TRACER: OnceLock<Arc<dyn RequestTracer>> = OnceLock::new();

/// What the HTTP adapter makes each request's server span with: `None`
/// while traces are off (no span, C11).
pub fn request_tracer() -> Option<Arc<dyn RequestTracer>> {
    REQUEST_TRACER.get().cloned()
}

/// The request log [`init`] installed; unset without it.
static REQUEST_LOG: OnceLock<Arc<dyn RequestLog>> = OnceLock::new();

/// Where the HTTP adapter writes its line per request: the installed log's
/// own sink, or `tracing` events when [`init`] was not called (tests and
/// embedders, whose subscriber then sees every line).
pub fn request_log() -> Arc<dyn RequestLog> {
    REQUEST_LOG
        .get()
        .cloned()
        .unwrap_or_else(|| Arc::new(TracingRequestLog))
}
