//! The SQLite store's change feed (C14): the `changes` table the schema's
//! triggers fill in the same transaction as every write to items
//! (`migrations_sqlite/0003_changes.sql`), read by the durable feed's
//! poller, and pruned by the writer.
//!
//! Invariants:
//! - position order is commit order: one writer at a time holds the
//!   file's write lock, and positions are `AUTOINCREMENT` keys given under
//!   it, so every committed change is final as soon as a reader sees it,
//!   in every process on the file;
//! - a change and its write commit together (a trigger), so nothing
//!   rolled back ever appears;
//! - pruning takes the oldest rows past `CHANGES_RETENTION`, a few per
//!   batch, inside the writer's own transaction: it adds no commit and
//!   never waits for anything but the batch it rides in; the last position
//!   pruned is kept in `change_log`, so a cursor below it is known to be
//!   too old.

use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use items_domain::idempotency::unix_millis;
use items_domain::{Id, Item, ItemChange, RepositoryError};
use rusqlite::{Connection, Row};

use super::readers::{Readers, in_one_snapshot};
use crate::changes::durable::Source;
use crate::changes::follow::History;
use crate::changes::hub::Entry;
use crate::sql::rows::stored_name;

/// This store's origin, which its cursors name (`change_log`).
pub(super) fn origin(connection: &Connection) -> rusqlite::Result<String> {
    connection.query_row("select origin from change_log", [], |row| row.get(0))
}

/// The feed's reads, on the reader pool.
#[derive(Debug, Clone)]
pub(super) struct SqliteChanges {
    pub(super) readers: Readers,
}

const COLUMNS: &str = "select position, kind, item_id, name, at from changes";

/// `position, kind, item_id, name, at`.
fn entry(row: &Row<'_>) -> Result<Entry, RepositoryError> {
    let unavailable = RepositoryError::unavailable;
    let position: i64 = row.get(0).map_err(unavailable)?;
    let kind: String = row.get(1).map_err(unavailable)?;
    let id: i64 = row.get(2).map_err(unavailable)?;
    let at: i64 = row.get(4).map_err(unavailable)?;
    let item = |row: &Row<'_>| -> Result<Item, RepositoryError> {
        let bytes = row
            .get_ref(3)
            .and_then(|value| Ok(value.as_bytes()?))
            .map_err(unavailable)?;
        Ok(Item {
            id: Id::new(id),
            name: stored_name(id, bytes)?,
        })
    };
    let change = match kind.as_str() {
        "created" => ItemChange::Created(item(row)?),
        "replaced" => ItemChange::Replaced(item(row)?),
        "deleted" => ItemChange::Deleted(Id::new(id)),
        other => {
            return Err(RepositoryError::unavailable(format!(
                "change {position} is of an unknown kind {other:?}"
            )));
        }
    };
    Ok(Entry {
        position: u64::try_from(position).unwrap_or_default(),
        change,
        at: SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(at).unwrap_or_default()),
    })
}

/// Positions as SQLite stores them (signed; never negative here).
fn signed(position: u64) -> i64 {
    i64::try_from(position).unwrap_or(i64::MAX)
}

/// The changes in `(after, upto]`, at most `limit`, and the floor, in one
/// snapshot.
fn read_range(
    connection: &Connection,
    after: u64,
    upto: Option<u64>,
    limit: usize,
) -> Result<(Vec<Entry>, u64), RepositoryError> {
    in_one_snapshot(connection, || {
        let floor = floor(connection)?;
        let sql =
            format!("{COLUMNS} where position > ?1 and position <= ?2 order by position limit ?3");
        let mut statement = connection
            .prepare_cached(&sql)
            .map_err(RepositoryError::unavailable)?;
        let upto = upto.map_or(i64::MAX, signed);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let entries = super::rows::all(&mut statement, (signed(after), upto, limit), entry)?;
        Ok((entries, floor))
    })
}

fn floor(connection: &Connection) -> Result<u64, RepositoryError> {
    connection
        .prepare_cached("select pruned_through from change_log")
        .and_then(|mut statement| statement.query_row([], |row| row.get::<_, i64>(0)))
        .map(|floor| u64::try_from(floor).unwrap_or_default())
        .map_err(RepositoryError::unavailable)
}

/// The last position issued (`AUTOINCREMENT`'s counter: also when every
/// change was pruned).
fn issued(connection: &Connection) -> Result<u64, RepositoryError> {
    connection
        .prepare_cached(
            "select coalesce((select seq from sqlite_sequence where name = 'changes'), 0)",
        )
        .and_then(|mut statement| statement.query_row([], |row| row.get::<_, i64>(0)))
        .map(|issued| u64::try_from(issued).unwrap_or_default())
        .map_err(RepositoryError::unavailable)
}

#[async_trait]
impl History for SqliteChanges {
    async fn read(
        &self,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<(Vec<Entry>, u64), RepositoryError> {
        self.readers
            .read_here(|connection| read_range(connection, after, Some(upto), limit))
            .await
    }
}

#[async_trait]
impl Source for SqliteChanges {
    /// Every committed change is final: the one writer gave positions in
    /// commit order.
    async fn poll(
        &self,
        head: u64,
        limit: usize,
    ) -> Result<(Vec<Entry>, u64, u64), RepositoryError> {
        let (entries, floor) = self
            .readers
            .read_here(|connection| read_range(connection, head, None, limit))
            .await?;
        let new_head = entries.last().map_or(head, |last| last.position);
        Ok((entries, new_head, floor))
    }

    async fn present(&self) -> Result<u64, RepositoryError> {
        self.readers.read_here(issued).await
    }

    async fn bounds(&self) -> Result<(u64, u64), RepositoryError> {
        self.readers
            .read_here(|connection| {
                in_one_snapshot(connection, || Ok((floor(connection)?, issued(connection)?)))
            })
            .await
    }
}

/// The writer's pruning of changes past the retention.
#[derive(Debug)]
pub(super) struct Pruner {
    retention: Duration,
    /// When to look again: at once while the last look found a full
    /// share, else a second later (so an idle store is not asked each
    /// batch).
    next: Instant,
}

/// Rows one batch prunes at most, beyond twice its own writes: enough to
/// catch up with any write rate the writer sustains.
const PRUNE_EXTRA: usize = 64;

impl Pruner {
    pub(super) fn new(retention: Duration) -> Self {
        Self {
            retention,
            next: Instant::now(),
        }
    }

    /// Inside the batch's transaction, deletes the oldest changes past the
    /// retention, at most twice `writes` and [`PRUNE_EXTRA`] more. A
    /// failure is logged and leaves the batch alone: pruning waits for a
    /// later batch.
    pub(super) fn prune(&mut self, connection: &Connection, writes: usize) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        let limit = writes * 2 + PRUNE_EXTRA;
        match prune_oldest(connection, self.retention, limit) {
            Ok(pruned) if pruned == limit => self.next = now,
            Ok(_) => self.next = now + Duration::from_secs(1),
            Err(error) => {
                tracing::warn!(%error, "old changes could not be pruned; a later batch will");
                self.next = now + Duration::from_secs(1);
            }
        }
    }
}

/// Deletes up to `limit` of the oldest changes recorded before
/// `retention` ago, and records the last position deleted; how many.
/// Only the `limit` oldest rows are looked at: positions and times grow
/// together, so when they are not expired, none after them is.
fn prune_oldest(
    connection: &Connection,
    retention: Duration,
    limit: usize,
) -> rusqlite::Result<usize> {
    let cutoff = unix_millis(SystemTime::now()).saturating_sub(retention.as_millis() as i64);
    let deleted: Vec<i64> = connection
        .prepare_cached(
            "delete from changes where position in \
             (select position from changes order by position limit ?1) and at < ?2 \
             returning position",
        )?
        .query_map((i64::try_from(limit).unwrap_or(i64::MAX), cutoff), |row| {
            row.get(0)
        })?
        .collect::<rusqlite::Result<_>>()?;
    if let Some(last) = deleted.iter().max() {
        connection
            .prepare_cached("update change_log set pruned_through = max(pruned_through, ?1)")?
            .execute([last])?;
    }
    Ok(deleted.len())
}

/// Forgets every change (a copy's destination starts with an empty feed,
/// C12): the positions given so far become the floor, so none is handed
/// out again and every older cursor is unknown.
pub(super) fn forget_all(connection: &Connection) -> rusqlite::Result<()> {
    connection.execute_batch(
        "delete from changes;
         update change_log set pruned_through =
             coalesce((select seq from sqlite_sequence where name = 'changes'), 0);",
    )
}

/// Gives the store a new origin, so no cursor of the old one is known
/// (a backup: its history ends where the copy was taken, and cursors
/// from after it would name changes it never had).
pub(super) fn new_origin(connection: &Connection) -> rusqlite::Result<()> {
    connection.execute_batch("update change_log set origin = lower(hex(randomblob(8)));")
}
