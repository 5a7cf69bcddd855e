use async_trait::async_trait;
use items_domain::{
    Id, Item, ItemBatch, ItemListing, ItemPage, ItemQuery, ItemRepository, Name, Replaced,
    RepositoryError,
};
use sqlx::{PgPool, Postgres, Transaction};

use super::{stored_name, unavailable};

/// Items in the `items` table.
#[derive(Debug, Clone)]
pub struct PostgresItemRepository {
    pool: PgPool,
}

impl PostgresItemRepository {
    pub(super) fn new(pool: PgPool) -> Self {
        Self { pool }
    }
}

/// The number of items: the sum of the tally's slots (migration 0002).
const TOTAL: &str = "select coalesce(sum(items), 0)::bigint from item_tally";

/// Rows a full listing reads per round trip (see [`Cursor`]).
const BATCH: i64 = 1000;

/// Where a full listing stands: a read-only repeatable-read transaction, so
/// every batch sees the snapshot the version and total were read in, and the
/// last id sent (keyset batches: each one an index range scan).
struct Cursor {
    transaction: Transaction<'static, Postgres>,
    after: i64,
}

impl Cursor {
    /// The next batch, or the end (the transaction is then dropped, which
    /// returns the connection to the pool).
    async fn next_batch(mut self) -> Option<(ItemBatch, Option<Self>)> {
        let rows: Result<Vec<(i64, Vec<u8>)>, _> =
            sqlx::query_as("select id, name from items where id > $1 order by id limit $2")
                .bind(self.after)
                .bind(BATCH)
                .fetch_all(&mut *self.transaction)
                .await;
        let batch = match rows {
            Ok(rows) => rows.into_iter().map(item).collect::<Result<Vec<_>, _>>(),
            Err(error) => Err(unavailable(error)),
        };
        match batch {
            Ok(items) if items.is_empty() => None,
            Ok(items) => {
                let full = items.len() as i64 == BATCH;
                self.after = items.last().map_or(self.after, |last| last.id.get());
                Some((Ok(items), full.then_some(self)))
            }
            Err(error) => Some((Err(error), None)),
        }
    }
}

/// A row as read; see [`stored_name`] for why a bad name is not a panic.
fn item((id, name): (i64, Vec<u8>)) -> Result<Item, RepositoryError> {
    Ok(Item {
        id: Id::new(id),
        name: stored_name(id, &name)?,
    })
}

#[async_trait]
impl ItemRepository for PostgresItemRepository {
    /// Keyset pagination: `where id > $after order by id limit $limit + 1`
    /// reads only the rows it returns (plus one, to know whether more
    /// follow), however deep the page; `offset` would read and discard every
    /// earlier row. The name filter gets its own statement rather than
    /// `($2 is null or name = $2)`, which would keep PostgreSQL's generic plan
    /// from using the `(name, id)` index.
    async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        let after = query.after.map_or(i64::MIN, Id::get);
        // `limit null` is no limit at all.
        let fetch = query.limit.map(|limit| limit.get() as i64 + 1);
        let (rows, total): (Vec<(i64, Vec<u8>)>, i64) = match &query.name {
            None => {
                let rows =
                    sqlx::query_as("select id, name from items where id > $1 order by id limit $2")
                        .bind(after)
                        .bind(fetch)
                        .fetch_all(&self.pool)
                        .await
                        .map_err(unavailable)?;
                // Exact and O(1): the tally the triggers of migration 0002
                // keep in the same transaction as every insert and delete,
                // summed over its 16 slots (`count(*)` would read the table).
                let total = sqlx::query_scalar(TOTAL)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(unavailable)?;
                (rows, total)
            }
            Some(name) => {
                let rows = sqlx::query_as(
                    "select id, name from items where name = $1 and id > $2 order by id limit $3",
                )
                .bind(name.as_str().as_bytes())
                .bind(after)
                .bind(fetch)
                .fetch_all(&self.pool)
                .await
                .map_err(unavailable)?;
                let total = sqlx::query_scalar("select count(*) from items where name = $1")
                    .bind(name.as_str().as_bytes())
                    .fetch_one(&self.pool)
                    .await
                    .map_err(unavailable)?;
                (rows, total)
            }
        };
        let mut items = rows.into_iter().map(item).collect::<Result<Vec<_>, _>>()?;
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

    /// The version and total are the sums of the tally's `writes` and
    /// `items` (migration 0002), read in the same snapshot as every batch, so
    /// equal versions mean equal rows whichever instance serves the listing.
    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        let mut transaction = self.pool.begin().await.map_err(unavailable)?;
        sqlx::query("set transaction isolation level repeatable read, read only")
            .execute(&mut *transaction)
            .await
            .map_err(unavailable)?;
        let (version, total): (i64, i64) = sqlx::query_as(
            "select coalesce(sum(writes), 0)::bigint, coalesce(sum(items), 0)::bigint from item_tally",
        )
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

    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        let row: Option<(i64, Vec<u8>)> =
            sqlx::query_as("select id, name from items where id = $1")
                .bind(id.get())
                .fetch_optional(&self.pool)
                .await
                .map_err(unavailable)?;
        row.map(item).transpose()
    }

    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        let id: i64 = sqlx::query_scalar("insert into items (name) values ($1) returning id")
            .bind(name.as_str().as_bytes())
            .fetch_one(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(Item {
            id: Id::new(id),
            name,
        })
    }

    /// One `update`, so the write is atomic; with `expected` the `where`
    /// clause is the compare-and-swap. When no row changed, one more query
    /// tells a missing item from a changed one (a delete in between can only
    /// turn "changed" into "not found", both of which write nothing).
    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        let updated = match &expected {
            None => sqlx::query("update items set name = $2 where id = $1")
                .bind(item.id.get())
                .bind(item.name.as_str().as_bytes()),
            Some(expected) => sqlx::query("update items set name = $2 where id = $1 and name = $3")
                .bind(item.id.get())
                .bind(item.name.as_str().as_bytes())
                .bind(expected.as_str().as_bytes()),
        }
        .execute(&self.pool)
        .await
        .map_err(unavailable)?
        .rows_affected();
        if updated > 0 {
            return Ok(Replaced::Yes);
        }
        if expected.is_none() {
            return Ok(Replaced::NotFound);
        }
        let exists: bool = sqlx::query_scalar("select exists (select 1 from items where id = $1)")
            .bind(item.id.get())
            .fetch_one(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(if exists {
            Replaced::Changed
        } else {
            Replaced::NotFound
        })
    }

    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        let deleted = sqlx::query("delete from items where id = $1")
            .bind(id.get())
            .execute(&self.pool)
            .await
            .map_err(unavailable)?
            .rows_affected();
        Ok(deleted > 0)
    }
}
