//! Group-committed creates: one `insert … select from unnest(…)` for every
//! create queued while the pool was busy, so a batch of k pays one round
//! trip, one statement, one commit and one run of the tally trigger.
//!
//! Invariants:
//! - ids follow arrival order within a batch: the rows are inserted `order
//!   by` their position in the array, the identity column's `nextval` is
//!   taken row by row in that order, and `returning` rows (whose order
//!   PostgreSQL does not promise) are sorted before the n-th id goes to the
//!   n-th caller; another session inserting at the same time may take ids
//!   in between, ours still rise with the position;
//! - creates are writes ([`Operation::WRITES`]): the coalescer runs each
//!   statement, alone or batched, between `begin` and a `commit` the lease
//!   sends only before its deadline, so a batch is stored whole or not at
//!   all, never after a 503, and its callers are answered after the commit;
//! - the tally triggers of migration 0002 are per statement with
//!   transition tables: one update adding k, exact;
//! - only key-less creates belong here: a create that carries an
//!   idempotency key needs its own statement (it must find an earlier
//!   create with the same key), and such creates are rare, so they take the
//!   single path.
//!
//! Why: 16 creates a statement, the backend's CPU 25 µs a create against
//! `pgbench`'s 208, docs/performance.md "The PostgreSQL store, measured".

use items_domain::{Name, Price, RepositoryError};

use super::operation::Operation;
use crate::postgres::decode::column;
use crate::postgres::pool::Lease;

/// `create(name)` on the `items` table; the output is the new id.
#[derive(Debug)]
pub(in crate::postgres) struct ItemCreates;

impl Operation for ItemCreates {
    type Work = Name;
    type Output = i64;
    const LABEL: &'static str = "create_item";
    const STATEMENT: (&'static str, &'static str) = ("INSERT", "items");
    const WRITES: bool = true;

    async fn one(lease: &mut Lease, name: &Name) -> Result<i64, RepositoryError> {
        let row = lease
            .query_one(
                "insert into items (name) values ($1) returning id",
                &[&name.as_str().as_bytes()],
            )
            .await?;
        column(&row, 0)
    }

    async fn many(lease: &mut Lease, names: &[&Name]) -> Result<Vec<i64>, RepositoryError> {
        let names: Vec<&[u8]> = names.iter().map(|name| name.as_str().as_bytes()).collect();
        let rows = lease
            .query(
                "insert into items (name) \
                 select name from unnest($1::bytea[]) with ordinality as batch (name, position) \
                 order by position \
                 returning id",
                &[&names],
            )
            .await?;
        in_order(&rows)
    }
}

/// `create(name, price)` on the `products` table; the output is the new id.
#[derive(Debug)]
pub(in crate::postgres) struct ProductCreates;

impl Operation for ProductCreates {
    type Work = (Name, Price);
    type Output = i64;
    const LABEL: &'static str = "create_product";
    const STATEMENT: (&'static str, &'static str) = ("INSERT", "products");
    const WRITES: bool = true;

    async fn one(lease: &mut Lease, (name, price): &(Name, Price)) -> Result<i64, RepositoryError> {
        let row = lease
            .query_one(
                "insert into products (name, price) values ($1, $2) returning id",
                &[&name.as_str().as_bytes(), &price.get()],
            )
            .await?;
        column(&row, 0)
    }

    async fn many(
        lease: &mut Lease,
        products: &[&(Name, Price)],
    ) -> Result<Vec<i64>, RepositoryError> {
        let names: Vec<&[u8]> = products
            .iter()
            .map(|(name, _)| name.as_str().as_bytes())
            .collect();
        let prices: Vec<f64> = products.iter().map(|(_, price)| price.get()).collect();
        let rows = lease
            .query(
                "insert into products (name, price) \
                 select name, price \
                 from unnest($1::bytea[], $2::float8[]) with ordinality as batch (name, price, position) \
                 order by position \
                 returning id",
                &[&names, &prices],
            )
            .await?;
        in_order(&rows)
    }
}

/// The batch's ids in the order they were taken, which is the order of
/// the rows' positions.
fn in_order(rows: &[tokio_postgres::Row]) -> Result<Vec<i64>, RepositoryError> {
    let mut ids = rows
        .iter()
        .map(|row| column(row, 0))
        .collect::<Result<Vec<i64>, _>>()?;
    ids.sort_unstable();
    Ok(ids)
}
