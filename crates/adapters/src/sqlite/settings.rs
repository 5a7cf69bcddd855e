//! How a SQLite store is opened: its readers, its budget, its writer's
//! queue, its `-wal` bound and how its change feed keeps and reads.

use std::time::Duration;

use super::file::DEFAULT_WAL_LIMIT;

/// How the store is opened; [`SqliteSettings::default`] suits the service.
#[derive(Debug, Clone)]
pub struct SqliteSettings {
    /// Connections of the reader pool at most (at least one is used):
    /// every read but the one by id, which has connections of its own (one
    /// per core).
    pub readers: u32,
    /// The budget of one store operation (`DATABASE_STATEMENT_TIMEOUT_MS`):
    /// how long a connection waits for a lock another process holds before
    /// the operation fails (503), how long a read waits for a free reader,
    /// and how long a write may wait to be taken up by the writer before it
    /// is answered 503 and left undone (`writer.rs`).
    pub busy_timeout: Duration,
    /// Writes that may wait for the writer; more wait for room.
    pub queue: usize,
    /// The bytes past which the writer truncates the `-wal` file as soon
    /// as no reader pins it (`file.rs`).
    pub wal_limit: u64,
    /// How long changes are kept for subscribers resuming with a cursor
    /// (`CHANGES_RETENTION`, C14).
    pub changes_retention: Duration,
    /// How often the change feed reads the file while this process has
    /// subscribers, for changes other processes committed (this process's
    /// own commits wake it at once).
    pub changes_poll: Duration,
}

/// `CHANGES_RETENTION`'s default: a day (C14).
pub const DEFAULT_CHANGES_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

impl Default for SqliteSettings {
    fn default() -> Self {
        Self {
            readers: 4,
            busy_timeout: crate::sql::budget::DEFAULT_STATEMENT_TIMEOUT,
            queue: 1024,
            wal_limit: DEFAULT_WAL_LIMIT,
            changes_retention: DEFAULT_CHANGES_RETENTION,
            changes_poll: Duration::from_millis(100),
        }
    }
}
