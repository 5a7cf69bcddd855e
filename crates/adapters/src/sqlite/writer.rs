//! The writer: the one connection that writes, owned by a thread of its
//! own, applying the queued writes a batch per transaction
//! ([`crate::batch`]); and [`Writer`], the repositories' way to it.
//!
//! Invariants:
//! - every write to the file goes through this thread, which alone uses
//!   its connection; the statements are `writes.rs`'s and `keys.rs`'s;
//! - a batch runs between `BEGIN IMMEDIATE` and `COMMIT`: the file's write
//!   lock is taken first (waiting up to the busy timeout for another
//!   process holding it), never half-way with `SQLITE_BUSY_SNAPSHOT` as a
//!   deferred transaction that reads before it writes can;
//! - every caller is answered only after `COMMIT` returned, with
//!   `synchronous=FULL` on disk by then (C12); when any statement or the
//!   commit fails, the whole batch is rolled back and each of its writes
//!   answered [`RepositoryError::Unavailable`]: none is stored (a failure
//!   of the disk or the lock is no single request's, so telling a bad write
//!   from its neighbours is not worth a second attempt);
//! - before each batch the writer checks that the file it has open still
//!   has a name (`file.rs`, one `fstat`): a file deleted or replaced under
//!   the service fails every batch (503), never acknowledges a write into a
//!   file nobody will open again (C12); after each commit it keeps the
//!   `-wal` file within its bound, and wakes this process's change-feed
//!   poller (C14: the changes themselves are written by the schema's
//!   triggers, in the batch's transaction);
//! - each batch prunes a few changes past the retention inside its own
//!   transaction (`changes.rs`): no commit of its own, no wait;
//! - a write has a deadline, its budget (`DATABASE_STATEMENT_TIMEOUT_MS`)
//!   from when it was queued; one abandoned before the writer claimed it
//!   (deadline passed, or caller gone) is never applied: the writer leaves
//!   such writes out when it takes a batch and claims the rest only once
//!   `BEGIN IMMEDIATE` holds the lock, so a write that waited past its
//!   deadline for another process's lock is answered 503 and not committed
//!   afterwards. Claimed writes wait for their batch, which decides for all
//!   of them.
//!
//! Why a thread of its own on rusqlite: `POST /items` over SQLite 32.0–35.5k
//! → 41–46k req/s, docs/performance.md "The SQLite store, measured".

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use items_domain::RepositoryError;
use parking_lot::Mutex;
use rusqlite::Connection;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::batch::{self, Batch, Batches};
use crate::changes::durable::DurableFeed;

use super::changes::Pruner;
use super::file::{StoreFile, WalLimit};
use super::messages::{Failure, Reply, Write, Written};
use super::settings::SqliteSettings;
use super::writes::{STATEMENT_CACHE, transaction};

/// Writes waiting for the writer now (a gauge, set at scrape time).
pub const WRITER_QUEUE_DEPTH: &str = "sqlite_writer_queue_depth";
/// How many writes each commit held (a histogram, one sample per commit).
pub const WRITES_PER_COMMIT: &str = "sqlite_writes_per_commit";
/// Buckets for [`WRITES_PER_COMMIT`]: powers of two up to the default
/// queue (a recorder without buckets renders a summary instead).
pub const WRITES_PER_COMMIT_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// The repositories' way to the writer thread; clones share it.
#[derive(Debug, Clone)]
pub(super) struct Writer {
    queue: batch::Queue<Write, Reply>,
    /// How long a write may wait to be taken up (the store's budget).
    budget: Duration,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Transactions committed.
    commits: Arc<AtomicU64>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    /// Fires when the writer's thread has closed its connection.
    finished: Mutex<Option<oneshot::Receiver<()>>>,
}

impl Writer {
    /// Starts the thread that owns `connection` (a writing one,
    /// `connections.rs`, to `file`) and applies queued writes; at most
    /// `settings.queue` writes wait for it. Needs a Tokio runtime.
    pub(super) fn start(
        connection: Connection,
        file: Arc<StoreFile>,
        feed: DurableFeed,
        settings: &SqliteSettings,
    ) -> Self {
        let budget = settings.busy_timeout;
        // The statements of `writes.rs` and `keys.rs`, each prepared once.
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let wal = WalLimit::set(&connection, settings.wal_limit)
            .inspect_err(|error| {
                tracing::warn!(%error, "journal_size_limit could not be set; the SQLite write-ahead log is not bounded");
            })
            .ok();
        let (queue, batches) = batch::queue(settings.queue);
        let (stop, stopped) = oneshot::channel();
        let (finish, finished) = oneshot::channel();
        let commits = Arc::new(AtomicU64::new(0));
        let runtime = Handle::current();
        let thread_commits = Arc::clone(&commits);
        let changes = Changes {
            pruner: Pruner::new(settings.changes_retention),
            feed,
        };
        let spawned = std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || {
                let disk = Disk {
                    file,
                    wal,
                    busy: budget,
                };
                run(
                    connection,
                    disk,
                    changes,
                    batches,
                    stopped,
                    &thread_commits,
                    &runtime,
                );
                let _ = finish.send(());
            });
        if let Err(error) = spawned {
            // The queue's receiving end went with the closure: every write
            // is answered unavailable, and the health check says so.
            tracing::error!(%error, "the SQLite writer thread could not start");
        }
        Self {
            queue,
            budget,
            shared: Arc::new(Shared {
                commits,
                stop: Mutex::new(Some(stop)),
                finished: Mutex::new(Some(finished)),
            }),
        }
    }

    /// Queues `write` and waits until it is committed (or its batch
    /// failed); answered 503, the write left undone, when the writer has
    /// not taken it up within the budget.
    pub(super) async fn write(&self, write: Write) -> Result<Written, RepositoryError> {
        let deadline = tokio::time::Instant::now() + self.budget;
        match self.queue.submit_by(write, deadline).await {
            Ok(reply) => reply,
            // The HTTP adapter logs the cause, naming the budget, with the 503.
            Err(batch::Unanswered::Late) => Err(crate::sql::budget::over_budget(self.budget)),
            Err(stopped @ batch::Unanswered::Stopped) => Err(RepositoryError::unavailable(stopped)),
        }
    }

    /// Transactions committed since the writer started.
    pub(super) fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::Relaxed)
    }

    /// Writes waiting for the writer now.
    pub(super) fn queued(&self) -> usize {
        self.queue.queued()
    }

    /// Whether the writer stopped taking writes.
    pub(super) fn is_stopped(&self) -> bool {
        self.queue.is_stopped()
    }

    /// Stops the writer once the writes it accepted are committed (later
    /// ones are answered unavailable) and waits until its thread closed the
    /// connection.
    pub(super) async fn stop(&self) {
        if let Some(stop) = self.shared.stop.lock().take() {
            let _ = stop.send(());
        }
        let finished = self.shared.finished.lock().take();
        if let Some(finished) = finished {
            // Sent, or dropped, once the thread closed the connection.
            let _ = finished.await;
        }
    }
}

/// What the writer keeps of the file on disk: that the path still names it,
/// and its write-ahead log bounded (`None` when `journal_size_limit` could
/// not be set: then the log is left as SQLite keeps it).
struct Disk {
    file: Arc<StoreFile>,
    wal: Option<WalLimit>,
    /// The connection's busy timeout, put back after a truncation's try.
    busy: Duration,
}

/// What the writer does for the change feed (C14) beside the triggers.
struct Changes {
    pruner: Pruner,
    /// Woken after each commit, for this process's subscribers.
    feed: DurableFeed,
}

/// Runs on the writer's thread until the queue is closed and drained or
/// `stop` fires; then closes the queue, answers what is still in it, and
/// closes the connection. `runtime` only drives the wait for the next
/// batch (queue and stop signal are Tokio channels; no timer is used).
fn run(
    connection: Connection,
    mut disk: Disk,
    mut changes: Changes,
    mut batches: Batches<Write, Reply>,
    mut stop: oneshot::Receiver<()>,
    commits: &AtomicU64,
    runtime: &Handle,
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
        apply(&connection, &mut disk, &mut changes, batch, commits);
    }
    // Closing the last connection checkpoints the WAL into the file.
    let _ = connection.close();
}

/// Applies one batch in one transaction and answers each of its requests;
/// the writes abandoned before the lock was held are left out.
fn apply(
    connection: &Connection,
    disk: &mut Disk,
    changes: &mut Changes,
    mut batch: Batch<Write, Reply>,
    commits: &AtomicU64,
) {
    batch.prune();
    if batch.is_empty() {
        return;
    }
    if let Err(gone) = disk.file.still_linked() {
        return fail(connection, batch, gone.into());
    }
    if let Err(error) = connection.execute_batch("BEGIN IMMEDIATE") {
        return fail(connection, batch, error.into());
    }
    batch.claim();
    if batch.is_empty() {
        let _ = connection.execute_batch("ROLLBACK");
        return;
    }
    // One transaction for writes of several kinds: `BATCH` (C11).
    let span = crate::traces::batch_operation("sqlite", None, None);
    batch.trace(&span);
    let _traced = span.enter();
    let committed = transaction(connection, batch.work()).and_then(|written| {
        changes.pruner.prune(connection, written.len());
        connection.execute_batch("COMMIT")?;
        Ok(written)
    });
    match committed {
        Ok(written) => {
            changes.feed.wake();
            commits.fetch_add(1, Ordering::Relaxed);
            metrics::histogram!(WRITES_PER_COMMIT).record(batch.len() as f64);
            batch.answer(written.into_iter().map(Ok));
            if let Some(wal) = &mut disk.wal {
                wal.upkeep(connection, &disk.file, disk.busy);
            }
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
