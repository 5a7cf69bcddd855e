//! [`SqliteStore`]: one SQLite file, its writer thread and its readers,
//! from which the repositories are made; its metrics and its readiness.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use items_domain::{ChangeFeed, DependencyDown, Repositories, RepositoryError};

use super::changes::{self, SqliteChanges};
use super::file::{StoreFile, WAL_BYTES};
use super::items::SqliteItemRepository;
use super::opening::{OpenError, open_file};
use super::point_reads::PointReads;
use super::products::SqliteProductRepository;
use super::readers::Readers;
use super::settings::SqliteSettings;
use super::users::SqliteUserRepository;
use super::writer::{WRITER_QUEUE_DEPTH, WRITES_PER_COMMIT, Writer};
use crate::changes::cursor::CursorFormat;
use crate::changes::durable::DurableFeed;
use crate::sql::turns::ListingTurns;

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
