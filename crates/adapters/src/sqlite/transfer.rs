//! A SQLite file as either end of `items-service copy` (C12): a read
//! snapshot of it ([`SqliteSnapshot`]), or a file filled in one
//! transaction ([`SqliteSink`]).
//!
//! Invariants:
//! - each end has a connection of its own to the file, beside (never
//!   through) a [`SqliteStore`](super::store::SqliteStore): a copy is a
//!   command run on its own, not a request to a running service;
//! - the snapshot is one read transaction, taken by a read at open and
//!   held until the value is dropped: every page reads that moment, while
//!   the source may be served (WAL keeps the snapshot as writers go on);
//! - the sink holds the file's write lock (`BEGIN IMMEDIATE`) from open to
//!   commit or rollback, and keeps nothing unless its commit returns: a
//!   service writing to the destination meanwhile would wait, and its
//!   writes fail after the busy timeout;
//! - every call runs on a blocking thread, the connection moved there and
//!   back; a call abandoned half-way leaves the connection to its thread,
//!   which closes it (ending any transaction), and later calls fail.
//!
//! Why a statement per 1,000 rows: PostgreSQL → SQLite, 1,000,001 items in
//! 3.1–4.1 s at 12–13 MiB, docs/performance.md "SQLite".

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use items_domain::transfer::{Counters, Counts, SnapshotSource, StoreSink};
use items_domain::{Id, Item, Product, RepositoryError};
use rusqlite::{Connection, OptionalExtension as _, Statement};

use super::connections::read_only;
use super::opening::{OpenError, open_writing};
use super::rows;
use crate::sql::rows::page_bounds;

/// How long either end waits for a lock another process holds.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Rows per `insert` statement: three parameters each at most, well under
/// SQLite's 32,766.
const ROWS_PER_INSERT: usize = 1000;

/// The error for a failure to open or lock the file at `path`.
fn cannot_open(path: &Path) -> impl Fn(rusqlite::Error) -> OpenError + Copy + '_ {
    move |source| OpenError::Open {
        path: path.to_owned(),
        source: Box::new(source),
    }
}

/// Opens an end on a blocking thread.
async fn open_end(
    path: &Path,
    open: impl FnOnce(&Path) -> Result<Connection, OpenError> + Send + 'static,
) -> Result<Held, OpenError> {
    let owned: PathBuf = path.to_owned();
    let connection = tokio::task::spawn_blocking(move || open(&owned))
        .await
        .map_err(|stopped| OpenError::Open {
            path: path.to_owned(),
            source: Box::new(stopped),
        })??;
    Ok(Held {
        connection: Some(connection),
    })
}

/// One read transaction on a SQLite store, held until dropped.
#[derive(Debug)]
pub struct SqliteSnapshot {
    held: Held,
}

impl SqliteSnapshot {
    /// Opens the existing store at `path` read-only and takes its snapshot.
    ///
    /// # Errors
    /// [`OpenError::Open`] when the file is missing, cannot be read or holds
    /// no store.
    pub async fn open(path: &Path) -> Result<Self, OpenError> {
        let held = open_end(path, |path| {
            let cannot_open = cannot_open(path);
            let connection = read_only(path, BUSY_TIMEOUT).map_err(cannot_open)?;
            // A deferred transaction takes its snapshot at its first read:
            // read now, so every later read sees this moment.
            connection.execute_batch("begin").map_err(cannot_open)?;
            connection
                .query_row("select items from item_tally", [], |_| Ok(()))
                .map_err(cannot_open)?;
            Ok(connection)
        })
        .await?;
        Ok(Self { held })
    }
}

#[async_trait]
impl SnapshotSource for SqliteSnapshot {
    async fn counters(&mut self) -> Result<Counters, RepositoryError> {
        self.held
            .call(|connection| {
                let last = |table: &str| {
                    connection
                        .query_row(
                            "select seq from sqlite_sequence where name = ?1",
                            [table],
                            |row| row.get::<_, i64>(0),
                        )
                        .optional()
                        .map(Option::unwrap_or_default)
                        .map_err(RepositoryError::unavailable)
                };
                Ok(Counters {
                    items: last("items")?,
                    products: last("products")?,
                })
            })
            .await
    }

    async fn items_after(
        &mut self,
        after: Option<Id>,
        limit: usize,
    ) -> Result<Vec<Item>, RepositoryError> {
        let (after, limit) = page_bounds(after, limit);
        self.held
            .call(move |connection| {
                let mut statement = connection
                    .prepare_cached("select id, name from items where id > ?1 order by id limit ?2")
                    .map_err(RepositoryError::unavailable)?;
                rows::all(&mut statement, (after, limit), rows::item)
            })
            .await
    }

    async fn products_after(
        &mut self,
        after: Option<Id>,
        limit: usize,
    ) -> Result<Vec<Product>, RepositoryError> {
        let (after, limit) = page_bounds(after, limit);
        self.held
            .call(move |connection| {
                let mut statement = connection
                    .prepare_cached(
                        "select id, name, price from products where id > ?1 order by id limit ?2",
                    )
                    .map_err(RepositoryError::unavailable)?;
                rows::all(&mut statement, (after, limit), rows::product)
            })
            .await
    }
}

/// A SQLite store being filled in one `BEGIN IMMEDIATE` transaction.
#[derive(Debug)]
pub struct SqliteSink {
    held: Held,
}

impl SqliteSink {
    /// Opens the store at `path` (created when missing, with the service's
    /// durability settings), brings its schema up to date and begins the
    /// transaction, taking the file's write lock until commit or rollback.
    ///
    /// # Errors
    /// [`OpenError::Open`] when the file cannot be opened or created or its
    /// write lock taken; [`OpenError::Migrate`] when its schema cannot be
    /// brought up to date.
    pub async fn open(path: &Path) -> Result<Self, OpenError> {
        let held = open_end(path, |path| {
            let (connection, _) = open_writing(path, BUSY_TIMEOUT)?;
            connection
                .execute_batch("begin immediate")
                .map_err(cannot_open(path))?;
            Ok(connection)
        })
        .await?;
        Ok(Self { held })
    }
}

#[async_trait]
impl StoreSink for SqliteSink {
    async fn contents(&mut self) -> Result<Counts, RepositoryError> {
        let (items, products): (i64, i64) = self
            .held
            .call(|connection| {
                connection
                    .query_row(
                        "select (select count(*) from items), (select count(*) from products)",
                        [],
                        |row| Ok((row.get(0)?, row.get(1)?)),
                    )
                    .map_err(RepositoryError::unavailable)
            })
            .await?;
        Ok(Counts {
            items: items.unsigned_abs(),
            products: products.unsigned_abs(),
        })
    }

    async fn write_items(&mut self, items: &[Item]) -> Result<(), RepositoryError> {
        let items = items.to_vec();
        self.held
            .call(move |connection| {
                for chunk in items.chunks(ROWS_PER_INSERT) {
                    insert(
                        connection,
                        "items (id, name)",
                        2,
                        chunk,
                        |statement, at, item| {
                            statement.raw_bind_parameter(at, item.id.get())?;
                            statement.raw_bind_parameter(at + 1, item.name.as_str().as_bytes())
                        },
                    )?;
                }
                Ok(())
            })
            .await
    }

    async fn write_products(&mut self, products: &[Product]) -> Result<(), RepositoryError> {
        let products = products.to_vec();
        self.held
            .call(move |connection| {
                for chunk in products.chunks(ROWS_PER_INSERT) {
                    let columns = "products (id, name, price)";
                    insert(connection, columns, 3, chunk, |statement, at, product| {
                        statement.raw_bind_parameter(at, product.id.get())?;
                        statement.raw_bind_parameter(at + 1, product.name.as_str().as_bytes())?;
                        statement.raw_bind_parameter(at + 2, product.price.get())
                    })?;
                }
                Ok(())
            })
            .await
    }

    async fn commit(&mut self, counters: Counters) -> Result<(), RepositoryError> {
        self.held
            .finish(move |connection| {
                // Inserting ids raised `sqlite_sequence` to the largest one;
                // the source's counters may be above it (ids deleted there):
                // they are set as they were, so AUTOINCREMENT goes on from
                // them.
                for (table, last) in [("items", counters.items), ("products", counters.products)] {
                    connection
                        .execute("delete from sqlite_sequence where name = ?1", [table])
                        .map_err(RepositoryError::unavailable)?;
                    if last > 0 {
                        connection
                            .execute(
                                "insert into sqlite_sequence (name, seq) values (?1, ?2)",
                                (table, last),
                            )
                            .map_err(RepositoryError::unavailable)?;
                    }
                }
                // The rows inserted were recorded as changes by the
                // schema's triggers: the copy starts its feed empty
                // instead, so no cursor of the source resumes here (C14).
                super::changes::forget_all(connection).map_err(RepositoryError::unavailable)?;
                connection
                    .execute_batch("commit")
                    .map_err(RepositoryError::unavailable)
            })
            .await
    }

    async fn rollback(&mut self) -> Result<(), RepositoryError> {
        self.held
            .finish(|connection| {
                connection
                    .execute_batch("rollback")
                    .map_err(RepositoryError::unavailable)
            })
            .await
    }
}

/// One `insert into TABLE_AND_COLUMNS values (…),(…)…` of every row of
/// `rows`, `columns` values each, bound by `bind(statement, first index,
/// row)`; the statement is kept for the next chunk of the same size.
fn insert<T>(
    connection: &Connection,
    table_and_columns: &str,
    columns: usize,
    rows: &[T],
    bind: impl Fn(&mut Statement<'_>, usize, &T) -> rusqlite::Result<()>,
) -> Result<(), RepositoryError> {
    let row = format!("({})", vec!["?"; columns].join(","));
    let sql = format!(
        "insert into {table_and_columns} values {}",
        vec![row.as_str(); rows.len()].join(",")
    );
    connection
        .prepare_cached(&sql)
        .and_then(|mut statement| {
            for (index, row) in rows.iter().enumerate() {
                bind(&mut statement, index * columns + 1, row)?;
            }
            statement.raw_execute()
        })
        .map(drop)
        .map_err(RepositoryError::unavailable)
}

/// A connection driven from async code: each call moves it to a blocking
/// thread and back.
#[derive(Debug)]
struct Held {
    /// `None` while a call has it, after a call was abandoned, and once
    /// finished.
    connection: Option<Connection>,
}

impl Held {
    /// Runs `work` on the connection on a blocking thread.
    async fn call<T: Send + 'static>(
        &mut self,
        work: impl FnOnce(&Connection) -> Result<T, RepositoryError> + Send + 'static,
    ) -> Result<T, RepositoryError> {
        let connection = self.take()?;
        let (connection, done) = tokio::task::spawn_blocking(move || {
            let done = work(&connection);
            (connection, done)
        })
        .await
        .map_err(RepositoryError::unavailable)?;
        self.connection = Some(connection);
        done
    }

    /// Runs `work`, then closes the connection, on a blocking thread: the
    /// end's last call. Closing the last connection to the file may
    /// checkpoint its WAL, a write as long as the copy.
    async fn finish(
        &mut self,
        work: impl FnOnce(&Connection) -> Result<(), RepositoryError> + Send + 'static,
    ) -> Result<(), RepositoryError> {
        let connection = self.take()?;
        tokio::task::spawn_blocking(move || {
            let done = work(&connection);
            drop(connection);
            done
        })
        .await
        .map_err(RepositoryError::unavailable)?
    }

    fn take(&mut self) -> Result<Connection, RepositoryError> {
        self.connection.take().ok_or_else(|| {
            RepositoryError::unavailable("the SQLite copy's connection is closed or was abandoned")
        })
    }
}
