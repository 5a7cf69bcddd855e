//! The standbys' metrics: who served each read, and each standby's lag
//! and usability as the tracker last saw them.

/// Reads counted by who served them: `role="primary"` or `"standby"`.
pub const READS: &str = "database_reads_total";
/// Each standby's replay lag in seconds at its last poll (`standby` label:
/// its `host:port`); absent while it was never reached.
pub const STANDBY_LAG: &str = "database_standby_lag_seconds";
/// Whether each standby may serve reads now (1) or not (0).
pub const STANDBY_USABLE: &str = "database_standby_usable";

/// Describes the standbys' metrics to the installed recorder.
pub(in crate::postgres) fn describe_metrics() {
    metrics::describe_counter!(
        READS,
        "Reads of items and products by who served them: role=\"primary\" or \"standby\" (C13)."
    );
    metrics::describe_gauge!(
        STANDBY_LAG,
        metrics::Unit::Seconds,
        "Each standby's replay lag at its last poll: how long ago the primary reached what it replayed (C13)."
    );
    metrics::describe_gauge!(
        STANDBY_USABLE,
        "Whether each standby may serve reads now: in recovery, on the primary's timeline, reachable (C13)."
    );
}
