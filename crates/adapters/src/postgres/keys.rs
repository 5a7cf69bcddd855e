//! Keyed creates (C7) over PostgreSQL: the key is stored in `item_keys` /
//! `product_keys` (migration 0004) in the same transaction as the row, with
//! the row's first values.
//!
//! A live key is answered from one lookup, before any write, so a replay
//! or a mismatch draws no id and opens no transaction. Otherwise, in a
//! transaction of its own (`Lease::begin`), one statement purges a few
//! expired keys, claims the key with the next id of the table's identity
//! sequence, and inserts the row under that id only if the claim
//! succeeded; the claim's `on conflict` takes over an expired key but not a
//! live one. The transaction is committed only within the statement budget
//! (`Lease::commit`, `budget.rs`, C12), as every other write is: a keyed
//! create answered 503 is rolled back, never committed afterwards, so the
//! key stays free for the client's retry. When the claim returns no row, a
//! live key appeared meanwhile: a second lookup, in the same transaction
//! (read committed: it sees the key the claim waited for), answers the
//! replay or the mismatch, and nothing but the purge was written (the id
//! drawn is burned, as after any failed insert, C2). When another
//! transaction holds the key (another instance, or a request this
//! instance's in-flight registry did not see), the primary key makes the
//! claim wait for it: if it commits, the claim fails and the committed key
//! is replayed; if it rolls back, the claim succeeds.

use std::time::SystemTime;

use items_domain::idempotency::{PURGE_BATCH, live_since, unix_millis};
use items_domain::{Id, IdempotencyKey, Item, Keyed, Name, Price, Product, RepositoryError};

use super::decode::{self, column};
use super::pool::{Lease, Pool, lease};
use crate::sql::rows::{stored_item, stored_product};

/// Purges up to $5 expired item keys (not $1: the claim may take it over,
/// and one statement must not touch a row twice), claims key $1 unless a
/// live one holds it, and creates the item under the id the claim drew.
/// `overriding system value`: the id comes from the identity's own
/// sequence, drawn by the claim, so the counter still never goes back (C2).
const CREATE_ITEM: &str = "
with purged as (
    delete from item_keys where key in (
        select key from item_keys where created_at < $4 and key <> $1
        order by created_at limit $5 for update skip locked)
), claimed as (
    insert into item_keys (key, created_at, item_id, name)
    values ($1, $3, nextval(pg_get_serial_sequence('items', 'id')), $2)
    on conflict (key) do update
        set created_at = excluded.created_at, item_id = excluded.item_id, name = excluded.name
        where item_keys.created_at < $4
    returning item_id
)
insert into items (id, name) overriding system value
select item_id, $2 from claimed
returning id";

/// [`CREATE_ITEM`] for products, with the price as $6.
const CREATE_PRODUCT: &str = "
with purged as (
    delete from product_keys where key in (
        select key from product_keys where created_at < $4 and key <> $1
        order by created_at limit $5 for update skip locked)
), claimed as (
    insert into product_keys (key, created_at, product_id, name, price)
    values ($1, $3, nextval(pg_get_serial_sequence('products', 'id')), $2, $6)
    on conflict (key) do update
        set created_at = excluded.created_at, product_id = excluded.product_id,
            name = excluded.name, price = excluded.price
        where product_keys.created_at < $4
    returning product_id
)
insert into products (id, name, price) overriding system value
select product_id, $2, $6 from claimed
returning id";

/// The item a live `key` created, as first created.
async fn first_item(
    connection: &mut Lease,
    key: &IdempotencyKey,
    live_since: i64,
) -> Result<Option<Item>, RepositoryError> {
    let row = connection
        .query_opt(
            "select item_id, name from item_keys where key = $1 and created_at >= $2",
            &[&key.as_str(), &live_since],
        )
        .await?;
    row.as_ref()
        .map(|row| stored_item(decode::item(row)?))
        .transpose()
}

/// The product a live `key` created, as first created.
async fn first_product(
    connection: &mut Lease,
    key: &IdempotencyKey,
    live_since: i64,
) -> Result<Option<Product>, RepositoryError> {
    let row = connection
        .query_opt(
            "select product_id, name, price from product_keys \
             where key = $1 and created_at >= $2",
            &[&key.as_str(), &live_since],
        )
        .await?;
    row.map(|row| stored_product((column(&row, 0)?, column(&row, 1)?, column(&row, 2)?)))
        .transpose()
}

/// The claim found a live key, but the lookup after it did not: only a key
/// purged in between (by an instance whose clock is a day ahead) can cause it.
fn vanished() -> RepositoryError {
    RepositoryError::unavailable("an idempotency key held by another create could not be read")
}

pub(super) async fn create_item(
    pool: &Pool,
    name: Name,
    key: &IdempotencyKey,
    at: SystemTime,
) -> Result<Keyed<Item>, RepositoryError> {
    let live_since = live_since(at);
    let same = |first: &Item| first.name == name;
    let mut connection = lease(pool).await?;
    if let Some(first) = first_item(&mut connection, key, live_since).await? {
        return Ok(Keyed::of_live_key(first, same));
    }
    connection.begin_write().await?;
    let created = connection
        .query_opt(
            CREATE_ITEM,
            &[
                &key.as_str(),
                &name.as_str().as_bytes(),
                &unix_millis(at),
                &live_since,
                &(PURGE_BATCH as i64),
            ],
        )
        .await?
        .map(|row| column::<i64>(&row, 0))
        .transpose()?;
    if let Some(id) = created {
        connection.commit().await?;
        return Ok(Keyed::Created(Item {
            id: Id::new(id),
            name,
        }));
    }
    let first = first_item(&mut connection, key, live_since).await?;
    // Only the purge was written; committed within the budget like it.
    connection.commit().await?;
    first
        .map(|first| Keyed::of_live_key(first, same))
        .ok_or_else(vanished)
}

pub(super) async fn create_product(
    pool: &Pool,
    name: Name,
    price: Price,
    key: &IdempotencyKey,
    at: SystemTime,
) -> Result<Keyed<Product>, RepositoryError> {
    let live_since = live_since(at);
    let same = |first: &Product| first.name == name && first.price == price;
    let mut connection = lease(pool).await?;
    if let Some(first) = first_product(&mut connection, key, live_since).await? {
        return Ok(Keyed::of_live_key(first, same));
    }
    connection.begin_write().await?;
    let created = connection
        .query_opt(
            CREATE_PRODUCT,
            &[
                &key.as_str(),
                &name.as_str().as_bytes(),
                &unix_millis(at),
                &live_since,
                &(PURGE_BATCH as i64),
                &price.get(),
            ],
        )
        .await?
        .map(|row| column::<i64>(&row, 0))
        .transpose()?;
    if let Some(id) = created {
        connection.commit().await?;
        return Ok(Keyed::Created(Product {
            id: Id::new(id),
            name,
            price,
        }));
    }
    let first = first_product(&mut connection, key, live_since).await?;
    // Only the purge was written; committed within the budget like it.
    connection.commit().await?;
    first
        .map(|first| Keyed::of_live_key(first, same))
        .ok_or_else(vanished)
}
