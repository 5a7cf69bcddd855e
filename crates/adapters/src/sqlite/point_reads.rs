//! Point reads (one item by its id) on the calling thread, through a few
//! read-only connections of their own: one per core, at least two.
//!
//! Invariants:
//! - each connection has its own mutex (the connections are opened
//!   `NO_MUTEX`); a read takes the first free one, and waits only when
//!   every connection is busy;
//! - each connection keeps its statement prepared (`prepare_cached`);
//! - each read is its own implicit transaction, which in WAL mode sees
//!   every transaction committed before it began, and the writer commits
//!   before it answers: a read after an acknowledged write sees it;
//! - a read waits up to the busy timeout only when another process holds
//!   the file in a way readers must wait for (WAL recovery), blocking the
//!   calling thread as any lock held that long would;
//! - after [`PointReads::close`] every read is answered unavailable.
//!
//! Why on the calling thread: `GET /items/{id}` over SQLite 18–23 →
//! 9–11.7 CPU µs per request, docs/performance.md "The SQLite store,
//! measured".

use std::path::Path;
use std::time::Duration;

use items_domain::{Id, Item, RepositoryError};
use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension};

use super::connections::read_only;
use crate::sql::rows::stored_name;

/// Read-only connections to one file; `None` once [`PointReads::close`]d.
#[derive(Debug)]
pub(super) struct PointReads {
    connections: Box<[Mutex<Option<Connection>>]>,
}

impl PointReads {
    /// Opens one read-only connection per core (at least two) to `path`.
    pub(super) fn open(path: &Path, busy_timeout: Duration) -> rusqlite::Result<Self> {
        let count = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        let connections = (0..count)
            .map(|_| read_only(path, busy_timeout).map(|connection| Mutex::new(Some(connection))))
            .collect::<rusqlite::Result<_>>()?;
        Ok(Self { connections })
    }

    /// The item with `id`, if any.
    pub(super) fn item(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        let row = self.read(|connection| {
            connection
                .prepare_cached("select name from items where id = ?1")?
                .query_row([id.get()], |row| {
                    Ok(stored_name(id.get(), row.get_ref(0)?.as_bytes()?))
                })
                .optional()
        })?;
        row.transpose()
            .map(|name| name.map(|name| Item { id, name }))
    }

    /// The tally row's `(version, items)`, the full listing's head (C7):
    /// one row, read in one statement.
    pub(super) fn tally(&self) -> Result<(i64, i64), RepositoryError> {
        self.read(|connection| {
            connection
                .prepare_cached("select version, items from item_tally")?
                .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
        })
    }

    /// Runs `read` on the first free connection, or waits for one when all
    /// are busy.
    fn read<T>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, RepositoryError> {
        let guard = self
            .connections
            .iter()
            .find_map(Mutex::try_lock)
            .unwrap_or_else(|| self.connections[busy_slot(self.connections.len())].lock());
        let connection = guard
            .as_ref()
            .ok_or_else(|| RepositoryError::unavailable("the SQLite store is closed"))?;
        read(connection).map_err(RepositoryError::unavailable)
    }

    /// Closes every connection (waiting for reads in progress); later reads
    /// are answered unavailable.
    pub(super) fn close(&self) {
        for connection in &self.connections {
            drop(connection.lock().take());
        }
    }
}

/// Which connection to wait for when all are busy: spread over them, so
/// waiting readers do not all pile onto the first.
fn busy_slot(count: usize) -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed) % count
}
