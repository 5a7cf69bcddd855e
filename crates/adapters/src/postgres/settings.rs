//! How a PostgreSQL store is sized and bounded, and how its change feed
//! (C14) reads and prunes.

use std::time::Duration;

use crate::sql::budget::DEFAULT_STATEMENT_TIMEOUT;

/// Connections per instance unless `DATABASE_POOL_SIZE` says otherwise (C1).
/// PostgreSQL's default `max_connections` is 100: ten instances of ten fit,
/// with room for administrators.
pub const DEFAULT_POOL_SIZE: u32 = 10;

/// How the pool is sized, how long one store operation may take, and how
/// the change feed (C14) reads and prunes.
#[derive(Debug, Clone, Copy)]
pub struct PostgresSettings {
    /// Connections at most (`DATABASE_POOL_SIZE`).
    pub pool_size: u32,
    /// The budget of one store operation (`DATABASE_STATEMENT_TIMEOUT_MS`):
    /// the server's `statement_timeout` and the client's deadline.
    pub statement_timeout: Duration,
    /// How long changes are kept for subscribers resuming with a cursor
    /// (`CHANGES_RETENTION`).
    pub changes_retention: Duration,
    /// How often the change feed reads the database while this instance
    /// has subscribers (its own commits wake it at once).
    pub changes_poll: Duration,
    /// How often this instance prunes changes past the retention.
    pub changes_prune_every: Duration,
}

/// `CHANGES_RETENTION`'s default: a day (C14).
pub const DEFAULT_CHANGES_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

impl Default for PostgresSettings {
    fn default() -> Self {
        Self {
            pool_size: DEFAULT_POOL_SIZE,
            statement_timeout: DEFAULT_STATEMENT_TIMEOUT,
            changes_retention: DEFAULT_CHANGES_RETENTION,
            changes_poll: Duration::from_millis(100),
            changes_prune_every: Duration::from_secs(60),
        }
    }
}
