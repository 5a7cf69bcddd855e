//! Coalesced point reads of items: every read goes through the queue
//! ([`Operation::ALWAYS_QUEUED`]), and a batch runs one
//! `where id = any($1)` for the reads queued together (a batch of one, the
//! primary-key statement `where id = $1`).
//!
//! Invariants: each caller gets its own row or its own absence, found by
//! id (rows come back in no promised order, and an id may be read twice in
//! one batch); a read alone runs the single-row statement.
//!
//! Why every read queues: 15–21 reads a statement, `GET` 0.59 → 1.72–1.75 ×
//! `pgbench`, docs/performance.md "The PostgreSQL store, measured".

use std::collections::HashMap;

use items_domain::{Position, RepositoryError};
use tokio::time::Instant;

use super::operation::Operation;
use crate::postgres::decode;
use crate::postgres::pool::Lease;
use crate::postgres::positions::{self, POSITION};

/// An item's stored row: id and name bytes.
pub(in crate::postgres) type ItemRow = (i64, Vec<u8>);

/// `get(id)` on the `items` table.
#[derive(Debug)]
pub(in crate::postgres) struct ItemReads;

/// A read's row (or absence), and the position of the server once the
/// batch read it (C13): an upper bound of the state read, sent in the same
/// round trip.
pub(in crate::postgres) type ItemRead = (Option<ItemRow>, Position);

impl Operation for ItemReads {
    type Work = i64;
    type Output = ItemRead;
    const LABEL: &'static str = "get_item";
    const STATEMENT: (&'static str, &'static str) = ("SELECT", "items");
    /// Sent directly, reads that found the slot free went alone (1.06 a
    /// statement): the backend's cost per read starved the client that
    /// shares its core, so requests came one at a time and kept finding the
    /// slot free. Through the queue, 15–21 share a statement. The price is
    /// a task hop for a lone read: one client's p50 93 → 96.5 µs
    /// (docs/performance.md "The PostgreSQL store, measured").
    const ALWAYS_QUEUED: bool = true;
    const PIPELINED: bool = true;

    async fn prepare(lease: &mut Lease) -> Result<(), RepositoryError> {
        lease.prepared(ONE).await?;
        lease.prepared(MANY).await?;
        lease.prepared(POSITION).await?;
        Ok(())
    }

    /// [`ItemReads::one`] or [`ItemReads::many`] on a shared connection,
    /// with the statements [`ItemReads::prepare`] made.
    async fn shared(
        lease: &Lease,
        deadline: Instant,
        ids: &[&i64],
    ) -> Result<Vec<ItemRead>, RepositoryError> {
        let statement = |sql| {
            lease.prepared_already(sql).ok_or_else(|| {
                RepositoryError::unavailable("a pipelined statement was not prepared")
            })
        };
        let position = statement(POSITION)?;
        if let [id] = ids {
            let one = statement(ONE)?;
            let (row, at) = lease
                .run_shared(deadline, |client| async move {
                    futures_util::future::try_join(
                        client.query_opt(&one, &[*id]),
                        client.query_one(&position, &[]),
                    )
                    .await
                })
                .await?;
            let at = positions::read(&at, 0)?;
            return Ok(vec![(row.as_ref().map(decode::item).transpose()?, at)]);
        }
        let many = statement(MANY)?;
        let wanted: Vec<i64> = ids.iter().map(|&&id| id).collect();
        let (rows, at) = lease
            .run_shared(deadline, |client| {
                let wanted = &wanted;
                async move {
                    futures_util::future::try_join(
                        client.query(&many, &[wanted]),
                        client.query_one(&position, &[]),
                    )
                    .await
                }
            })
            .await?;
        found_in(&rows, &wanted, positions::read(&at, 0)?)
    }

    /// The single-row statement: it plans as a primary key lookup; the
    /// array statement for one id cost ~25 µs more client time a read
    /// (docs/performance.md, "Tried and not kept").
    async fn one(lease: &mut Lease, id: &i64) -> Result<ItemRead, RepositoryError> {
        let one = lease.prepared(ONE).await?;
        let position = lease.prepared(POSITION).await?;
        let (row, at) = lease
            .run(|client| async move {
                futures_util::future::try_join(
                    client.query_opt(&one, &[id]),
                    client.query_one(&position, &[]),
                )
                .await
            })
            .await?;
        let at = positions::read(&at, 0)?;
        Ok((row.as_ref().map(decode::item).transpose()?, at))
    }

    /// `= any($1)` is an index scan over the primary key for each id (the
    /// array is deduplicated and sorted by the executor). Rows come back in
    /// no promised order, so each request finds its own by id (a copy: an
    /// id may be read twice in one batch).
    async fn many(lease: &mut Lease, ids: &[&i64]) -> Result<Vec<ItemRead>, RepositoryError> {
        let wanted: Vec<i64> = ids.iter().map(|&&id| id).collect();
        let many = lease.prepared(MANY).await?;
        let position = lease.prepared(POSITION).await?;
        let (rows, at) = lease
            .run(|client| {
                let wanted = &wanted;
                async move {
                    futures_util::future::try_join(
                        client.query(&many, &[wanted]),
                        client.query_one(&position, &[]),
                    )
                    .await
                }
            })
            .await?;
        found_in(&rows, &wanted, positions::read(&at, 0)?)
    }
}

/// One id's row.
const ONE: &str = "select id, name from items where id = $1";
/// Many ids' rows, in no promised order.
const MANY: &str = "select id, name from items where id = any($1)";

/// Each of `wanted`'s own row among `rows`, or its absence, with the
/// position the batch was read at.
fn found_in(
    rows: &[tokio_postgres::Row],
    wanted: &[i64],
    at: Position,
) -> Result<Vec<ItemRead>, RepositoryError> {
    let found: HashMap<i64, Vec<u8>> = decode::items(rows)?.into_iter().collect();
    Ok(wanted
        .iter()
        .map(|id| (found.get(id).map(|name| (*id, name.clone())), at))
        .collect())
}
