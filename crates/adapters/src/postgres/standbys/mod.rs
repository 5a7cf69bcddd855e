//! Standbys that serve reads (`DATABASE_READ_URL`, C13): one pool per
//! standby (`pools.rs`), opened with [`StandbySettings`]; the tracker that
//! polls them (`tracker.rs`) and what it last saw of each (`seen.rs`);
//! which standby may serve a read (`route.rs`); and the metrics of who
//! served each read and of each standby's lag (`telemetry.rs`).
//!
//! Invariants:
//! - a read is answered by a standby only if the position the standby
//!   reported *before* the read, on the read's own connection, meets the
//!   request's token (`scoped.rs`): the tracker's view only chooses where
//!   to try, it never vouches for a snapshot;
//! - a standby not in recovery (promoted), on another timeline than the
//!   primary, unreachable at its last poll, or (for reads without a
//!   token) lagging more than `DATABASE_READ_MAX_LAG_MS`, is not chosen;
//!   it is chosen again once a poll finds it healthy;
//! - the cost is one query per standby and one on the primary per
//!   interval, whatever the request rate.

mod pools;
mod route;
mod seen;
mod settings;
mod telemetry;
#[cfg(test)]
mod tests;
mod tracker;

pub(super) use pools::{Standby, Standbys};
#[cfg(test)]
pub(super) use seen::Seen;
pub use settings::{DEFAULT_READ_MAX_LAG, DEFAULT_READ_WAIT, StandbySettings};
pub(super) use telemetry::describe_metrics;
pub use telemetry::{READS, STANDBY_LAG, STANDBY_USABLE};
