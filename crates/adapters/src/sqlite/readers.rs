//! The reader pool: at most [`SqliteSettings::readers`] read-only
//! connections for every read that is not by id (pages, the full listing,
//! products, users, the health check).
//!
//! Invariants:
//! - a [`Reader`] holds one connection alone; [`Reader::release`] gives it
//!   back with no transaction open (one left open, as by a listing whose
//!   client went away, is rolled back there, releasing its snapshot); a
//!   reader dropped without it closes its connection, which ends any
//!   transaction too, and the pool opens another when needed;
//! - at most `readers` reads run at once; a read waits for a free
//!   connection at most the store's budget, then is answered 503
//!   ([`over_budget`]);
//! - connections are opened when first needed (one at [`Readers::open`],
//!   so a file that cannot be read fails at start) and kept;
//! - [`Readers::close`] waits for the reads in progress; every read after
//!   it is answered unavailable;
//! - a read sees every commit made before it began (WAL), and the writer
//!   answers only after its commit: a read after an acknowledged write sees
//!   it.
//!
//! Why not sqlx's pool: each of its reads was a hand-off to the
//! connection's own thread and back; off it, `GET /items/{id}` went from
//! 18–23 to 9–11.7 CPU µs per request, docs/performance.md "The SQLite
//! store, measured".
//!
//! [`SqliteSettings::readers`]: super::settings::SqliteSettings::readers

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use items_domain::RepositoryError;
use parking_lot::Mutex;
use rusqlite::Connection;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

use super::connections::read_only;
use crate::sql::budget::over_budget;

/// Read-only connections to one file; clones share them.
#[derive(Debug, Clone)]
pub(super) struct Readers {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    /// The busy timeout of each connection, and the longest wait for one.
    budget: Duration,
    /// One permit per connection that may be in use; closed by `close`.
    permits: Arc<Semaphore>,
    /// Connections at most: the permits there are.
    size: u32,
    /// Connections opened and not in use.
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    /// A pool of at most `size` (at least one) connections to `path`, the
    /// first opened now.
    pub(super) fn open(path: &Path, size: u32, budget: Duration) -> rusqlite::Result<Self> {
        let size = size.max(1);
        let first = read_only(path, budget)?;
        // Reads the schema: a file that is no database fails here.
        first.query_row("select count(*) from sqlite_schema", [], |_| Ok(()))?;
        Ok(Self {
            shared: Arc::new(Shared {
                path: path.to_owned(),
                budget,
                permits: Arc::new(Semaphore::new(size as usize)),
                size,
                idle: Mutex::new(vec![first]),
            }),
        })
    }

    /// A connection of the pool, waiting at most the budget for one.
    ///
    /// # Errors
    /// [`RepositoryError::Unavailable`] past the budget ([`over_budget`]),
    /// once the pool is closed, or when a new connection cannot be opened.
    pub(super) async fn acquire(&self) -> Result<Reader, RepositoryError> {
        let shared = &self.shared;
        let permit = match Arc::clone(&shared.permits).try_acquire_owned() {
            Ok(permit) => permit,
            Err(TryAcquireError::Closed) => return Err(closed()),
            Err(TryAcquireError::NoPermits) => {
                let waited = tokio::time::timeout(
                    shared.budget,
                    Arc::clone(&shared.permits).acquire_owned(),
                );
                match waited.await {
                    Ok(Ok(permit)) => permit,
                    Ok(Err(_)) => return Err(closed()),
                    Err(_) => return Err(over_budget(shared.budget)),
                }
            }
        };
        let idle = shared.idle.lock().pop();
        let connection = match idle {
            Some(connection) => connection,
            None => read_only(&shared.path, shared.budget).map_err(RepositoryError::unavailable)?,
        };
        Ok(Reader {
            connection,
            shared: Arc::clone(shared),
            _permit: permit,
        })
    }

    /// Runs `read` on a connection of the pool on the calling thread: for a
    /// read whose cost is bounded and small.
    pub(super) async fn read_here<T>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, RepositoryError>,
    ) -> Result<T, RepositoryError> {
        let reader = self.acquire().await?;
        let read = read(&reader);
        reader.release();
        read
    }

    /// Runs `read` on a connection of the pool on a blocking thread: for a
    /// read whose cost grows with what it finds.
    pub(super) async fn read_blocking<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, RepositoryError> + Send + 'static,
    ) -> Result<T, RepositoryError> {
        let reader = self.acquire().await?;
        tokio::task::spawn_blocking(move || {
            let read = read(&reader);
            reader.release();
            read
        })
        .await
        .map_err(RepositoryError::unavailable)?
    }

    /// Waits for the reads in progress, then closes every connection;
    /// later reads are answered unavailable.
    pub(super) async fn close(&self) {
        let shared = &self.shared;
        // Fair: reads that were waiting go first, later ones wait behind.
        if let Ok(all) = shared.permits.acquire_many(shared.size).await {
            shared.permits.close();
            shared.idle.lock().clear();
            drop(all);
        }
    }
}

/// Runs `read` in one read transaction on `connection`, so its statements
/// see one snapshot. On a failure the transaction is left open for
/// [`Reader::release`] to roll back.
pub(super) fn in_one_snapshot<T>(
    connection: &Connection,
    read: impl FnOnce() -> Result<T, RepositoryError>,
) -> Result<T, RepositoryError> {
    let run = |sql| {
        connection
            .prepare_cached(sql)
            .and_then(|mut statement| statement.execute([]))
            .map_err(RepositoryError::unavailable)
    };
    run("BEGIN")?;
    let read = read()?;
    run("COMMIT")?;
    Ok(read)
}

fn closed() -> RepositoryError {
    RepositoryError::unavailable("the SQLite store is closed")
}

/// One connection of the pool, in use.
#[derive(Debug)]
pub(super) struct Reader {
    connection: Connection,
    shared: Arc<Shared>,
    /// Released after the connection is back in the pool.
    _permit: OwnedSemaphorePermit,
}

impl Reader {
    /// Gives the connection back to the pool, with no transaction open.
    pub(super) fn release(self) {
        let Self {
            connection,
            shared,
            _permit,
        } = self;
        // A transaction left open would keep serving its old snapshot to
        // the next read: end it, or close the connection.
        if connection.is_autocommit() || connection.execute_batch("ROLLBACK").is_ok() {
            shared.idle.lock().push(connection);
        }
    }
}

impl Deref for Reader {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.connection
    }
}
