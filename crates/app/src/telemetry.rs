//! Logging: one line per request from the HTTP adapter, as text or JSON
//! (`LOG_FORMAT`), at the level `RUST_LOG` asks for (default: [`DEFAULT_FILTER`]).
//!
//! Lines are handed to a background thread that writes them through a buffer
//! (`tracing-appender`'s non-blocking writer): a worker serving a request
//! formats its line but never waits on a `write` to stdout, and under load
//! many lines leave in one system call. Measured: the per-request log line
//! cost about 1.4 µs of CPU per request with a direct, line-buffered stdout
//! (`docs/performance.md`). If the queue ever fills (stdout blocked), further
//! lines are dropped rather than stalling requests.
//!
//! A client's faults that actix-http reports as errors are written as
//! rate-limited warnings instead ([`client_faults`]).

pub mod client_faults;
mod request_lines;

use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, fmt};

use client_faults::{ClientFaults, NotAClientFault};
use request_lines::TextLines;

use crate::config::LogFormat;

/// Lines that may wait for the writer thread. The queue is allocated up
/// front: the default of 128k lines costs 4 MiB of idle RSS, while 16k lines
/// still absorb a burst far longer than one write takes.
const QUEUED_LINES: usize = 16_384;

/// The filter when `RUST_LOG` is unset: `info`, without actix-server's
/// `starting N workers`, which it logs as each listener is built, before the
/// service's own start-up line. So the first line of the log is the
/// `listening` line, naming the addresses and the store (README). Its other
/// lines (shutdown of the workers) come from other modules and stay.
pub const DEFAULT_FILTER: &str = "info,actix_server::builder=warn";

/// Installs the subscriber. Keep the guard until exit: dropping it flushes
/// the lines still queued.
pub fn init(format: LogFormat) -> WorkerGuard {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let (writer, guard) = NonBlockingBuilder::default()
        .buffered_lines_limit(QUEUED_LINES)
        .finish(std::io::BufWriter::new(std::io::stdout()));
    let lines = match format {
        LogFormat::Text => fmt::layer()
            .with_ansi(false)
            .event_format(TextLines::default())
            .with_writer(writer)
            .boxed(),
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
    guard
}
