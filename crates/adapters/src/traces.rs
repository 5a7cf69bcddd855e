//! The spans the adapters emit for traces (C11): plain `tracing` spans on
//! the target [`TARGET`] at `TRACE` level, which a binary that exports
//! traces turns into OpenTelemetry spans, and which nobody sees otherwise.
//!
//! Invariants:
//! - every span of a trace is made here or with `target: TARGET` at
//!   `TRACE`; the log's filter (`RUST_LOG`, default `info`) does not enable
//!   that target, so while no trace layer is installed their callsites are
//!   disabled and a span costs one comparison of levels, no object;
//! - the fields follow OpenTelemetry's semantic conventions by name
//!   (`db.system.name`, `db.operation.name`, …); `otel.name`, `otel.kind`
//!   and `otel.status_code` are the trace layer's own (the span's name,
//!   kind and status), and a `follows_from` becomes a span link;
//! - a request queued for a batch ([`crate::batch`]) carries the span it
//!   was queued from ([`current`]); the batch's span and each request's
//!   are linked both ways ([`crate::batch::Batch::trace`]), and the
//!   request's span records the batch's size as `db.batch.size`.
//!
//! Why: the adapters name no OpenTelemetry crate, and traces off cost
//! nothing measurable (docs/performance.md, "Traces, measured").

use tracing::Span;
use tracing::field::Empty;

/// The target of every span of a trace, as `RUST_LOG` would name it.
pub const TARGET: &str = "items_service::trace";

/// Whether a layer wants the spans of a trace now: false unless the
/// binary installed one (or `RUST_LOG` asks for the target at `trace`).
pub fn enabled() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::TRACE)
}

/// The span the caller runs in when traces are on, else none: what a
/// queued request carries to the batch that serves it.
pub fn current() -> Span {
    if enabled() {
        Span::current()
    } else {
        Span::none()
    }
}

/// A client span for one operation of a store on one collection, named as
/// the conventions name database spans: `SELECT items`. `db.batch.size`
/// is recorded when the operation waited for a batch.
pub fn store_operation(
    system: &'static str,
    operation: &'static str,
    collection: &'static str,
) -> Span {
    tracing::trace_span!(
        target: TARGET,
        "store",
        otel.name = format!("{operation} {collection}"),
        otel.kind = "client",
        db.system.name = system,
        db.operation.name = operation,
        db.collection.name = collection,
        db.batch.size = Empty,
    )
}

/// The client span of one coalesced statement, transaction or script
/// call, serving every request of a batch: `BATCH SELECT items`,
/// `BATCH EVALSHA`, or `BATCH` alone for a transaction of several kinds of
/// statements (the conventions' name for it). Its links and
/// `db.operation.batch.size` come from [`crate::batch::Batch::trace`].
pub fn batch_operation(
    system: &'static str,
    operation: Option<&'static str>,
    collection: Option<&'static str>,
) -> Span {
    let operation = match operation {
        Some(operation) => format!("BATCH {operation}"),
        None => "BATCH".to_owned(),
    };
    let name = match collection {
        Some(collection) => format!("{operation} {collection}"),
        None => operation.clone(),
    };
    tracing::trace_span!(
        target: TARGET,
        "batch",
        otel.name = name,
        otel.kind = "client",
        db.system.name = system,
        db.operation.name = operation,
        db.collection.name = collection,
        db.operation.batch.size = Empty,
    )
}

/// The client span of one rate-limit decision in Redis (C9): an
/// `EVALSHA` of the GCRA script, alone or in a batch.
pub fn limiter_call() -> Span {
    tracing::trace_span!(
        target: TARGET,
        "limiter",
        otel.name = "EVALSHA",
        otel.kind = "client",
        db.system.name = "redis",
        db.operation.name = "EVALSHA",
        db.batch.size = Empty,
    )
}
