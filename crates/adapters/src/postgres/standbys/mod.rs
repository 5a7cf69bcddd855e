//! Standbys that serve reads (`DATABASE_READ_URL`, C13): one pool per
//! standby, what the tracker last saw of each (`tracker.rs`), and which
//! standby may serve a read (`route.rs`).
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

mod route;
#[cfg(test)]
mod tests;
mod tracker;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::hosts::Hosts;
use super::items::PostgresItemRepository;
use super::pool::{Manager, Pool};
use super::positions::Latest;
use super::products::PostgresProductRepository;
use super::url::PostgresUrl;
use crate::sql::turns::ListingTurns;

pub(super) use tracker::Samples;
#[cfg(test)]
pub(super) use tracker::Seen;

/// Reads counted by who served them: `role="primary"` or `"standby"`.
pub const READS: &str = "database_reads_total";
/// Each standby's replay lag in seconds at its last poll (`standby` label:
/// its `host:port`); absent while it was never reached.
pub const STANDBY_LAG: &str = "database_standby_lag_seconds";
/// Whether each standby may serve reads now (1) or not (0).
pub const STANDBY_USABLE: &str = "database_standby_usable";

/// How long a read with a token waits for a standby by default
/// (`DATABASE_READ_WAIT_MS`).
pub const DEFAULT_READ_WAIT: Duration = Duration::from_millis(100);
/// The most replay lag a standby may have to serve reads without a token,
/// by default (`DATABASE_READ_MAX_LAG_MS`).
pub const DEFAULT_READ_MAX_LAG: Duration = Duration::from_millis(1000);

/// How reads go to standbys (C1, C13).
#[derive(Debug, Clone, Copy)]
pub struct StandbySettings {
    /// How long a read with a token waits for a standby to replay it
    /// before the primary serves it (`DATABASE_READ_WAIT_MS`).
    pub wait: Duration,
    /// The most replay lag of a standby serving reads without a token
    /// (`DATABASE_READ_MAX_LAG_MS`).
    pub max_lag: Duration,
    /// How often the tracker polls while no read waits.
    pub interval: Duration,
    /// How often it polls while a read waits for a standby.
    pub eager_interval: Duration,
    /// Connections per standby at most.
    pub pool_size: u32,
}

impl Default for StandbySettings {
    fn default() -> Self {
        Self {
            wait: DEFAULT_READ_WAIT,
            max_lag: DEFAULT_READ_MAX_LAG,
            interval: Duration::from_millis(50),
            eager_interval: Duration::from_millis(5),
            pool_size: 4,
        }
    }
}

/// One standby: its pool, its repositories and what its last poll found.
#[derive(Debug)]
pub(super) struct Standby {
    pub(super) label: String,
    pub(super) pool: Pool,
    pub(super) items: PostgresItemRepository,
    pub(super) products: PostgresProductRepository,
    pub(super) seen: Mutex<tracker::Seen>,
}

/// The store's standbys, shared by every request.
#[derive(Debug)]
pub(super) struct Standbys {
    pub(super) standbys: Vec<Standby>,
    pub(super) settings: StandbySettings,
    /// The primary's positions, sampled by the tracker.
    pub(super) samples: Mutex<Samples>,
    /// Woken after every poll of a standby: reads waiting for a token.
    pub(super) polled: Notify,
    /// Woken when a read starts waiting: the tracker's tasks poll at once.
    pub(super) hurry: Notify,
    /// Reads waiting for a standby now: the tracker polls eagerly.
    pub(super) waiting: AtomicUsize,
    /// Where the next read without a token starts looking (round robin).
    pub(super) next: AtomicUsize,
}

impl Standbys {
    /// A pool per host of `url`, each of at most `settings.pool_size`
    /// connections (opened as reads need them, not at start), with the
    /// primary's statement `options` and `budget`, and the tracker's tasks
    /// started (polling `primary` too).
    pub(super) fn start(
        url: &PostgresUrl,
        settings: StandbySettings,
        options: &str,
        budget: Duration,
        primary: Pool,
    ) -> Arc<Self> {
        let standbys = Self::new(url, settings, options, budget);
        tracker::spawn(&standbys, primary);
        standbys
    }

    /// The pools, without the tracker.
    pub(super) fn new(
        url: &PostgresUrl,
        settings: StandbySettings,
        options: &str,
        budget: Duration,
    ) -> Arc<Self> {
        let standbys = url
            .each_host()
            .into_iter()
            .map(|host| {
                let label = host.to_string();
                let manager = Manager {
                    hosts: Arc::new(Hosts::new(&host, options)),
                    budget,
                    latest: Arc::new(Latest::default()),
                };
                let pool = Pool::builder(manager)
                    .max_size(settings.pool_size.max(1) as usize)
                    .build()
                    .expect("a pool without timeouts needs no runtime");
                Standby {
                    items: PostgresItemRepository::on_standby(
                        pool.clone(),
                        ListingTurns::of(settings.pool_size),
                    ),
                    products: PostgresProductRepository::on_standby(pool.clone()),
                    pool,
                    label,
                    seen: Mutex::new(tracker::Seen::default()),
                }
            })
            .collect();
        Arc::new(Self {
            standbys,
            settings,
            samples: Mutex::new(Samples::default()),
            polled: Notify::new(),
            hurry: Notify::new(),
            waiting: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
        })
    }

    /// Counts a read served by `role` (C13's metric).
    pub(super) fn count(role: &'static str) {
        metrics::counter!(READS, "role" => role).increment(1);
    }

    /// Whether some read waits for a standby now.
    fn eager(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// Closes every standby's connections.
    pub(super) async fn close(&self) {
        for standby in &self.standbys {
            super::pool::close(&standby.pool).await;
        }
    }
}

/// Describes the standbys' metrics to the installed recorder.
pub(super) fn describe_metrics() {
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
