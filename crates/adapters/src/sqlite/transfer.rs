//! A SQLite file as either end of `items-service copy` (C12): a read
//! snapshot of it ([`SqliteSnapshot`]), or an empty file filled in one
//! transaction ([`SqliteSink`]).
//!
//! Each opens a connection of its own to the file, beside (never through)
//! a [`super::SqliteStore`]: a copy is a command run on its own, not a
//! request to a running service. The source may be served meanwhile (WAL
//! keeps the snapshot while writers go on). The destination should not be:
//! the sink holds the file's write lock from its first look to its commit,
//! so a service writing to it would wait, and its writes fail after the
//! busy timeout.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use items_domain::transfer::{Counters, Counts, SnapshotSource, StoreSink};
use items_domain::{Id, Item, Product, RepositoryError};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{ConnectOptions as _, Executor as _, QueryBuilder, SqliteConnection};

use super::{OpenError, open_writing};
use crate::sql::rows::{ItemRow, ProductRow, page_bounds, stored_items, stored_products};

/// How long either end waits for a lock another process holds.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Rows per `insert` statement: two parameters each, well under SQLite's
/// 32,766. Fewer, larger statements spare a round trip to SQLite's thread
/// per row.
const ROWS_PER_INSERT: usize = 1000;

/// What both ends connect to `path` with: the lock wait, and no statement
/// logged (a copy runs thousands of them).
fn options(path: &Path) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(BUSY_TIMEOUT)
        .disable_statement_logging()
}

fn unavailable(error: sqlx::Error) -> RepositoryError {
    RepositoryError::unavailable(error)
}

/// The error for a failure to open or lock the file at `path`.
fn cannot_open(path: &Path) -> impl Fn(sqlx::Error) -> OpenError + Copy + '_ {
    move |source| OpenError::Open {
        path: path.to_owned(),
        source: Box::new(source),
    }
}

/// One read transaction on a SQLite store, held until dropped.
#[derive(Debug)]
pub struct SqliteSnapshot {
    connection: SqliteConnection,
}

impl SqliteSnapshot {
    /// Opens the existing store at `path` read-only and takes its snapshot.
    ///
    /// # Errors
    /// [`OpenError::Open`] when the file is missing, cannot be read or holds
    /// no store.
    pub async fn open(path: &Path) -> Result<Self, OpenError> {
        let cannot_open = cannot_open(path);
        let mut connection = options(path)
            .read_only(true)
            .connect()
            .await
            .map_err(cannot_open)?;
        // A deferred transaction takes its snapshot at its first read:
        // read now, so every later read sees this moment.
        connection.execute("begin").await.map_err(cannot_open)?;
        sqlx::query("select items from item_tally")
            .fetch_one(&mut connection)
            .await
            .map_err(cannot_open)?;
        Ok(Self { connection })
    }
}

#[async_trait]
impl SnapshotSource for SqliteSnapshot {
    async fn counters(&mut self) -> Result<Counters, RepositoryError> {
        let rows: Vec<(String, i64)> = sqlx::query_as("select name, seq from sqlite_sequence")
            .fetch_all(&mut self.connection)
            .await
            .map_err(unavailable)?;
        let last = |table: &str| {
            rows.iter()
                .find(|(name, _)| name == table)
                .map_or(0, |&(_, seq)| seq)
        };
        Ok(Counters {
            items: last("items"),
            products: last("products"),
        })
    }

    async fn items_after(
        &mut self,
        after: Option<Id>,
        limit: usize,
    ) -> Result<Vec<Item>, RepositoryError> {
        let (after, limit) = page_bounds(after, limit);
        let rows: Vec<ItemRow> =
            sqlx::query_as("select id, name from items where id > ?1 order by id limit ?2")
                .bind(after)
                .bind(limit)
                .fetch_all(&mut self.connection)
                .await
                .map_err(unavailable)?;
        stored_items(rows)
    }

    async fn products_after(
        &mut self,
        after: Option<Id>,
        limit: usize,
    ) -> Result<Vec<Product>, RepositoryError> {
        let (after, limit) = page_bounds(after, limit);
        let rows: Vec<ProductRow> = sqlx::query_as(
            "select id, name, price from products where id > ?1 order by id limit ?2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(&mut self.connection)
        .await
        .map_err(unavailable)?;
        stored_products(rows)
    }
}

/// A SQLite store being filled in one `BEGIN IMMEDIATE` transaction.
#[derive(Debug)]
pub struct SqliteSink {
    connection: SqliteConnection,
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
        let cannot_open = cannot_open(path);
        drop(open_writing(path, BUSY_TIMEOUT)?);
        let mut connection = options(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .connect()
            .await
            .map_err(cannot_open)?;
        connection
            .execute("begin immediate")
            .await
            .map_err(cannot_open)?;
        Ok(Self { connection })
    }
}

#[async_trait]
impl StoreSink for SqliteSink {
    async fn contents(&mut self) -> Result<Counts, RepositoryError> {
        let (items, products): (i64, i64) =
            sqlx::query_as("select (select count(*) from items), (select count(*) from products)")
                .fetch_one(&mut self.connection)
                .await
                .map_err(unavailable)?;
        Ok(Counts {
            items: items.unsigned_abs(),
            products: products.unsigned_abs(),
        })
    }

    async fn write_items(&mut self, items: &[Item]) -> Result<(), RepositoryError> {
        for chunk in items.chunks(ROWS_PER_INSERT) {
            QueryBuilder::new("insert into items (id, name) ")
                .push_values(chunk, |mut row, item| {
                    row.push_bind(item.id.get())
                        .push_bind(item.name.as_str().as_bytes());
                })
                .build()
                .execute(&mut self.connection)
                .await
                .map_err(unavailable)?;
        }
        Ok(())
    }

    async fn write_products(&mut self, products: &[Product]) -> Result<(), RepositoryError> {
        for chunk in products.chunks(ROWS_PER_INSERT) {
            QueryBuilder::new("insert into products (id, name, price) ")
                .push_values(chunk, |mut row, product| {
                    row.push_bind(product.id.get())
                        .push_bind(product.name.as_str().as_bytes())
                        .push_bind(product.price.get());
                })
                .build()
                .execute(&mut self.connection)
                .await
                .map_err(unavailable)?;
        }
        Ok(())
    }

    async fn commit(&mut self, counters: Counters) -> Result<(), RepositoryError> {
        // Inserting ids raised `sqlite_sequence` to the largest one; the
        // source's counters may be above it (ids deleted there): they are
        // set as they were, so AUTOINCREMENT goes on from them.
        for (table, last) in [("items", counters.items), ("products", counters.products)] {
            sqlx::query("delete from sqlite_sequence where name = ?1")
                .bind(table)
                .execute(&mut self.connection)
                .await
                .map_err(unavailable)?;
            if last > 0 {
                sqlx::query("insert into sqlite_sequence (name, seq) values (?1, ?2)")
                    .bind(table)
                    .bind(last)
                    .execute(&mut self.connection)
                    .await
                    .map_err(unavailable)?;
            }
        }
        self.connection
            .execute("commit")
            .await
            .map(drop)
            .map_err(unavailable)
    }

    async fn rollback(&mut self) -> Result<(), RepositoryError> {
        self.connection
            .execute("rollback")
            .await
            .map(drop)
            .map_err(unavailable)
    }
}
