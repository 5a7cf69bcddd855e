//! SQLite repositories: the service's data in one local file, durable
//! without a database server (C12), through one driver, `rusqlite`.
//!
//! Invariants:
//! - durability: the file is in WAL mode with `synchronous=FULL`, so a
//!   commit has synced the write-ahead log before it returns, and an
//!   acknowledged write survives a killed process and a power loss alike
//!   (`NORMAL` would survive a killed process only; a `kill -9` test
//!   cannot tell the two apart, since the OS still writes its page cache);
//! - one writer: every write goes to ONE connection, owned by one thread
//!   (`writer.rs`), whose transactions begin `BEGIN IMMEDIATE`, so
//!   connections never race for the file's write lock;
//! - group commit: the writer applies every write queued while its
//!   previous commit ran in one transaction and answers each caller only
//!   after the commit returned; a lone write commits at once, no timer
//!   delays it; a failed batch is rolled back whole and each of its callers
//!   gets [`RepositoryError::Unavailable`] (503);
//! - reads never wait for the writer: an item by id on the calling thread
//!   (`point_reads.rs`), every other read through the reader pool
//!   (`readers.rs`, the full listing in `listing.rs`);
//! - ids come from `AUTOINCREMENT` counters, which never go back, also
//!   across restarts (C2); totals and the listing's version from a tally
//!   row the schema's triggers keep in the same transaction as each write
//!   (C7, C10);
//! - the schema is `crates/adapters/migrations_sqlite`, embedded and
//!   applied at open by the runner both SQL stores share, recorded as sqlx
//!   records it (`crate::sql::migrations`).
//!
//! [`backup()`] copies a store, consistent as of one moment, into a new file
//! while writers go on (`backup.rs`); [`SqliteSnapshot`] and [`SqliteSink`]
//! are the two ends of `items-service copy` (`transfer.rs`).
//!
//! Why group commit: `POST /items` over SQLite is 6.0× a loop of one
//! INSERT per transaction, docs/performance.md "SQLite".

mod backup;
mod changes;
mod connections;
mod file;
mod items;
mod keys;
mod listing;
mod messages;
mod point_reads;
mod products;
mod readers;
mod rows;
mod transfer;
mod users;
mod writer;
mod writes;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use items_domain::{ChangeFeed, DependencyDown, Repositories, RepositoryError};

use changes::SqliteChanges;
use file::StoreFile;
use point_reads::PointReads;
use readers::Readers;
use writer::Writer;

use crate::changes::cursor::CursorFormat;
use crate::changes::durable::DurableFeed;

pub use crate::sql::migrations::MigrateError;
use crate::sql::turns::ListingTurns;

pub use backup::{BackupError, backup};
pub use file::{DEFAULT_WAL_LIMIT, WAL_BYTES};
pub use items::SqliteItemRepository;
pub use products::SqliteProductRepository;
pub use transfer::{SqliteSink, SqliteSnapshot};
pub use users::SqliteUserRepository;

/// Writes waiting for the writer now (a gauge, set at scrape time).
pub const WRITER_QUEUE_DEPTH: &str = "sqlite_writer_queue_depth";
/// How many writes each commit held (a histogram, one sample per commit).
pub const WRITES_PER_COMMIT: &str = "sqlite_writes_per_commit";
/// Buckets for [`WRITES_PER_COMMIT`]: powers of two up to the default
/// queue (a recorder without buckets renders a summary instead).
pub const WRITES_PER_COMMIT_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// Describes the store's metrics to the installed recorder.
pub fn describe_metrics() {
    metrics::describe_gauge!(
        WRITER_QUEUE_DEPTH,
        "Writes waiting for the SQLite writer thread."
    );
    metrics::describe_histogram!(
        WRITES_PER_COMMIT,
        "Writes the SQLite writer committed in one transaction (group commit)."
    );
    metrics::describe_gauge!(
        WAL_BYTES,
        metrics::Unit::Bytes,
        "Size of the SQLite write-ahead log (-wal file)."
    );
}

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

/// Why the SQLite file could not be used at start.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Missing directory, no permission, not a database…
    #[error("the SQLite database {} cannot be opened", path.display())]
    Open {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("the SQLite database could not be migrated")]
    Migrate(#[from] MigrateError),
}

/// One SQLite file: the writer thread and the readers, from which the
/// repositories are made. Clones share them.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    readers: Readers,
    point_reads: Arc<PointReads>,
    writer: Writer,
    file: Arc<StoreFile>,
    /// How many migrations [`SqliteStore::open`] applied.
    migrations_applied: usize,
    /// The turns of the full listings (C12): a quarter of the readers.
    listings: ListingTurns,
    changes: DurableFeed,
}

impl SqliteStore {
    /// Opens the file at `path` (created when missing; its directory must
    /// exist), brings its schema up to date, starts the writer thread and
    /// opens the first reader. Needs a Tokio runtime.
    ///
    /// # Errors
    /// [`OpenError::Open`] when the file cannot be opened or created, or is
    /// no SQLite database; [`OpenError::Migrate`] when its schema cannot be
    /// brought up to date.
    pub async fn open(path: impl AsRef<Path>, settings: SqliteSettings) -> Result<Self, OpenError> {
        let path = path.as_ref().to_owned();
        // Opening reads the file, and migrating may take a while on a large
        // one: off the async workers.
        let file = path.clone();
        let opening = settings.clone();
        let (writing, migrations_applied, readers, point_reads, file) =
            tokio::task::spawn_blocking(move || open_file(&file, &opening))
                .await
                .map_err(|stopped| OpenError::Open {
                    path: path.clone(),
                    source: stopped.into(),
                })??;
        let origin = changes::origin(&writing).map_err(|source| OpenError::Open {
            path,
            source: source.into(),
        })?;
        let source = SqliteChanges {
            readers: readers.clone(),
        };
        let changes = DurableFeed::new(
            Arc::new(source),
            CursorFormat::new('s', &origin),
            settings.changes_poll,
            settings.busy_timeout,
        );
        let file = Arc::new(file);
        Ok(Self {
            readers,
            point_reads: Arc::new(point_reads),
            writer: Writer::start(writing, Arc::clone(&file), changes.clone(), &settings),
            file,
            migrations_applied,
            listings: ListingTurns::of(settings.readers.max(1)),
            changes,
        })
    }

    /// How many migrations opening this store applied: 0 when the file's
    /// schema was already up to date.
    pub fn migrations_applied(&self) -> usize {
        self.migrations_applied
    }

    /// The three repositories, sharing this store's writer and readers;
    /// each operation in a span of its own when traces are on (C11); and
    /// the change feed of the items (C14).
    pub fn repositories(&self) -> Repositories {
        crate::sql::traced::repositories("sqlite", self.items(), self.products(), self.users())
            .with_changes(self.changes.clone())
    }

    /// The change feed of this file's items (C14): every change committed
    /// by any process on the file.
    pub fn changes(&self) -> Arc<dyn ChangeFeed> {
        Arc::new(self.changes.clone())
    }

    pub fn items(&self) -> SqliteItemRepository {
        SqliteItemRepository::new(
            self.readers.clone(),
            Arc::clone(&self.point_reads),
            self.writer.clone(),
            self.listings.clone(),
        )
    }

    pub fn products(&self) -> SqliteProductRepository {
        SqliteProductRepository::new(self.readers.clone(), self.writer.clone())
    }

    pub fn users(&self) -> SqliteUserRepository {
        SqliteUserRepository::new(self.readers.clone())
    }

    /// Transactions the writer committed since the store was opened.
    pub fn commits(&self) -> u64 {
        self.writer.commits()
    }

    /// Writes waiting for the writer now.
    pub fn queued_writes(&self) -> usize {
        self.writer.queued()
    }

    /// Publishes the writer's queue depth and the write-ahead log's size to
    /// the metrics recorder (C11); called at scrape time. Writes per commit
    /// are recorded by the writer.
    pub fn record_writer_metrics(&self) {
        metrics::gauge!(WRITER_QUEUE_DEPTH).set(self.queued_writes() as f64);
        metrics::gauge!(WAL_BYTES).set(self.wal_bytes() as f64);
    }

    /// The size of the `-wal` file now.
    pub fn wal_bytes(&self) -> u64 {
        self.file.wal_bytes()
    }

    /// Closes the readers (waiting for reads in progress), then stops the
    /// writer once the writes it accepted are committed (later ones are
    /// answered unavailable) and closes it: the file can be reopened,
    /// copied or removed afterwards. The writer closes last so that, when
    /// no other process has the file open, SQLite checkpoints the WAL into
    /// the file and removes `-wal` and `-shm` (a read-only connection
    /// cannot): a stopped store is one file.
    pub async fn close(&self) {
        self.readers.close().await;
        self.point_reads.close();
        self.writer.stop().await;
    }
}

/// The store answers when its path still names the file it has open, the
/// writer runs and a reader reads the tally.
#[async_trait]
impl items_domain::HealthCheck for SqliteStore {
    fn name(&self) -> &'static str {
        "database"
    }

    async fn ping(&self) -> Result<(), DependencyDown> {
        self.file.check().map_err(DependencyDown::new)?;
        self.file.still_linked().map_err(DependencyDown::new)?;
        if self.writer.is_stopped() {
            return Err(DependencyDown::new("the SQLite writer has stopped"));
        }
        self.readers
            .read_here(|connection| {
                connection
                    .prepare_cached("select items from item_tally")
                    .and_then(|mut statement| statement.query_row([], |_| Ok(())))
                    .map_err(RepositoryError::unavailable)
            })
            .await
            .map_err(DependencyDown::new)
    }
}

/// The writing connection to `path` (the file created when missing), its
/// schema brought up to date (how many migrations that applied), then the
/// readers; and the file as opened.
fn open_file(
    path: &Path,
    settings: &SqliteSettings,
) -> Result<(rusqlite::Connection, usize, Readers, PointReads, StoreFile), OpenError> {
    let cannot_open = |source: rusqlite::Error| OpenError::Open {
        path: path.to_owned(),
        source: source.into(),
    };
    let (writing, migrations_applied) = open_writing(path, settings.busy_timeout)?;
    let file = StoreFile::opened(path).map_err(|source| OpenError::Open {
        path: path.to_owned(),
        source: source.into(),
    })?;
    let readers =
        Readers::open(path, settings.readers, settings.busy_timeout).map_err(cannot_open)?;
    let point_reads = PointReads::open(path, settings.busy_timeout).map_err(cannot_open)?;
    Ok((writing, migrations_applied, readers, point_reads, file))
}

/// The writing connection to `path` (the file created when missing), its
/// schema brought up to date, and how many migrations that applied.
fn open_writing(
    path: &Path,
    busy_timeout: Duration,
) -> Result<(rusqlite::Connection, usize), OpenError> {
    let cannot_open = |source: Box<dyn std::error::Error + Send + Sync>| OpenError::Open {
        path: path.to_owned(),
        source,
    };
    let mut connection =
        connections::read_write(path, busy_timeout).map_err(|source| cannot_open(source.into()))?;
    // SQLite opens a file it may not write read-only, without a word: every
    // write would then fail for ever (C12: exit 1 at start instead).
    if connection
        .is_readonly(rusqlite::MAIN_DB)
        .map_err(|source| cannot_open(source.into()))?
    {
        return Err(cannot_open("the file cannot be written (read-only)".into()));
    }
    let applied = crate::sql::migrations::run_sqlite(&mut connection)?;
    Ok((connection, applied))
}
