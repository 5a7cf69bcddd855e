//! Coalesced point reads of items: one `where id = any($1)` for every read
//! queued while the pool was busy, each caller getting its own row or its
//! own absence.

use std::collections::HashMap;

use items_domain::RepositoryError;

use super::Operation;
use crate::postgres::pool::Lease;

/// An item's stored row: id and name bytes.
pub(in crate::postgres) type ItemRow = (i64, Vec<u8>);

/// `get(id)` on the `items` table.
#[derive(Debug)]
pub(in crate::postgres) struct ItemReads;

impl Operation for ItemReads {
    type Work = i64;
    type Output = Option<ItemRow>;
    const LABEL: &'static str = "get_item";
    /// Measured (`wrk -c32`, 100,000 rows, the service on one core, pool
    /// of 10): with the direct path, reads that found the lane free went
    /// alone, 1.06 per statement at 27–29k reads/s; the backend's cost per
    /// read starved the client that shares its core, so requests came one
    /// at a time and kept finding the lane free. Through the queue, 16–18
    /// per statement at 71–84k reads/s, at half the service's CPU per read.
    /// The price is a task hop for a lone read: one client's p50 went from
    /// 92 µs to 95.5 µs (medians of four interleaved runs;
    /// docs/performance.md, issue 21).
    const ALWAYS_QUEUED: bool = true;

    /// The statement a read has always had: alone, it plans as a primary
    /// key lookup, and a one-connection client sees no change.
    async fn one(lease: &mut Lease, id: &i64) -> Result<Option<ItemRow>, RepositoryError> {
        let id = *id;
        lease
            .run(|connection| {
                sqlx::query_as("select id, name from items where id = $1")
                    .bind(id)
                    .fetch_optional(connection)
            })
            .await
    }

    /// `= any($1)` is an index scan over the primary key for each id (the
    /// array is deduplicated and sorted by the executor). Rows come back in
    /// no promised order, so each request finds its own by id (a copy: an
    /// id may be read twice in one batch).
    async fn many(
        lease: &mut Lease,
        ids: &[&i64],
    ) -> Result<Vec<Option<ItemRow>>, RepositoryError> {
        let wanted: Vec<i64> = ids.iter().map(|&&id| id).collect();
        let rows: Vec<ItemRow> = lease
            .run(|connection| {
                sqlx::query_as("select id, name from items where id = any($1)")
                    .bind(&wanted)
                    .fetch_all(connection)
            })
            .await?;
        let found: HashMap<i64, Vec<u8>> = rows.into_iter().collect();
        Ok(wanted
            .iter()
            .map(|id| found.get(id).map(|name| (*id, name.clone())))
            .collect())
    }
}
