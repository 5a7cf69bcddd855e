//! A PostgreSQL database as either end of `items-service copy` (C12): a
//! read snapshot of it ([`PostgresSnapshot`]), or an empty database filled
//! in one transaction ([`PostgresSink`]).
//!
//! Each holds one connection of its own, outside the service's pool: a copy
//! is a command run on its own. The source may be served meanwhile (a
//! repeatable-read transaction keeps its snapshot while others write). The
//! sink locks `items` and `products` against writers (readers go on) until
//! it commits or rolls back, so a service using the destination meanwhile
//! would see its writes wait: stop it first.

use std::time::Duration;

use async_trait::async_trait;
use items_domain::transfer::{Counters, Counts, SnapshotSource, StoreSink};
use items_domain::{Id, Item, Product, RepositoryError};

use super::decode::{self, column};
use super::hosts::Hosts;
use super::link::Link;
use super::options::QUIET;
use super::start::ConnectError;
use super::url::PostgresUrl;
use crate::sql::rows::{page_bounds, stored_items, stored_products};

/// How long connecting may take: a copy is run by hand, so it fails soon
/// and says why rather than retrying as a starting service does.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an end of a copy could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum BeginError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Connected, but the copy's transaction could not begin.
    #[error("the database refused to begin the copy's transaction")]
    Begin(#[source] tokio_postgres::Error),
}

/// Connects once to `url`: to the first of its hosts that fits, when it
/// lists several (`hosts`).
async fn connect(url: &PostgresUrl) -> Result<Link, ConnectError> {
    let hosts = Hosts::new(url, QUIET);
    let started = tokio::time::Instant::now();
    // Bounded by the selection itself, whose failure names each host.
    match hosts.connect(CONNECT_TIMEOUT).await {
        Ok(opened) => Ok(opened.link),
        Err(source) if source.is_permanent() => Err(ConnectError::Refused(source)),
        Err(source) => Err(ConnectError::Unreachable {
            waited: started.elapsed(),
            source,
        }),
    }
}

/// One repeatable-read, read-only transaction on a database, held until
/// dropped.
#[derive(Debug)]
pub struct PostgresSnapshot {
    connection: Link,
}

impl PostgresSnapshot {
    /// Connects to the database at `url` and takes its snapshot.
    ///
    /// # Errors
    /// [`BeginError::Connect`] when it cannot be reached;
    /// [`BeginError::Begin`] when the transaction cannot begin or the
    /// database holds no store.
    pub async fn open(url: &PostgresUrl) -> Result<Self, BeginError> {
        let connection = connect(url).await?;
        // The snapshot is taken at the transaction's first query.
        connection
            .batch_execute(
                "begin isolation level repeatable read, read only; \
                 select 1 from item_tally limit 1",
            )
            .await
            .map_err(BeginError::Begin)?;
        Ok(Self { connection })
    }

    /// The last value `table`'s identity handed out (0: none). Sequences
    /// stand outside snapshots: read after the snapshot was taken, this is
    /// never below an id in it.
    async fn last_id(&mut self, table: &str) -> Result<i64, RepositoryError> {
        let row = self
            .connection
            .query_one("select pg_get_serial_sequence($1, 'id')", &[&table])
            .await
            .map_err(RepositoryError::unavailable)?;
        let sequence: String = column(&row, 0)?;
        // `sequence` is the catalog's own, already quoted, name.
        let row = self
            .connection
            .query_one(
                &format!("select last_value, is_called from {sequence}"),
                &[],
            )
            .await
            .map_err(RepositoryError::unavailable)?;
        let (last, called): (i64, bool) = (column(&row, 0)?, column(&row, 1)?);
        Ok(if called { last } else { last - 1 })
    }
}

#[async_trait]
impl SnapshotSource for PostgresSnapshot {
    async fn counters(&mut self) -> Result<Counters, RepositoryError> {
        Ok(Counters {
            items: self.last_id("items").await?,
            products: self.last_id("products").await?,
        })
    }

    async fn items_after(
        &mut self,
        after: Option<Id>,
        limit: usize,
    ) -> Result<Vec<Item>, RepositoryError> {
        let (after, limit) = page_bounds(after, limit);
        let rows = self
            .connection
            .query(
                "select id, name from items where id > $1 order by id limit $2",
                &[&after, &limit],
            )
            .await
            .map_err(RepositoryError::unavailable)?;
        stored_items(decode::items(&rows)?)
    }

    async fn products_after(
        &mut self,
        after: Option<Id>,
        limit: usize,
    ) -> Result<Vec<Product>, RepositoryError> {
        let (after, limit) = page_bounds(after, limit);
        let rows = self
            .connection
            .query(
                "select id, name, price from products where id > $1 order by id limit $2",
                &[&after, &limit],
            )
            .await
            .map_err(RepositoryError::unavailable)?;
        stored_products(decode::products(&rows)?)
    }
}

/// A database being filled in one transaction.
#[derive(Debug)]
pub struct PostgresSink {
    connection: Link,
}

impl PostgresSink {
    /// Connects to the database at `url`, brings its schema up to date,
    /// begins the transaction and locks `items` and `products` against
    /// other writers until it ends.
    ///
    /// # Errors
    /// [`BeginError::Connect`] when it cannot be reached or migrated;
    /// [`BeginError::Begin`] when the transaction or the locks fail.
    pub async fn open(url: &PostgresUrl) -> Result<Self, BeginError> {
        let mut connection = connect(url).await?;
        crate::sql::migrations::run_postgres(&mut connection)
            .await
            .map_err(ConnectError::from)?;
        connection
            .batch_execute("begin; lock table items, products in exclusive mode")
            .await
            .map_err(BeginError::Begin)?;
        Ok(Self { connection })
    }
}

#[async_trait]
impl StoreSink for PostgresSink {
    async fn contents(&mut self) -> Result<Counts, RepositoryError> {
        let row = self
            .connection
            .query_one(
                "select (select count(*) from items), (select count(*) from products)",
                &[],
            )
            .await
            .map_err(RepositoryError::unavailable)?;
        let (items, products): (i64, i64) = (column(&row, 0)?, column(&row, 1)?);
        Ok(Counts {
            items: items.unsigned_abs(),
            products: products.unsigned_abs(),
        })
    }

    /// One statement per batch: the tally's statement trigger adds the
    /// batch's row count once, exactly.
    async fn write_items(&mut self, items: &[Item]) -> Result<(), RepositoryError> {
        let ids: Vec<i64> = items.iter().map(|item| item.id.get()).collect();
        let names: Vec<&[u8]> = items
            .iter()
            .map(|item| item.name.as_str().as_bytes())
            .collect();
        self.connection
            .execute(
                "insert into items (id, name) overriding system value \
                 select * from unnest($1::int8[], $2::bytea[])",
                &[&ids, &names],
            )
            .await
            .map(drop)
            .map_err(RepositoryError::unavailable)
    }

    async fn write_products(&mut self, products: &[Product]) -> Result<(), RepositoryError> {
        let ids: Vec<i64> = products.iter().map(|product| product.id.get()).collect();
        let names: Vec<&[u8]> = products
            .iter()
            .map(|product| product.name.as_str().as_bytes())
            .collect();
        let prices: Vec<f64> = products.iter().map(|product| product.price.get()).collect();
        self.connection
            .execute(
                "insert into products (id, name, price) overriding system value \
                 select * from unnest($1::int8[], $2::bytea[], $3::float8[])",
                &[&ids, &names, &prices],
            )
            .await
            .map(drop)
            .map_err(RepositoryError::unavailable)
    }

    async fn commit(&mut self, counters: Counters) -> Result<(), RepositoryError> {
        // Ids given explicitly leave the identity where it was; `restart`
        // moves it past the source's counter. Unlike `setval`, it is part of
        // the transaction: a copy that fails leaves the identity as it was.
        // The rows inserted were recorded as changes by the schema's
        // triggers: the copy starts its feed empty instead, so no cursor
        // of the source resumes here (C14).
        let statement = format!(
            "alter table items alter column id restart with {}; \
             alter table products alter column id restart with {}; \
             {}; \
             commit",
            next_after(counters.items),
            next_after(counters.products),
            super::changes::FORGET_ALL,
        );
        self.connection
            .batch_execute(&statement)
            .await
            .map_err(RepositoryError::unavailable)
    }

    async fn rollback(&mut self) -> Result<(), RepositoryError> {
        self.connection
            .batch_execute("rollback")
            .await
            .map_err(RepositoryError::unavailable)
    }
}

/// The first id a counter at `last` hands out (an identity starts at 1).
fn next_after(last: i64) -> i64 {
    last.saturating_add(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_id_follows_the_counter_and_starts_at_one() {
        assert_eq!(next_after(0), 1);
        assert_eq!(next_after(41), 42);
        assert_eq!(next_after(-5), 1);
        assert_eq!(next_after(i64::MAX), i64::MAX);
    }
}
