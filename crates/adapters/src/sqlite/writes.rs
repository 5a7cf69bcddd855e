//! The statements of one batch transaction, run by the writer thread on
//! its own connection (`writer.rs`).
//!
//! Invariants: every statement is prepared once and kept (`prepare_cached`,
//! [`STATEMENT_CACHE`] of them at most); writes run in the order they were
//! queued, and the first failure stops the batch (the writer rolls it
//! back); a run of item creates is one multi-row `insert … returning id`,
//! and each caller gets the id its own name was stored under.
//!
//! Why one insert per run of creates: `POST /items` over SQLite 24.0k →
//! 25.4k req/s, docs/performance.md "The SQLite store, measured".

use std::sync::OnceLock;

use items_domain::{Id, Item, Name, Product, Replaced};
use rusqlite::{Connection, params, params_from_iter};

use super::keys;
use super::messages::{Failure, Write, Written};

/// Rows in one multi-row `insert` at most: a longer run of creates is
/// split into statements of this many rows and one shorter rest. One
/// statement per size is cached, so the cache holds at most this many of
/// them (see [`STATEMENT_CACHE`]).
pub(super) const MAX_ROWS_PER_INSERT: usize = 32;

/// Statements the connection keeps prepared: one multi-row insert per size
/// up to [`MAX_ROWS_PER_INSERT`], and the dozen others of this file and
/// `keys.rs`.
pub(super) const STATEMENT_CACHE: usize = MAX_ROWS_PER_INSERT + 16;

/// Every write, in the transaction `BEGIN IMMEDIATE` opened (the caller
/// commits); the first failure stops it.
pub(super) fn transaction<'a>(
    connection: &Connection,
    writes: impl Iterator<Item = &'a Write>,
) -> Result<Vec<Written>, Failure> {
    let writes: Vec<&Write> = writes.collect();
    let mut written = Vec::with_capacity(writes.len());
    let mut rest = writes.as_slice();
    while let Some((first, _)) = rest.split_first() {
        // A run of item creates is one statement: under load most of a
        // batch is creates, and one statement is bound, stepped and reset
        // once for the whole run.
        let run = rest
            .iter()
            .take(MAX_ROWS_PER_INSERT)
            .take_while(|write| matches!(write, Write::CreateItem(_)))
            .count();
        if run > 1 {
            let names: Vec<&Name> = rest[..run]
                .iter()
                .filter_map(|write| match write {
                    Write::CreateItem(name) => Some(name),
                    _ => None,
                })
                .collect();
            create_items(connection, &names, &mut written)?;
            rest = &rest[run..];
        } else {
            written.push(one(connection, first)?);
            rest = &rest[1..];
        }
    }
    Ok(written)
}

/// `insert into items (name) values (?1),(?2),… returning id` for each
/// number of rows, index `rows - 1`; built once.
fn insert_items_sql(rows: usize) -> &'static str {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let all = SQL.get_or_init(|| {
        (1..=MAX_ROWS_PER_INSERT)
            .map(|rows| {
                let values: Vec<String> = (1..=rows).map(|index| format!("(?{index})")).collect();
                format!(
                    "insert into items (name) values {} returning id",
                    values.join(",")
                )
            })
            .collect()
    });
    &all[rows.clamp(1, MAX_ROWS_PER_INSERT) - 1]
}

/// Creates `names` (at most [`MAX_ROWS_PER_INSERT`]) in one statement, in
/// their order. The batch holds the file's write lock (`BEGIN IMMEDIATE`),
/// so `AUTOINCREMENT` hands the rows consecutive ids in the order of the
/// `values`; SQLite does not promise the order of `returning` rows, so the
/// ids are sorted before they are matched to the names.
fn create_items(
    connection: &Connection,
    names: &[&Name],
    written: &mut Vec<Written>,
) -> Result<(), Failure> {
    let mut statement = connection.prepare_cached(insert_items_sql(names.len()))?;
    let mut ids = statement
        .query_map(
            params_from_iter(names.iter().map(|name| name.as_str().as_bytes())),
            |row| row.get::<_, i64>(0),
        )?
        .collect::<Result<Vec<i64>, _>>()?;
    if ids.len() != names.len() {
        return Err(format!("{} rows inserted returned {} ids", names.len(), ids.len()).into());
    }
    ids.sort_unstable();
    written.extend(ids.into_iter().zip(names).map(|(id, name)| {
        Written::Item(Item {
            id: Id::new(id),
            name: (*name).clone(),
        })
    }));
    Ok(())
}

/// One write, inside the batch's transaction.
fn one(connection: &Connection, write: &Write) -> Result<Written, Failure> {
    Ok(match write {
        Write::CreateItem(name) => {
            let id: i64 = connection
                .prepare_cached(insert_items_sql(1))?
                .query_row([name.as_str().as_bytes()], |row| row.get(0))?;
            Written::Item(Item {
                id: Id::new(id),
                name: name.clone(),
            })
        }
        Write::CreateItemKeyed { name, key, at } => {
            Written::KeyedItem(keys::create_item(connection, name, key, *at)?)
        }
        Write::CreateProductKeyed {
            name,
            price,
            key,
            at,
        } => Written::KeyedProduct(keys::create_product(connection, name, *price, key, *at)?),
        Write::ReplaceItem { item, expected } => {
            Written::Replaced(replace(connection, item, expected.as_ref())?)
        }
        Write::DeleteItem(id) => {
            let deleted = connection
                .prepare_cached("delete from items where id = ?1")?
                .execute([id.get()])?;
            Written::Deleted(deleted > 0)
        }
        Write::CreateProduct(name, price) => {
            let id: i64 = connection
                .prepare_cached("insert into products (name, price) values (?1, ?2) returning id")?
                .query_row(params![name.as_str().as_bytes(), price.get()], |row| {
                    row.get(0)
                })?;
            Written::Product(Product {
                id: Id::new(id),
                name: name.clone(),
                price: *price,
            })
        }
    })
}

/// A compare-and-swap in one statement: with `expected`, the `where` clause
/// writes only over that name. When nothing changed, the same transaction
/// tells a missing item from a changed one.
fn replace(
    connection: &Connection,
    item: &Item,
    expected: Option<&Name>,
) -> Result<Replaced, Failure> {
    let id = item.id.get();
    let new = item.name.as_str().as_bytes();
    let updated = match expected {
        None => connection
            .prepare_cached("update items set name = ?2 where id = ?1")?
            .execute(params![id, new])?,
        Some(expected) => connection
            .prepare_cached("update items set name = ?2 where id = ?1 and name = ?3")?
            .execute(params![id, new, expected.as_str().as_bytes()])?,
    };
    if updated > 0 {
        return Ok(Replaced::Yes);
    }
    if expected.is_none() {
        return Ok(Replaced::NotFound);
    }
    let exists: bool = connection
        .prepare_cached("select exists (select 1 from items where id = ?1)")?
        .query_row([id], |row| row.get(0))?;
    Ok(if exists {
        Replaced::Changed
    } else {
        Replaced::NotFound
    })
}
