//! Keyed creates in the writer's batch transaction (C7): the key is looked
//! up, and only when no live key holds it the row is inserted and the key
//! stored with the row's first values (migration 0002). Writes of a batch
//! run one after another in one transaction, so a second create with the
//! same key in the same batch sees the first one's key and replays it.

use std::time::SystemTime;

use items_domain::idempotency::{PURGE_BATCH, live_since, unix_millis};
use items_domain::{Id, IdempotencyKey, Item, Keyed, Name, Price, Product, RepositoryError};
use sqlx::SqliteConnection;

use crate::stored_rows::{stored_item, stored_product};

/// A stored row that does not decode (a name that is not UTF-8, written by
/// someone else): the batch fails as for any other store error.
fn undecodable(error: RepositoryError) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(error))
}

/// Removes up to [`PURGE_BATCH`] expired keys of `table`, oldest first,
/// through its `created_at` index: never a scan of the table.
async fn purge(
    connection: &mut SqliteConnection,
    table: &'static str,
    live_since: i64,
) -> Result<(), sqlx::Error> {
    let sql = format!(
        "delete from {table} where key in \
         (select key from {table} where created_at < ?1 order by created_at limit ?2)"
    );
    sqlx::query(&sql)
        .bind(live_since)
        .bind(PURGE_BATCH as i64)
        .execute(&mut *connection)
        .await
        .map(drop)
}

/// The keyed item create of the port, inside the batch's transaction.
pub(super) async fn create_item(
    connection: &mut SqliteConnection,
    name: &Name,
    key: &IdempotencyKey,
    at: SystemTime,
) -> Result<Keyed<Item>, sqlx::Error> {
    let live_since = live_since(at);
    let first: Option<(i64, Vec<u8>)> =
        sqlx::query_as("select item_id, name from item_keys where key = ?1 and created_at >= ?2")
            .bind(key.as_str())
            .bind(live_since)
            .fetch_optional(&mut *connection)
            .await?;
    if let Some((id, first_name)) = first {
        return Ok(if first_name == name.as_str().as_bytes() {
            Keyed::Replayed(stored_item((id, first_name)).map_err(undecodable)?)
        } else {
            Keyed::Mismatch
        });
    }
    purge(connection, "item_keys", live_since).await?;
    let id: i64 = sqlx::query_scalar("insert into items (name) values (?1) returning id")
        .bind(name.as_str().as_bytes())
        .fetch_one(&mut *connection)
        .await?;
    // `or replace`: an expired key still here is taken over by this create.
    sqlx::query(
        "insert or replace into item_keys (key, created_at, item_id, name) values (?1, ?2, ?3, ?4)",
    )
    .bind(key.as_str())
    .bind(unix_millis(at))
    .bind(id)
    .bind(name.as_str().as_bytes())
    .execute(&mut *connection)
    .await?;
    Ok(Keyed::Created(Item {
        id: Id::new(id),
        name: name.clone(),
    }))
}

/// The keyed product create of the port, inside the batch's transaction.
pub(super) async fn create_product(
    connection: &mut SqliteConnection,
    name: &Name,
    price: Price,
    key: &IdempotencyKey,
    at: SystemTime,
) -> Result<Keyed<Product>, sqlx::Error> {
    let live_since = live_since(at);
    let first: Option<(i64, Vec<u8>, f64)> = sqlx::query_as(
        "select product_id, name, price from product_keys where key = ?1 and created_at >= ?2",
    )
    .bind(key.as_str())
    .bind(live_since)
    .fetch_optional(&mut *connection)
    .await?;
    if let Some((id, first_name, first_price)) = first {
        let same = first_name == name.as_str().as_bytes() && first_price == price.get();
        return Ok(if same {
            Keyed::Replayed(stored_product((id, first_name, first_price)).map_err(undecodable)?)
        } else {
            Keyed::Mismatch
        });
    }
    purge(connection, "product_keys", live_since).await?;
    let id: i64 =
        sqlx::query_scalar("insert into products (name, price) values (?1, ?2) returning id")
            .bind(name.as_str().as_bytes())
            .bind(price.get())
            .fetch_one(&mut *connection)
            .await?;
    sqlx::query(
        "insert or replace into product_keys (key, created_at, product_id, name, price) \
         values (?1, ?2, ?3, ?4, ?5)",
    )
    .bind(key.as_str())
    .bind(unix_millis(at))
    .bind(id)
    .bind(name.as_str().as_bytes())
    .bind(price.get())
    .execute(&mut *connection)
    .await?;
    Ok(Keyed::Created(Product {
        id: Id::new(id),
        name: name.clone(),
        price,
    }))
}
