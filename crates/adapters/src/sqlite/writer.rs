//! The writer task: the one connection that writes, applying the queued
//! writes a batch per transaction (see [`crate::batch`]).
//!
//! Each batch runs between `BEGIN IMMEDIATE` and `COMMIT`. `IMMEDIATE` takes
//! the file's write lock at the start, waiting up to the busy timeout for
//! another process that holds it, instead of failing half-way with
//! `SQLITE_BUSY_SNAPSHOT` as a deferred transaction that reads before it
//! writes can. Every caller is answered only after `COMMIT` returned: with
//! `synchronous=FULL` the batch is then on disk. When any statement or the
//! commit fails, the batch is rolled back and every request in it is
//! answered [`RepositoryError::Unavailable`]: none of them is stored, and
//! telling a bad write from its innocent neighbours is not worth a second
//! attempt for a failure that is the disk's or the lock's, not a request's.
//!
//! Each write has a deadline, its budget (`DATABASE_STATEMENT_TIMEOUT_MS`)
//! from when it was queued. A write abandoned before the writer claimed it
//! (its deadline passed, or its caller stopped waiting: a client gone) is
//! never applied: the writer leaves such writes out when it takes a batch,
//! and claims the rest only once
//! `BEGIN IMMEDIATE` holds the lock, so a write that waited past its
//! deadline for another process's lock is answered 503 and not committed
//! afterwards. Claimed writes wait for their batch, which decides for all
//! of them ([`crate::batch`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use items_domain::{
    Id, IdempotencyKey, Item, Keyed, Name, Price, Product, Replaced, RepositoryError,
};
use sqlx::{Executor as _, SqliteConnection};
use tokio::sync::oneshot;

use crate::batch::{Batch, Batches};

use super::WRITES_PER_COMMIT;

/// One write a repository asks for.
#[derive(Debug)]
pub(super) enum Write {
    CreateItem(Name),
    ReplaceItem {
        item: Item,
        expected: Option<Name>,
    },
    DeleteItem(Id),
    CreateProduct(Name, Price),
    /// A create under an idempotency key (C7), applied alone (`keys.rs`).
    CreateItemKeyed {
        name: Name,
        key: IdempotencyKey,
        at: SystemTime,
    },
    CreateProductKeyed {
        name: Name,
        price: Price,
        key: IdempotencyKey,
        at: SystemTime,
    },
}

/// What a write did, once committed.
#[derive(Debug)]
pub(super) enum Written {
    Item(Item),
    Replaced(Replaced),
    Deleted(bool),
    Product(Product),
    KeyedItem(Keyed<Item>),
    KeyedProduct(Keyed<Product>),
}

/// The answer a caller gets.
pub(super) type Reply = Result<Written, RepositoryError>;

/// Counts the writer keeps, for tests and operators.
#[derive(Debug, Default)]
pub(super) struct Counters {
    /// Transactions committed.
    pub(super) commits: AtomicU64,
}

/// Runs until the queue is closed and drained or `stop` fires; then closes
/// the queue, answers what is still in it, and closes the connection.
pub(super) async fn run(
    mut connection: SqliteConnection,
    mut batches: Batches<Write, Reply>,
    mut stop: oneshot::Receiver<()>,
    counters: Arc<Counters>,
) {
    let mut stopping = false;
    loop {
        let batch = tokio::select! {
            batch = batches.next() => batch,
            _ = &mut stop, if !stopping => {
                stopping = true;
                batches.close();
                continue;
            }
        };
        let Some(batch) = batch else { break };
        apply(&mut connection, batch, &counters).await;
    }
    let _ = sqlx::Connection::close(connection).await;
}

/// Applies one batch in one transaction and answers each of its requests;
/// the writes abandoned before the lock was held are left out.
async fn apply(
    connection: &mut SqliteConnection,
    mut batch: Batch<Write, Reply>,
    counters: &Counters,
) {
    batch.prune();
    if batch.is_empty() {
        return;
    }
    if let Err(error) = connection.execute("BEGIN IMMEDIATE").await {
        return fail(connection, batch, error).await;
    }
    batch.claim();
    if batch.is_empty() {
        let _ = connection.execute("ROLLBACK").await;
        return;
    }
    match transaction(connection, batch.work()).await {
        Ok(written) => {
            counters.commits.fetch_add(1, Ordering::Relaxed);
            metrics::histogram!(WRITES_PER_COMMIT).record(batch.len() as f64);
            batch.answer(written.into_iter().map(Ok));
        }
        Err(error) => fail(connection, batch, error).await,
    }
}

/// Rolls back what the batch wrote and answers each of its requests 503.
async fn fail(connection: &mut SqliteConnection, batch: Batch<Write, Reply>, error: sqlx::Error) {
    // Ends the transaction if the failure left it open; without one SQLite
    // says so, which changes nothing.
    let _ = connection.execute("ROLLBACK").await;
    tracing::error!(
        error = %error,
        writes = batch.len(),
        "a SQLite write batch failed; none of it was stored"
    );
    let cause = Arc::new(error);
    batch.answer_each(|_| Err(RepositoryError::unavailable(Arc::clone(&cause))));
}

/// Every write, then `COMMIT`, in the transaction `BEGIN IMMEDIATE` opened;
/// the first failure stops it.
async fn transaction<'a>(
    connection: &mut SqliteConnection,
    writes: impl Iterator<Item = &'a Write>,
) -> Result<Vec<Written>, sqlx::Error> {
    let writes: Vec<&Write> = writes.collect();
    let mut written = Vec::with_capacity(writes.len());
    let mut rest = writes.as_slice();
    while let Some((first, _)) = rest.split_first() {
        // A run of item creates is one statement: each statement is a hand-off
        // to sqlx's connection thread, the cost that bounds POST /items.
        let run = rest
            .iter()
            .take(MAX_ROWS_PER_INSERT)
            .take_while(|write| matches!(write, Write::CreateItem(_)))
            .count();
        if run > 1 {
            let names = rest[..run].iter().filter_map(|write| match write {
                Write::CreateItem(name) => Some(name),
                _ => None,
            });
            written.extend(create_items(connection, names.collect()).await?);
            rest = &rest[run..];
        } else {
            written.push(one(connection, first).await?);
            rest = &rest[1..];
        }
    }
    connection.execute("COMMIT").await?;
    Ok(written)
}

/// Rows in one multi-row `insert`, well below SQLite's 32,766 parameters.
const MAX_ROWS_PER_INSERT: usize = 500;

/// Creates `names` in one statement, in their order. The batch holds the
/// file's write lock (`BEGIN IMMEDIATE`), so `AUTOINCREMENT` hands the rows
/// consecutive ids in the order of the `values`; SQLite does not promise
/// the order of `returning` rows, so the ids are sorted before they are
/// matched to the names.
async fn create_items(
    connection: &mut SqliteConnection,
    names: Vec<&Name>,
) -> Result<Vec<Written>, sqlx::Error> {
    let mut sql = String::from("insert into items (name) values ");
    for index in 1..=names.len() {
        if index > 1 {
            sql.push(',');
        }
        sql.push_str("(?");
        sql.push_str(itoa::Buffer::new().format(index));
        sql.push(')');
    }
    sql.push_str(" returning id");
    let mut query = sqlx::query_scalar::<_, i64>(&sql);
    for name in &names {
        query = query.bind(name.as_str().as_bytes());
    }
    let mut ids = query.fetch_all(&mut *connection).await?;
    if ids.len() != names.len() {
        return Err(sqlx::Error::Protocol(format!(
            "{} rows inserted returned {} ids",
            names.len(),
            ids.len()
        )));
    }
    ids.sort_unstable();
    Ok(ids
        .into_iter()
        .zip(names)
        .map(|(id, name)| {
            Written::Item(Item {
                id: Id::new(id),
                name: name.clone(),
            })
        })
        .collect())
}

/// One write, inside the batch's transaction.
async fn one(connection: &mut SqliteConnection, write: &Write) -> Result<Written, sqlx::Error> {
    Ok(match write {
        Write::CreateItem(name) => {
            let id: i64 = sqlx::query_scalar("insert into items (name) values (?1) returning id")
                .bind(name.as_str().as_bytes())
                .fetch_one(&mut *connection)
                .await?;
            Written::Item(Item {
                id: Id::new(id),
                name: name.clone(),
            })
        }
        Write::CreateItemKeyed { name, key, at } => {
            Written::KeyedItem(super::keys::create_item(connection, name, key, *at).await?)
        }
        Write::CreateProductKeyed {
            name,
            price,
            key,
            at,
        } => Written::KeyedProduct(
            super::keys::create_product(connection, name, *price, key, *at).await?,
        ),
        Write::ReplaceItem { item, expected } => {
            Written::Replaced(replace(connection, item, expected.as_ref()).await?)
        }
        Write::DeleteItem(id) => {
            let deleted = sqlx::query("delete from items where id = ?1")
                .bind(id.get())
                .execute(&mut *connection)
                .await?
                .rows_affected();
            Written::Deleted(deleted > 0)
        }
        Write::CreateProduct(name, price) => {
            let id: i64 = sqlx::query_scalar(
                "insert into products (name, price) values (?1, ?2) returning id",
            )
            .bind(name.as_str().as_bytes())
            .bind(price.get())
            .fetch_one(&mut *connection)
            .await?;
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
async fn replace(
    connection: &mut SqliteConnection,
    item: &Item,
    expected: Option<&Name>,
) -> Result<Replaced, sqlx::Error> {
    let id = item.id.get();
    let new = item.name.as_str().as_bytes();
    let updated = match expected {
        None => {
            sqlx::query("update items set name = ?2 where id = ?1")
                .bind(id)
                .bind(new)
                .execute(&mut *connection)
                .await?
        }
        Some(expected) => {
            sqlx::query("update items set name = ?2 where id = ?1 and name = ?3")
                .bind(id)
                .bind(new)
                .bind(expected.as_str().as_bytes())
                .execute(&mut *connection)
                .await?
        }
    }
    .rows_affected();
    if updated > 0 {
        return Ok(Replaced::Yes);
    }
    if expected.is_none() {
        return Ok(Replaced::NotFound);
    }
    let exists: bool = sqlx::query_scalar("select exists (select 1 from items where id = ?1)")
        .bind(id)
        .fetch_one(&mut *connection)
        .await?;
    Ok(if exists {
        Replaced::Changed
    } else {
        Replaced::NotFound
    })
}
