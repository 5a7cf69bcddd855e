//! The writer: the one connection that writes, on a thread of its own,
//! applying the queued writes a batch per transaction (see
//! [`crate::batch`]).
//!
//! The connection is rusqlite's, used on the writer's thread: the thread
//! blocks for the next batch, runs its statements (`writes.rs`), commits and
//! answers each caller. (Through sqlx, every statement and every returned
//! row was a message to and from sqlx's own connection thread, on the core
//! the HTTP worker shares: `POST /items` over SQLite rose from about 34,000
//! to 44,000 req/s without it, docs/performance.md "SQLite".)
//!
//! Each batch runs between `BEGIN IMMEDIATE` and `COMMIT`. `IMMEDIATE` takes
//! the file's write lock at the start, waiting up to the busy timeout for
//! another process that holds it, instead of failing half-way with
//! `SQLITE_BUSY_SNAPSHOT` as a deferred transaction that reads before it
//! writes can. Every caller is answered only after `COMMIT` returned: with
//! `synchronous=FULL` the batch is then on disk. When any statement or the
//! commit fails, the batch is rolled back and every request in it is
//! answered [`RepositoryError::Unavailable`]: none of them is stored, and
//! telling a bad write from its innocent neighbours is not worth a second
//! attempt for a failure that is the disk's or the lock's, not a request's.
//!
//! Each write has a deadline, its budget (`DATABASE_STATEMENT_TIMEOUT_MS`)
//! from when it was queued. A write abandoned before the writer claimed it
//! (its deadline passed, or its caller stopped waiting: a client gone) is
//! never applied: the writer leaves such writes out when it takes a batch,
//! and claims the rest only once
//! `BEGIN IMMEDIATE` holds the lock, so a write that waited past its
//! deadline for another process's lock is answered 503 and not committed
//! afterwards. Claimed writes wait for their batch, which decides for all
//! of them ([`crate::batch`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use items_domain::{
    Id, IdempotencyKey, Item, Keyed, Name, Price, Product, Replaced, RepositoryError,
};
use rusqlite::{Connection, OpenFlags};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::batch::{Batch, Batches};

use super::WRITES_PER_COMMIT;
use super::writes::{Failure, transaction};

/// One write a repository asks for.
#[derive(Debug)]
pub(super) enum Write {
    CreateItem(Name),
    ReplaceItem {
        item: Item,
        expected: Option<Name>,
    },
    DeleteItem(Id),
    CreateProduct(Name, Price),
    /// A create under an idempotency key (C7), applied alone (`keys.rs`).
    CreateItemKeyed {
        name: Name,
        key: IdempotencyKey,
        at: SystemTime,
    },
    CreateProductKeyed {
        name: Name,
        price: Price,
        key: IdempotencyKey,
        at: SystemTime,
    },
}

/// What a write did, once committed.
#[derive(Debug)]
pub(super) enum Written {
    Item(Item),
    Replaced(Replaced),
    Deleted(bool),
    Product(Product),
    KeyedItem(Keyed<Item>),
    KeyedProduct(Keyed<Product>),
}

/// The answer a caller gets.
pub(super) type Reply = Result<Written, RepositoryError>;

/// Counts the writer keeps, for tests and operators.
#[derive(Debug, Default)]
pub(super) struct Counters {
    /// Transactions committed.
    pub(super) commits: AtomicU64,
}

/// Opens the writer's connection, set as sqlx set the one it replaces: WAL,
/// `synchronous=FULL` (C12), foreign keys enforced (sqlx's default), and
/// `busy_timeout` the statement budget. Prepared statements are kept
/// (`writes.rs`). `NO_MUTEX`: only the writer's thread uses it.
pub(super) fn connect(path: &Path, busy_timeout: Duration) -> rusqlite::Result<Connection> {
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(busy_timeout)?;
    // The mode SQLite answers is not needed: the file is WAL already
    // (migrated through a WAL connection), as it was for sqlx.
    connection
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))?;
    connection.pragma_update(None, "foreign_keys", "ON")?;
    connection.pragma_update(None, "synchronous", "FULL")?;
    connection.set_prepared_statement_cache_capacity(super::writes::STATEMENT_CACHE);
    Ok(connection)
}

/// Runs on the writer's thread until the queue is closed and drained or
/// `stop` fires; then closes the queue, answers what is still in it, and
/// closes the connection. `runtime` only drives the wait for the next
/// batch (queue and stop signal are Tokio channels; no timer is used).
pub(super) fn run(
    connection: Connection,
    mut batches: Batches<Write, Reply>,
    mut stop: oneshot::Receiver<()>,
    counters: Arc<Counters>,
    runtime: Handle,
) {
    let mut stopping = false;
    loop {
        let batch = runtime.block_on(async {
            loop {
                tokio::select! {
                    batch = batches.next() => return batch,
                    _ = &mut stop, if !stopping => {
                        stopping = true;
                        batches.close();
                    }
                }
            }
        });
        let Some(batch) = batch else { break };
        apply(&connection, batch, &counters);
    }
    // Closing the last connection checkpoints the WAL into the file.
    let _ = connection.close();
}

/// Applies one batch in one transaction and answers each of its requests;
/// the writes abandoned before the lock was held are left out.
fn apply(connection: &Connection, mut batch: Batch<Write, Reply>, counters: &Counters) {
    batch.prune();
    if batch.is_empty() {
        return;
    }
    if let Err(error) = connection.execute_batch("BEGIN IMMEDIATE") {
        return fail(connection, batch, error.into());
    }
    batch.claim();
    if batch.is_empty() {
        let _ = connection.execute_batch("ROLLBACK");
        return;
    }
    let committed = transaction(connection, batch.work()).and_then(|written| {
        connection.execute_batch("COMMIT")?;
        Ok(written)
    });
    match committed {
        Ok(written) => {
            counters.commits.fetch_add(1, Ordering::Relaxed);
            metrics::histogram!(WRITES_PER_COMMIT).record(batch.len() as f64);
            batch.answer(written.into_iter().map(Ok));
        }
        Err(error) => fail(connection, batch, error),
    }
}

/// Rolls back what the batch wrote and answers each of its requests 503.
fn fail(connection: &Connection, batch: Batch<Write, Reply>, error: Failure) {
    // Ends the transaction if the failure left it open; without one SQLite
    // says so, which changes nothing.
    let _ = connection.execute_batch("ROLLBACK");
    tracing::error!(
        error = %error,
        writes = batch.len(),
        "a SQLite write batch failed; none of it was stored"
    );
    let cause: Arc<dyn std::error::Error + Send + Sync> = Arc::from(error);
    batch.answer_each(|_| Err(RepositoryError::unavailable(Arc::clone(&cause))));
}
