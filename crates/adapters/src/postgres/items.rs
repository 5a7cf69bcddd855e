//! The PostgreSQL item repository: the `items` table, keyset pages with
//! totals from the tally of migration 0002 (C10), the full listing in
//! batches from one repeatable-read snapshot (C7, C10), and the conditional
//! replace as one compare-and-swap `update` (C7).

use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    Id, IdempotencyKey, Item, ItemBatch, ItemListing, ItemPage, ItemQuery, ItemRepository, Keyed,
    ListingHead, Name, Replaced, RepositoryError,
};

use super::coalesce::{Coalescer, ItemCreates, ItemReads};
use super::decode::{self, column};
use super::pool::{Lease, Pool, lease};
use super::positions::{self, POSITION, Read};
use crate::changes::durable::DurableFeed;
use crate::sql::rows::{stored_item, stored_items};
use crate::sql::turns::{ListingTurns, Turn};

/// Items in the `items` table. Point reads and creates go through the
/// store's coalescing queues (`coalesce`): alone when a connection is free,
/// else batched with the others waiting. The schema's triggers record
/// every change (C14); after each write that committed, this instance's
/// change feed is woken, so its subscribers need not wait for a poll.
#[derive(Debug, Clone)]
pub struct PostgresItemRepository {
    pool: Pool,
    reads: Coalescer<ItemReads>,
    creates: Coalescer<ItemCreates>,
    /// Full listings reading at once: a quarter of the pool (C12).
    listings: ListingTurns,
    /// The change feed, told of each write; `None` on a standby, which
    /// serves reads only (C13, C14).
    changes: Option<DurableFeed>,
    /// Whether each read also asks the server's position before it (a
    /// standby's, C13).
    before: bool,
}

impl PostgresItemRepository {
    pub(super) fn new(
        pool: Pool,
        reads: Coalescer<ItemReads>,
        creates: Coalescer<ItemCreates>,
        listings: ListingTurns,
        changes: DurableFeed,
    ) -> Self {
        Self {
            pool,
            reads,
            creates,
            listings,
            changes: Some(changes),
            before: false,
        }
    }

    /// The same table read on a standby's pool (C13): every read also asks
    /// the server's position before it, and point reads are not coalesced
    /// (each request's token is checked against its own read).
    pub(super) fn on_standby(pool: Pool, listings: ListingTurns) -> Self {
        let slots = super::coalesce::statement_slots(1);
        Self {
            reads: Coalescer::new(pool.clone(), slots),
            creates: Coalescer::new(pool.clone(), slots),
            pool,
            listings,
            changes: None,
            before: true,
        }
    }

    /// Tells this instance's change feed that a write committed (C14).
    fn wake_feed(&self) {
        if let Some(changes) = &self.changes {
            changes.wake();
        }
    }

    /// [`ItemRepository::list`], and the server's position around it (C13),
    /// sent with the page: one round trip.
    pub(super) async fn list_at(
        &self,
        query: &ItemQuery,
    ) -> Result<Read<ItemPage>, RepositoryError> {
        let after = query.after.map_or(i64::MIN, Id::get);
        // `limit null` is no limit at all.
        let fetch = query.limit.map(|limit| limit.get() as i64 + 1);
        let mut connection = lease(&self.pool).await?;
        let position = connection.prepared(POSITION).await?;
        let ask_before = self.before;
        let (before, (rows, total), at) = match &query.name {
            None => {
                let page = connection.prepared(PAGE).await?;
                let tally = connection.prepared(TOTAL).await?;
                connection
                    .run(|client| async move {
                        // Exact and O(1): the tally the triggers of migration
                        // 0002 keep in the same transaction as every insert
                        // and delete, summed over its 16 slots (`count(*)`
                        // would read the table).
                        futures_util::future::try_join3(
                            ask(client, &position, ask_before),
                            futures_util::future::try_join(
                                client.query(&page, &[&after, &fetch]),
                                client.query_one(&tally, &[]),
                            ),
                            client.query_one(&position, &[]),
                        )
                        .await
                    })
                    .await?
            }
            Some(name) => {
                let name = name.as_str().as_bytes();
                let page = connection.prepared(NAMED_PAGE).await?;
                let count = connection.prepared(NAMED_TOTAL).await?;
                connection
                    .run(|client| async move {
                        futures_util::future::try_join3(
                            ask(client, &position, ask_before),
                            futures_util::future::try_join(
                                client.query(&page, &[&name, &after, &fetch]),
                                client.query_one(&count, &[&name]),
                            ),
                            client.query_one(&position, &[]),
                        )
                        .await
                    })
                    .await?
            }
        };
        drop(connection);
        let total: i64 = column(&total, 0)?;
        let rows = decode::items(&rows)?;
        let mut items = stored_items(rows)?;
        let has_more = query.limit.is_some_and(|limit| items.len() > limit.get());
        if let Some(limit) = query.limit {
            items.truncate(limit.get());
        }
        Ok(Read {
            value: ItemPage {
                items,
                total: u64::try_from(total).unwrap_or(0),
                has_more,
            },
            before: positions::before(before.as_ref())?,
            after: positions::read(&at, 0)?,
        })
    }

    /// [`ItemRepository::list_all`], and the server's position around the
    /// listing's snapshot (C13). The position before is asked before the
    /// transaction begins: a repeatable-read snapshot is taken by its first
    /// statement, so asking it inside would take the snapshot with it, not
    /// after it. The position after is read inside, with the version and
    /// total.
    pub(super) async fn list_all_at(&self) -> Result<Read<ItemListing>, RepositoryError> {
        let turn = self.listings.wait().await?;
        let mut connection = lease(&self.pool).await?;
        let position = connection.prepared(POSITION).await?;
        let before = if self.before {
            let row = connection
                .run(|client| async move { client.query_one(&position, &[]).await })
                .await?;
            Some(positions::read(&row, 0)?)
        } else {
            None
        };
        connection
            .begin("begin isolation level repeatable read, read only")
            .await?;
        let tally = connection.prepared(TALLY).await?;
        let position = connection.prepared(POSITION).await?;
        let (tally, at) = connection
            .run(|client| async move {
                futures_util::future::try_join(
                    client.query_one(&tally, &[]),
                    client.query_one(&position, &[]),
                )
                .await
            })
            .await?;
        let (version, total): (i64, i64) = (column(&tally, 0)?, column(&tally, 1)?);
        let after = positions::read(&at, 0)?;
        let cursor = Cursor {
            connection,
            after: i64::MIN,
            _turn: turn,
        };
        let batches = futures_util::stream::unfold(Some(cursor), |cursor| async move {
            cursor?.next_batch().await
        });
        Ok(Read {
            value: ItemListing {
                version: u64::try_from(version).unwrap_or(0),
                total: u64::try_from(total).unwrap_or(0),
                batches: Box::pin(batches),
            },
            before,
            after,
        })
    }

    /// [`ItemRepository::listing_head`], and the server's position around
    /// it (C13), in the same round trip.
    pub(super) async fn listing_head_at(&self) -> Result<Read<ListingHead>, RepositoryError> {
        let mut connection = lease(&self.pool).await?;
        let tally = connection.prepared(TALLY).await?;
        let position = connection.prepared(POSITION).await?;
        let ask_before = self.before;
        let (before, tally, at) = connection
            .run(|client| async move {
                futures_util::future::try_join3(
                    ask(client, &position, ask_before),
                    client.query_one(&tally, &[]),
                    client.query_one(&position, &[]),
                )
                .await
            })
            .await?;
        let (version, total): (i64, i64) = (column(&tally, 0)?, column(&tally, 1)?);
        Ok(Read {
            value: ListingHead {
                version: u64::try_from(version).unwrap_or(0),
                total: u64::try_from(total).unwrap_or(0),
            },
            before: positions::before(before.as_ref())?,
            after: positions::read(&at, 0)?,
        })
    }

    /// [`ItemRepository::get`], and the server's position around it (C13):
    /// coalesced on the primary; on a standby alone, in one round trip.
    pub(super) async fn get_at(&self, id: Id) -> Result<Read<Option<Item>>, RepositoryError> {
        if !self.before {
            let (row, after) = self.reads.call(id.get()).await?;
            return Ok(Read {
                value: row.map(stored_item).transpose()?,
                before: None,
                after,
            });
        }
        let mut connection = lease(&self.pool).await?;
        let one = connection.prepared(ONE).await?;
        let position = connection.prepared(POSITION).await?;
        let id = id.get();
        let (before, row, at) = connection
            .run(|client| async move {
                futures_util::future::try_join3(
                    client.query_one(&position, &[]),
                    client.query_opt(&one, &[&id]),
                    client.query_one(&position, &[]),
                )
                .await
            })
            .await?;
        Ok(Read {
            value: row
                .as_ref()
                .map(decode::item)
                .transpose()?
                .map(stored_item)
                .transpose()?,
            before: Some(positions::read(&before, 0)?),
            after: positions::read(&at, 0)?,
        })
    }
}

/// The server's position, asked when `wanted` (a standby's read), else
/// nothing: the first of a read's pipelined statements.
async fn ask(
    client: &tokio_postgres::Client,
    position: &tokio_postgres::Statement,
    wanted: bool,
) -> Result<Option<tokio_postgres::Row>, tokio_postgres::Error> {
    if wanted {
        client.query_one(position, &[]).await.map(Some)
    } else {
        Ok(None)
    }
}

/// One item, by id (a standby's point read).
const ONE: &str = "select id, name from items where id = $1";

/// The number of items: the sum of the tally's slots (migration 0002).
const TOTAL: &str = "select coalesce(sum(items), 0)::bigint from item_tally";
/// The listing's version and total: the sums of the tally's `writes` and
/// `items`, in one statement, so they agree.
const TALLY: &str =
    "select coalesce(sum(writes), 0)::bigint, coalesce(sum(items), 0)::bigint from item_tally";
/// The number of items named `$1`.
const NAMED_TOTAL: &str = "select count(*) from items where name = $1";

/// Items after `$1` in id order, at most `$2` (`null`: all).
const PAGE: &str = "select id, name from items where id > $1 order by id limit $2";
/// [`PAGE`] of the items named `$1`.
const NAMED_PAGE: &str =
    "select id, name from items where name = $1 and id > $2 order by id limit $3";

/// Rows a full listing reads per round trip (see [`Cursor`]).
const BATCH: i64 = 1000;

/// Where a full listing stands: a connection in a read-only repeatable-read
/// transaction, so every batch sees the snapshot the version and total were
/// read in, and the last id sent (keyset batches: each one an index range
/// scan).
struct Cursor {
    connection: Lease,
    after: i64,
    /// Given back with the connection, when the listing ends or is dropped.
    _turn: Turn,
}

impl Cursor {
    /// The next batch, or the end.
    async fn next_batch(mut self) -> Option<(ItemBatch, Option<Self>)> {
        let after = self.after;
        // Each batch is an operation of its own: a long listing is not cut
        // by the budget, a stalled batch is.
        self.connection.renew();
        let rows = self.connection.query(PAGE, &[&after, &BATCH]).await;
        let items = match rows.and_then(|rows| stored_items(decode::items(&rows)?)) {
            Ok(items) => items,
            Err(error) => return Some((Err(error), None)),
        };
        if items.len() as i64 == BATCH {
            self.after = items.last().map_or(after, |last| last.id.get());
            return Some((Ok(items), Some(self)));
        }
        self.finish().await;
        (!items.is_empty()).then_some((Ok(items), None))
    }

    /// Commits the read-only transaction and gives the connection back. A
    /// failure here changes nothing for a listing already read whole: the
    /// pool rolls the transaction back, or closes the connection, before
    /// lending it again (as it does for a listing abandoned half-way).
    async fn finish(mut self) {
        let _ = self.connection.commit().await;
    }
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
        Ok(self.list_at(query).await?.value)
    }

    /// The version and total are the sums of the tally's `writes` and
    /// `items` (migration 0002), read in the same snapshot as every batch, so
    /// equal versions mean equal rows whichever instance serves the listing.
    /// A listing first waits for its turn (`sql/turns.rs`), holding no
    /// connection, so listings never hold more than a quarter of the pool.
    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        Ok(self.list_all_at().await?.value)
    }

    /// The tally alone, one statement on a pooled connection: no
    /// transaction, no turn.
    async fn listing_head(&self) -> Result<ListingHead, RepositoryError> {
        Ok(self.listing_head_at().await?.value)
    }

    /// Coalesced (`coalesce::reads`): also the read a conditional request
    /// or a `PUT` makes through the use cases.
    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        Ok(self.get_at(id).await?.value)
    }

    /// Group-committed (`coalesce::creates`): alone or in a batch, in a
    /// transaction committed only within the budget, so a create answered
    /// 503 is never stored afterwards (`budget.rs`). A keyed create never
    /// joins a batch: it takes `keys.rs`'s path (`create_keyed`).
    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        let id = self.creates.call(name.clone()).await?;
        self.wake_feed();
        Ok(Item {
            id: Id::new(id),
            name,
        })
    }

    /// The key and the item in one transaction, committed only within the
    /// budget like every write (`keys.rs`, `budget.rs`).
    async fn create_keyed(
        &self,
        name: Name,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Item>, RepositoryError> {
        let keyed = super::keys::create_item(&self.pool, name, key, at).await?;
        if matches!(keyed, Keyed::Created(_)) {
            self.wake_feed();
        }
        Ok(keyed)
    }

    /// One `update`, so the write is atomic; with `expected` the `where`
    /// clause is the compare-and-swap. When no row changed, one more query
    /// tells a missing item from a changed one (a delete in between can only
    /// turn "changed" into "not found", both of which write nothing). In a
    /// transaction committed only within the budget (`budget.rs`).
    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        let mut connection = lease(&self.pool).await?;
        connection.begin_write().await?;
        let id = item.id.get();
        let new = item.name.as_str().as_bytes();
        let updated = match &expected {
            None => {
                connection
                    .execute("update items set name = $2 where id = $1", &[&id, &new])
                    .await?
            }
            Some(expected) => {
                let expected = expected.as_str().as_bytes();
                connection
                    .execute(
                        "update items set name = $2 where id = $1 and name = $3",
                        &[&id, &new, &expected],
                    )
                    .await?
            }
        };
        if updated > 0 || expected.is_none() {
            connection.commit().await?;
            if updated > 0 {
                self.wake_feed();
            }
            return Ok(if updated > 0 {
                Replaced::Yes
            } else {
                Replaced::NotFound
            });
        }
        let row = connection
            .query_one("select exists (select 1 from items where id = $1)", &[&id])
            .await?;
        let exists: bool = column(&row, 0)?;
        connection.commit().await?;
        Ok(if exists {
            Replaced::Changed
        } else {
            Replaced::NotFound
        })
    }

    /// In a transaction committed only within the budget (`budget.rs`).
    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        let mut connection = lease(&self.pool).await?;
        connection.begin_write().await?;
        let deleted = connection
            .execute("delete from items where id = $1", &[&id.get()])
            .await?;
        connection.commit().await?;
        if deleted > 0 {
            self.wake_feed();
        }
        Ok(deleted > 0)
    }
}
