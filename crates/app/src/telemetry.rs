//! Logging: one line per request from the HTTP adapter, as text or JSON
//! (`LOG_FORMAT`), at the level `RUST_LOG` asks for (default: [`DEFAULT_FILTER`]).
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

pub mod client_faults;
mod line_batches;
mod request_lines;

use std::sync::{Arc, OnceLock};

use items_adapters::http::{RequestLog, TracingRequestLog};
use tracing_subscriber::layer::SubscriberExt;
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

/// Installs the subscriber. Keep the guard until exit: dropping it writes
/// the lines still buffered. `None` when no thread could be started for the
/// writer: the service then runs without a log rather than not at all.
pub fn init(format: LogFormat) -> Option<LogWriterGuard> {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let (writer, guard) = match line_batches::start(std::io::stdout()) {
        Ok(started) => started,
        Err(error) => {
            eprintln!("items-service: no log: cannot start its writer thread: {error}");
            return None;
        }
    };
    let direct_writer = writer.clone();
    let lines = match format {
        LogFormat::Text => fmt::layer().with_ansi(false).with_writer(writer).boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(writer)
            .boxed(),
    };
    // `try_init` so that a second call (never expected) is not a panic.
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(lines.with_filter(NotAClientFault))
        .with(ClientFaults::default())
        .try_init();
    // Text request lines skip the event and its formatter
    // (`request_lines.rs`); JSON ones stay events.
    if format == LogFormat::Text {
        let _ = REQUEST_LOG.set(request_lines::text_request_log(direct_writer));
    }
    Some(guard)
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
