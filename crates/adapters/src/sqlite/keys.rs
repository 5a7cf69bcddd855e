//! Keyed creates in the writer's batch transaction (C7): the key is looked
//! up, and only when no live key holds it the row is inserted and the key
//! stored with the row's first values (migration 0002). Writes of a batch
//! run one after another in one transaction, so a second create with the
//! same key in the same batch sees the first one's key and replays it.

use std::time::SystemTime;

use items_domain::idempotency::{PURGE_BATCH, live_since, unix_millis};
use items_domain::{Id, IdempotencyKey, Item, Keyed, Name, Price, Product, RepositoryError};
use rusqlite::{Connection, OptionalExtension as _, params};

use super::messages::Failure;
use crate::sql::rows::{stored_item, stored_product};

/// A stored row that does not decode (a name that is not UTF-8, written by
/// someone else): the batch fails as for any other store error.
fn undecodable(error: RepositoryError) -> Failure {
    Box::new(error)
}

/// A stored name's bytes, whether it was written as a blob (as this service
/// does) or as text.
fn stored_bytes(row: &rusqlite::Row<'_>, column: usize) -> rusqlite::Result<Vec<u8>> {
    Ok(row.get_ref(column)?.as_bytes()?.to_vec())
}

/// Removes up to [`PURGE_BATCH`] expired keys through the table's
/// `created_at` index: never a scan of the table. `sql` is one of the two
/// statements below.
fn purge(connection: &Connection, sql: &str, live_since: i64) -> Result<(), Failure> {
    connection
        .prepare_cached(sql)?
        .execute(params![live_since, PURGE_BATCH as i64])?;
    Ok(())
}

const PURGE_ITEM_KEYS: &str = "delete from item_keys where key in \
     (select key from item_keys where created_at < ?1 order by created_at limit ?2)";
const PURGE_PRODUCT_KEYS: &str = "delete from product_keys where key in \
     (select key from product_keys where created_at < ?1 order by created_at limit ?2)";

/// The keyed item create of the port, inside the batch's transaction.
pub(super) fn create_item(
    connection: &Connection,
    name: &Name,
    key: &IdempotencyKey,
    at: SystemTime,
) -> Result<Keyed<Item>, Failure> {
    let live_since = live_since(at);
    let first: Option<(i64, Vec<u8>)> = connection
        .prepare_cached("select item_id, name from item_keys where key = ?1 and created_at >= ?2")?
        .query_row(params![key.as_str(), live_since], |row| {
            Ok((row.get(0)?, stored_bytes(row, 1)?))
        })
        .optional()?;
    if let Some((id, first_name)) = first {
        return Ok(if first_name == name.as_str().as_bytes() {
            Keyed::Replayed(stored_item((id, first_name)).map_err(undecodable)?)
        } else {
            Keyed::Mismatch
        });
    }
    purge(connection, PURGE_ITEM_KEYS, live_since)?;
    let id: i64 = connection
        .prepare_cached("insert into items (name) values (?1) returning id")?
        .query_row([name.as_str().as_bytes()], |row| row.get(0))?;
    // `or replace`: an expired key still here is taken over by this create.
    connection
        .prepare_cached(
            "insert or replace into item_keys (key, created_at, item_id, name) \
             values (?1, ?2, ?3, ?4)",
        )?
        .execute(params![
            key.as_str(),
            unix_millis(at),
            id,
            name.as_str().as_bytes()
        ])?;
    Ok(Keyed::Created(Item {
        id: Id::new(id),
        name: name.clone(),
    }))
}

/// The keyed product create of the port, inside the batch's transaction.
pub(super) fn create_product(
    connection: &Connection,
    name: &Name,
    price: Price,
    key: &IdempotencyKey,
    at: SystemTime,
) -> Result<Keyed<Product>, Failure> {
    let live_since = live_since(at);
    let first: Option<(i64, Vec<u8>, f64)> = connection
        .prepare_cached(
            "select product_id, name, price from product_keys \
             where key = ?1 and created_at >= ?2",
        )?
        .query_row(params![key.as_str(), live_since], |row| {
            Ok((row.get(0)?, stored_bytes(row, 1)?, row.get(2)?))
        })
        .optional()?;
    if let Some((id, first_name, first_price)) = first {
        let same = first_name == name.as_str().as_bytes() && first_price == price.get();
        return Ok(if same {
            Keyed::Replayed(stored_product((id, first_name, first_price)).map_err(undecodable)?)
        } else {
            Keyed::Mismatch
        });
    }
    purge(connection, PURGE_PRODUCT_KEYS, live_since)?;
    let id: i64 = connection
        .prepare_cached("insert into products (name, price) values (?1, ?2) returning id")?
        .query_row(params![name.as_str().as_bytes(), price.get()], |row| {
            row.get(0)
        })?;
    connection
        .prepare_cached(
            "insert or replace into product_keys (key, created_at, product_id, name, price) \
             values (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            key.as_str(),
            unix_millis(at),
            id,
            name.as_str().as_bytes(),
            price.get()
        ])?;
    Ok(Keyed::Created(Product {
        id: Id::new(id),
        name: name.clone(),
        price,
    }))
}
