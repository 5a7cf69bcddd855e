//! What a client does wrong is not the service's fault: actix-http logs a
//! malformed request, a reset connection or a request that timed out as an
//! `ERROR` (`stream error: …`, target `actix_http::h1::dispatcher`), so any
//! client could write unlimited `ERROR` lines and bury the service's own
//! faults among them. Here those lines are kept out of the log
//! ([`NotAClientFault`]) and replaced by at most [`LINES_PER_SECOND`]
//! `WARN` lines a second, target `items_service::client`, each saying how
//! many were left out before it ([`ClientFaults`]). `ERROR` stays for the
//! service's own faults.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, Layer};

/// At most this many client-fault lines are written per second.
pub const LINES_PER_SECOND: u32 = 10;
const WINDOW: Duration = Duration::from_secs(1);

/// Where actix-http logs what happens on a connection.
const DISPATCHER: &str = "actix_http::h1::dispatcher";

/// How actix-http's messages about a client's failure begin (its
/// `DispatchError`s a client causes, and a peer that stopped reading).
/// Anything else it logs (a response body that failed, an internal error)
/// is the service's and stays an `ERROR`.
const CLIENT_FAULTS: [&str; 6] = [
    "stream error: I/O error",
    "stream error: request parse error",
    "stream error: request did not complete",
    "stream error: connection shutdown timeout",
    "stream error: handler dropped payload",
    "write zero",
];

/// The message of `event` when it reports a client's fault.
fn client_fault(event: &Event<'_>) -> Option<String> {
    if !event.metadata().target().starts_with(DISPATCHER) {
        return None;
    }
    let mut message = Message(String::new());
    event.record(&mut message);
    CLIENT_FAULTS
        .iter()
        .any(|fault| message.0.starts_with(fault))
        .then_some(message.0)
}

/// Reads an event's `message` field.
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        }
    }
}

/// The log writer's filter: every event but a client's fault.
#[derive(Debug, Clone, Copy)]
pub struct NotAClientFault;

impl<S: Subscriber> Filter<S> for NotAClientFault {
    fn enabled(&self, _: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }

    /// Only actix-http's dispatcher logs client faults: every other
    /// callsite passes without its events being looked at, and is cached
    /// as such by tracing.
    fn callsite_enabled(&self, metadata: &'static Metadata<'static>) -> Interest {
        if metadata.target().starts_with(DISPATCHER) {
            Interest::sometimes()
        } else {
            Interest::always()
        }
    }

    /// No opinion on levels: the global `RUST_LOG` filter decides them.
    fn max_level_hint(&self) -> Option<LevelFilter> {
        None
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        client_fault(event).is_none()
    }
}

/// Writes each client fault again as a rate-limited `WARN`.
#[derive(Debug)]
pub struct ClientFaults {
    window: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    written: u32,
    /// Faults left out since the last line written.
    suppressed: u64,
}

impl Default for ClientFaults {
    fn default() -> Self {
        Self {
            window: Mutex::new(Window {
                started: Instant::now(),
                written: 0,
                suppressed: 0,
            }),
        }
    }
}

impl ClientFaults {
    /// `Some(faults left out before this one)` when this one may be
    /// written, `None` when it is left out.
    fn admit(&self) -> Option<u64> {
        // A poisoned lock only means another thread panicked mid-count;
        // the count is still good enough for a log line.
        let mut window = self
            .window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if window.started.elapsed() >= WINDOW {
            window.started = Instant::now();
            window.written = 0;
        }
        if window.written >= LINES_PER_SECOND {
            window.suppressed += 1;
            return None;
        }
        window.written += 1;
        Some(std::mem::take(&mut window.suppressed))
    }
}

impl<S: Subscriber> Layer<S> for ClientFaults {
    /// The faults it rewrites are `ERROR`s. Without a hint, tracing would
    /// assume this layer wants every level, lift the process's maximum level
    /// to `TRACE`, and every disabled `trace!` in actix-http (eight per
    /// request) would cost a filter call instead of one comparison
    /// (callgrind: 600 instructions per request).
    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::ERROR)
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let Some(message) = client_fault(event) else {
            return;
        };
        if let Some(suppressed) = self.admit() {
            tracing::warn!(
                target: "items_service::client",
                suppressed,
                "a client's request or connection failed: {message}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_rate_a_fault_is_left_out_and_counted_on_the_next_line() {
        let faults = ClientFaults::default();
        for _ in 0..LINES_PER_SECOND {
            assert_eq!(faults.admit(), Some(0));
        }
        assert_eq!(faults.admit(), None);
        assert_eq!(faults.admit(), None);

        faults
            .window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .started -= WINDOW;

        assert_eq!(faults.admit(), Some(2));
        assert_eq!(faults.admit(), Some(0));
    }
}
