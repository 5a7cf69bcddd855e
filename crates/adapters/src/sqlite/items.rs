//! Items in the `items` table: an item by id on the calling thread
//! (`point_reads.rs`), listings on the reader pool, writes through the
//! writer thread.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    Id, IdempotencyKey, Item, ItemBatch, ItemListing, ItemPage, ItemQuery, ItemRepository, Keyed,
    Name, Replaced, RepositoryError,
};
use sqlx::{Sqlite, SqlitePool, Transaction};

use super::messages::{Write, Written, mismatched};
use super::point_reads::PointReads;
use super::unavailable;
use super::writer::Writer;
use crate::sql::rows::stored_name;

/// Items in the `items` table of one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteItemRepository {
    readers: SqlitePool,
    point_reads: Arc<PointReads>,
    writer: Writer,
}

impl SqliteItemRepository {
    pub(super) fn new(readers: SqlitePool, point_reads: Arc<PointReads>, writer: Writer) -> Self {
        Self {
            readers,
            point_reads,
            writer,
        }
    }
}

/// Rows a full listing reads per step (see [`Cursor`]).
const BATCH: i64 = 1000;

/// Where a full listing stands: a reader in a read transaction, so every
/// batch sees the snapshot the version and total were read in (WAL keeps it
/// while the writer goes on), and the last id sent.
struct Cursor {
    transaction: Transaction<'static, Sqlite>,
    after: i64,
}

impl Cursor {
    /// The next batch, or the end.
    async fn next_batch(mut self) -> Option<(ItemBatch, Option<Self>)> {
        let rows = sqlx::query_as("select id, name from items where id > ?1 order by id limit ?2")
            .bind(self.after)
            .bind(BATCH)
            .fetch_all(&mut *self.transaction)
            .await
            .map_err(unavailable);
        let items = match rows.and_then(items) {
            Ok(items) => items,
            Err(error) => return Some((Err(error), None)),
        };
        if items.len() as i64 == BATCH {
            self.after = items.last().map_or(self.after, |last| last.id.get());
            return Some((Ok(items), Some(self)));
        }
        // Ends the read transaction; a failure here changes nothing for a
        // listing read whole, and the pool rolls back a reader given back
        // mid-transaction (as for a listing abandoned half-way).
        let _ = self.transaction.commit().await;
        (!items.is_empty()).then_some((Ok(items), None))
    }
}

/// Rows as read, or the first that cannot be an item.
fn items(rows: Vec<(i64, Vec<u8>)>) -> Result<Vec<Item>, RepositoryError> {
    rows.into_iter().map(item).collect()
}

/// A row as read; see [`stored_name`] for why a bad name is not a panic.
fn item((id, name): (i64, Vec<u8>)) -> Result<Item, RepositoryError> {
    Ok(Item {
        id: Id::new(id),
        name: stored_name(id, &name)?,
    })
}

#[async_trait]
impl ItemRepository for SqliteItemRepository {
    /// Keyset pagination from the primary key (or the `(name, id)` index
    /// with `name=X`): only the rows returned are read, plus one to know
    /// whether more follow. The total is the tally row's (O(1)), or with
    /// `name=X` a count over the index entries so named. Page and total are
    /// read in one transaction, so they agree.
    async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        let after = query.after.map_or(i64::MIN, Id::get);
        // SQLite reads a negative limit as none.
        let fetch = query.limit.map_or(-1, |limit| limit.get() as i64 + 1);
        let mut transaction = self.readers.begin().await.map_err(unavailable)?;
        let (rows, total): (Vec<(i64, Vec<u8>)>, i64) = match &query.name {
            None => {
                let rows =
                    sqlx::query_as("select id, name from items where id > ?1 order by id limit ?2")
                        .bind(after)
                        .bind(fetch)
                        .fetch_all(&mut *transaction)
                        .await
                        .map_err(unavailable)?;
                let total = sqlx::query_scalar("select items from item_tally")
                    .fetch_one(&mut *transaction)
                    .await
                    .map_err(unavailable)?;
                (rows, total)
            }
            Some(name) => {
                let name = name.as_str().as_bytes();
                let rows = sqlx::query_as(
                    "select id, name from items where name = ?1 and id > ?2 order by id limit ?3",
                )
                .bind(name)
                .bind(after)
                .bind(fetch)
                .fetch_all(&mut *transaction)
                .await
                .map_err(unavailable)?;
                let total = sqlx::query_scalar("select count(*) from items where name = ?1")
                    .bind(name)
                    .fetch_one(&mut *transaction)
                    .await
                    .map_err(unavailable)?;
                (rows, total)
            }
        };
        let _ = transaction.commit().await;
        let mut items = items(rows)?;
        let has_more = query.limit.is_some_and(|limit| items.len() > limit.get());
        if let Some(limit) = query.limit {
            items.truncate(limit.get());
        }
        Ok(ItemPage {
            items,
            total: u64::try_from(total).unwrap_or(0),
            has_more,
        })
    }

    /// The version and total are the tally row's, read in the same read
    /// transaction as every batch: equal versions mean equal rows.
    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        let mut transaction = self.readers.begin().await.map_err(unavailable)?;
        // SQLite's snapshot starts at a transaction's first read: this one.
        let (version, total): (i64, i64) = sqlx::query_as("select version, items from item_tally")
            .fetch_one(&mut *transaction)
            .await
            .map_err(unavailable)?;
        let cursor = Cursor {
            transaction,
            after: i64::MIN,
        };
        let batches = futures_util::stream::unfold(Some(cursor), |cursor| async move {
            cursor?.next_batch().await
        });
        Ok(ItemListing {
            version: u64::try_from(version).unwrap_or(0),
            total: u64::try_from(total).unwrap_or(0),
            batches: Box::pin(batches),
        })
    }

    /// One B-tree lookup, on the calling thread (`point_reads.rs`).
    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        self.point_reads.item(id)
    }

    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        match self.writer.write(Write::CreateItem(name)).await? {
            Written::Item(item) => Ok(item),
            other => Err(mismatched(&other)),
        }
    }

    /// In the writer's batch transaction, one write at a time (`keys.rs`).
    async fn create_keyed(
        &self,
        name: Name,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Item>, RepositoryError> {
        let write = Write::CreateItemKeyed {
            name,
            key: key.clone(),
            at,
        };
        match self.writer.write(write).await? {
            Written::KeyedItem(keyed) => Ok(keyed),
            other => Err(mismatched(&other)),
        }
    }

    /// A compare-and-swap `update` in the writer's transaction (`writer.rs`).
    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        let write = Write::ReplaceItem {
            item: item.clone(),
            expected,
        };
        match self.writer.write(write).await? {
            Written::Replaced(replaced) => Ok(replaced),
            other => Err(mismatched(&other)),
        }
    }

    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        match self.writer.write(Write::DeleteItem(id)).await? {
            Written::Deleted(deleted) => Ok(deleted),
            other => Err(mismatched(&other)),
        }
    }
}
