//! Items in the `items` table: an item by id on the calling thread
//! (`point_reads.rs`), pages on the reader pool, the full listing streamed
//! from it (`listing.rs`), writes through the writer thread.
//!
//! Invariants: a page and its total are read in one read transaction, so
//! they agree (C10); every write is the writer's (`writer.rs`), answered
//! once committed.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    Id, IdempotencyKey, Item, ItemListing, ItemPage, ItemQuery, ItemRepository, Keyed, ListingHead,
    Name, Replaced, RepositoryError,
};
use rusqlite::Connection;

use super::listing;
use super::messages::{Write, Written, mismatched};
use super::point_reads::PointReads;
use super::readers::{Readers, in_one_snapshot};
use super::rows;
use super::writer::Writer;
use crate::sql::turns::ListingTurns;

/// Items in the `items` table of one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteItemRepository {
    readers: Readers,
    point_reads: Arc<PointReads>,
    writer: Writer,
    /// Full listings reading at once: a quarter of the readers (C12).
    listings: ListingTurns,
}

impl SqliteItemRepository {
    pub(super) fn new(
        readers: Readers,
        point_reads: Arc<PointReads>,
        writer: Writer,
        listings: ListingTurns,
    ) -> Self {
        Self {
            readers,
            point_reads,
            writer,
            listings,
        }
    }
}

/// A page as read: its rows (one more than the limit, to tell whether
/// more follow) and the total.
type Page = (Vec<Item>, i64);

/// The items after `after`, at most `fetch` of them (negative: all), and
/// the tally's total, in one snapshot.
fn page(connection: &Connection, after: i64, fetch: i64) -> Result<Page, RepositoryError> {
    in_one_snapshot(connection, || {
        let mut items = prepare(
            connection,
            "select id, name from items where id > ?1 order by id limit ?2",
        )?;
        let items = rows::all(&mut items, (after, fetch), rows::item)?;
        let total = prepare(connection, "select items from item_tally")?
            .query_row([], |row| row.get(0))
            .map_err(RepositoryError::unavailable)?;
        Ok((items, total))
    })
}

/// [`page`] of the items named `name`, through the `(name, id)` index,
/// with the count of every item so named.
fn named_page(
    connection: &Connection,
    name: &[u8],
    after: i64,
    fetch: i64,
) -> Result<Page, RepositoryError> {
    in_one_snapshot(connection, || {
        let mut items = prepare(
            connection,
            "select id, name from items where name = ?1 and id > ?2 order by id limit ?3",
        )?;
        let items = rows::all(&mut items, (name, after, fetch), rows::item)?;
        let total = prepare(connection, "select count(*) from items where name = ?1")?
            .query_row([name], |row| row.get(0))
            .map_err(RepositoryError::unavailable)?;
        Ok((items, total))
    })
}

fn prepare<'c>(
    connection: &'c Connection,
    sql: &str,
) -> Result<rusqlite::CachedStatement<'c>, RepositoryError> {
    connection
        .prepare_cached(sql)
        .map_err(RepositoryError::unavailable)
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
        let (mut items, total) = match &query.name {
            // At most 1,001 rows by the primary key and the tally row: no
            // longer than encoding the page takes, and cheaper than a hop to
            // a blocking thread and back, so on the calling thread.
            None if query.limit.is_some() => {
                self.readers
                    .read_here(|connection| page(connection, after, fetch))
                    .await?
            }
            // No limit, or a count of every item so named: the cost grows
            // with what is stored, so off the async workers.
            None => {
                self.readers
                    .read_blocking(move |connection| page(connection, after, fetch))
                    .await?
            }
            Some(name) => {
                let name = name.clone();
                self.readers
                    .read_blocking(move |connection| {
                        named_page(connection, name.as_str().as_bytes(), after, fetch)
                    })
                    .await?
            }
        };
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

    /// Streamed from one read transaction (`listing.rs`), once the
    /// listing's turn comes (`sql/turns.rs`): equal versions mean equal rows.
    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        listing::open(&self.listings, &self.readers).await
    }

    /// The tally row alone, on the calling thread (`point_reads.rs`): no
    /// reader, no snapshot, no turn.
    async fn listing_head(&self) -> Result<ListingHead, RepositoryError> {
        let (version, total) = self.point_reads.tally()?;
        Ok(ListingHead {
            version: u64::try_from(version).unwrap_or(0),
            total: u64::try_from(total).unwrap_or(0),
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
