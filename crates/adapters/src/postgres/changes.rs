//! The PostgreSQL store's change feed (C14): the `changes` table the
//! schema's statement triggers fill in each writing transaction
//! (`migrations/0005_changes.sql`), read by the durable feed's poller in
//! commit order, and pruned past the retention by a task of each instance.
//!
//! Invariants:
//! - a position is published only once it is final: no transaction that
//!   may still commit a lower one is running. The reader reads the
//!   sequence's last value `W`, then takes a transaction id `N` of its own
//!   (a later statement): a transaction holds a position only after its
//!   writes gave it an id, so every transaction holding a position at or
//!   below `W` has an id below `N`. Once no backend of this database runs
//!   a transaction with an id below `N` (`pg_stat_activity`, read in a
//!   statement before the one that reads the rows, so that one's snapshot
//!   sees each of them ended), every change at or below `W` that will ever
//!   exist is visible. Position order is then an order the transactions
//!   could have committed in, and for any one item exactly its commit
//!   order: a write that waited for another's row lock takes its position
//!   after that one committed. (Why not the snapshot's list of running
//!   transactions: a snapshot lists only those below its `xmax`, the last
//!   *completed* id plus one, and may be reused; a transaction that took
//!   its id after that is running, and not listed. Measured: positions
//!   skipped within seconds under sequential writes.)
//! - what the reader learned of one server is used on that server only:
//!   `W` and `N` are read with the server's identity (its postmaster's
//!   start time), and a position found pending on a server that is no
//!   longer the one answering is forgotten, and read again. A promoted
//!   standby hands out again the positions the lost primary took after
//!   the last sequence record that reached it (PostgreSQL logs a sequence
//!   32 values ahead), and its transaction ids are not the lost primary's:
//!   taken there, a `W` of the lost primary would be published as final
//!   before the new primary commits under it, and that change skipped;
//! - nothing here slows a writer: the triggers add one `insert` to each
//!   writing statement, no lock is shared between writers, and the
//!   waiting is the reader's. The reader's transaction id is never written
//!   to disk (it writes no WAL, so its commit is not flushed);
//! - pruning deletes the oldest rows past the retention, a bounded number
//!   at a time, skipping rows another instance is pruning; it never waits
//!   for a writer, nor a writer for it (writers only append), and it keeps
//!   the last position pruned in `change_log`.
//!
//! Transactions of other roles whose `pg_stat_activity` rows this role
//! cannot read, and prepared (two-phase) transactions, are not waited for:
//! the service writes under one role and prepares none.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use items_domain::{Id, Item, ItemChange, RepositoryError};
use parking_lot::Mutex;
use tokio_postgres::Row;

use super::decode::column;
use super::pool::{Lease, Pool, lease};
use crate::changes::durable::Source;
use crate::changes::follow::History;
use crate::changes::hub::Entry;
use crate::report::ErrorChain;
use crate::sql::rows::stored_name;

/// The database's origin, which its cursors name.
pub(super) const ORIGIN: &str = "select origin from change_log";

/// The last position a transaction took (committed or not).
const LAST: &str = "select coalesce(pg_sequence_last_value(pg_get_serial_sequence('changes', \
                    'position')::regclass), 0)::bigint";

/// A transaction id of the reader's own, taken after [`LAST`] was read,
/// and the server's identity ([`SERVER`]).
const OWN_ID: &str = "select pg_current_xact_id()::text::bigint, \
    (extract(epoch from pg_postmaster_start_time()) * 1000000)::bigint";

/// Whether no backend of this database runs a transaction whose id
/// precedes `$1` (compared as PostgreSQL compares 32-bit ids: by age), and
/// the server's identity ([`SERVER`]).
const ENDED: &str = "select not exists (select 1 from pg_stat_activity \
    where datname = current_database() and backend_xid is not null \
    and age(backend_xid) > age((($1::bigint) % 4294967296)::text::xid)), \
    (extract(epoch from pg_postmaster_start_time()) * 1000000)::bigint";

/// The changes in `($1, $2]`, at most `$3`, with the floor: always one row
/// at least (the changes' columns null when there are none).
const RANGE: &str = "select log.pruned_through, c.position, c.kind, c.item_id, c.name, \
           (extract(epoch from c.at) * 1000)::bigint \
    from change_log log \
    left join lateral ( \
        select position, kind, item_id, name, at from changes \
        where position > $1 and position <= $2 \
        order by position limit $3) c on true";

/// The floor and the last position issued.
const BOUNDS: &str = "select pruned_through, coalesce(pg_sequence_last_value(\
                      pg_get_serial_sequence('changes', 'position')::regclass), 0)::bigint \
                      from change_log";

/// Deletes up to `$2` of the oldest changes recorded more than `$1`
/// seconds ago, skipping rows another instance is deleting, and records
/// the last position deleted; how many.
const PRUNE: &str = "with gone as ( \
        delete from changes where position in ( \
            select position from changes order by position limit $2 for update skip locked) \
        and at < now() - make_interval(secs => $1) \
        returning position) \
    update change_log set pruned_through = greatest(pruned_through, \
        (select max(position) from gone)) \
    where exists (select 1 from gone) \
    returning (select count(*) from gone)";

/// Forgets every change: a copy's destination starts with an empty feed.
pub(super) const FORGET_ALL: &str = "with gone as (delete from changes returning position) \
    update change_log set pruned_through = greatest(pruned_through, \
        coalesce(pg_sequence_last_value(pg_get_serial_sequence('changes', 'position')::regclass), \
        0))";

/// A position the reader read, not yet final: the sequence's last value
/// `W`, and the reader's transaction id `N`, taken after it, on the server
/// `server` (the start of its postmaster, in microseconds: a restarted
/// server, or a promoted standby, is another).
#[derive(Debug, Clone, Copy)]
struct Pending {
    last: u64,
    own_id: i64,
    server: i64,
}

/// The feed's reads, on the pool.
#[derive(Debug)]
pub(super) struct PostgresChanges {
    pool: Pool,
    /// Read at the last poll and not yet final.
    pending: Mutex<Option<Pending>>,
    /// How long [`Source::present`] waits for the running transactions.
    budget: Duration,
}

impl PostgresChanges {
    pub(super) fn new(pool: Pool, budget: Duration) -> Self {
        Self {
            pool,
            pending: Mutex::new(None),
            budget,
        }
    }
}

/// `W`, then `N`: two statements sent together, run in that order.
async fn horizon(lease: &mut Lease) -> Result<Pending, RepositoryError> {
    let last = lease.prepared(LAST).await?;
    let own_id = lease.prepared(OWN_ID).await?;
    let (last, own_id) = lease
        .run(|client| async move {
            futures_util::future::try_join(
                client.query_one(&last, &[]),
                client.query_one(&own_id, &[]),
            )
            .await
        })
        .await?;
    Ok(Pending {
        last: unsigned(column(&last, 0)?),
        own_id: column(&own_id, 0)?,
        server: column(&own_id, 1)?,
    })
}

/// What [`rows`] found.
enum Rows {
    /// Every transaction that may hold a position at or below the pending
    /// one has ended (or not), then the changes and the floor.
    Read(bool, Vec<Entry>, u64),
    /// The server answering is not the one the pending position was read
    /// on: it means nothing here.
    OtherServer,
}

/// Whether every transaction that may hold a position at or below
/// `pending.last` has ended, then the changes in `(after, pending.last]`
/// (at most `limit`) and the floor: two statements sent together, the
/// rows read in a snapshot taken after the check. The rows are used only
/// when the check passed, on the server `pending` was read on.
async fn rows(
    lease: &mut Lease,
    after: u64,
    pending: Pending,
    limit: usize,
) -> Result<Rows, RepositoryError> {
    let ended = lease.prepared(ENDED).await?;
    let range = lease.prepared(RANGE).await?;
    let (after, upto) = (signed(after), signed(pending.last));
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let (ended, rows) = lease
        .run(|client| async move {
            futures_util::future::try_join(
                client.query_one(&ended, &[&pending.own_id]),
                client.query(&range, &[&after, &upto, &limit]),
            )
            .await
        })
        .await?;
    let server: i64 = column(&ended, 1)?;
    if server != pending.server {
        return Ok(Rows::OtherServer);
    }
    let ended: bool = column(&ended, 0)?;
    let (entries, floor) = range_rows(&rows)?;
    Ok(Rows::Read(ended, entries, floor))
}

/// The changes and the floor of [`RANGE`]'s rows.
fn range_rows(rows: &[Row]) -> Result<(Vec<Entry>, u64), RepositoryError> {
    let Some(first) = rows.first() else {
        return Err(RepositoryError::unavailable("the change log has no row"));
    };
    let floor = unsigned(column(first, 0)?);
    let mut entries = Vec::with_capacity(rows.len());
    for row in rows {
        if let Some(entry) = entry(row)? {
            entries.push(entry);
        }
    }
    Ok((entries, floor))
}

/// The change of a [`RANGE`] row, when it has one.
fn entry(row: &Row) -> Result<Option<Entry>, RepositoryError> {
    let Some(position) = column::<Option<i64>>(row, 1)? else {
        return Ok(None);
    };
    let kind: String = column(row, 2)?;
    let id: i64 = column(row, 3)?;
    let at: i64 = column(row, 5)?;
    let item = || -> Result<Item, RepositoryError> {
        let name: Vec<u8> = column(row, 4)?;
        Ok(Item {
            id: Id::new(id),
            name: stored_name(id, &name)?,
        })
    };
    let change = match kind.as_str() {
        "created" => ItemChange::Created(item()?),
        "replaced" => ItemChange::Replaced(item()?),
        "deleted" => ItemChange::Deleted(Id::new(id)),
        other => {
            return Err(RepositoryError::unavailable(format!(
                "change {position} is of an unknown kind {other:?}"
            )));
        }
    };
    Ok(Some(Entry {
        position: unsigned(position),
        change,
        at: SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(at).unwrap_or_default()),
    }))
}

fn signed(position: u64) -> i64 {
    i64::try_from(position).unwrap_or(i64::MAX)
}

fn unsigned(position: i64) -> u64 {
    u64::try_from(position).unwrap_or_default()
}

#[async_trait]
impl History for PostgresChanges {
    /// Only below a head the poller found final: no waiting here.
    async fn read(
        &self,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<(Vec<Entry>, u64), RepositoryError> {
        let mut lease = lease(&self.pool).await?;
        let (after, upto) = (signed(after), signed(upto));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = lease.query(RANGE, &[&after, &upto, &limit]).await?;
        range_rows(&rows)
    }
}

#[async_trait]
impl Source for PostgresChanges {
    /// Reads a new `W` when none is pending, then the changes up to it
    /// once it is final (at once, when the transactions that may hold a
    /// position below it have ended by now; else at a later poll).
    async fn poll(
        &self,
        head: u64,
        limit: usize,
    ) -> Result<(Vec<Entry>, u64, u64), RepositoryError> {
        let mut lease = lease(&self.pool).await?;
        let pending = self.pending.lock().take();
        let pending = match pending {
            Some(pending) => pending,
            None => horizon(&mut lease).await?,
        };
        if pending.last <= head {
            return Ok((Vec::new(), head, 0));
        }
        let (ended, entries, floor) = match rows(&mut lease, head, pending, limit).await? {
            Rows::Read(ended, entries, floor) => (ended, entries, floor),
            // Read on a server that is gone (a failover, a restart): the
            // next poll reads a new `W` on this one.
            Rows::OtherServer => return Ok((Vec::new(), head, 0)),
        };
        if !ended {
            *self.pending.lock() = Some(pending);
            return Ok((Vec::new(), head, floor));
        }
        let new_head = match entries.last() {
            // More to read below `W`, which is final now.
            Some(last) if entries.len() == limit => {
                *self.pending.lock() = Some(pending);
                last.position
            }
            _ => pending.last,
        };
        Ok((entries, new_head, floor))
    }

    /// `W` now, once the transactions that may hold a position below it
    /// have ended (a few milliseconds, normally; at most the budget).
    async fn present(&self) -> Result<u64, RepositoryError> {
        let mut lease = lease(&self.pool).await?;
        let pending = horizon(&mut lease).await?;
        let deadline = tokio::time::Instant::now() + self.budget;
        loop {
            match rows(&mut lease, pending.last, pending, 0).await? {
                Rows::Read(true, _, _) => return Ok(pending.last),
                Rows::Read(false, _, _) => {}
                Rows::OtherServer => {
                    return Err(RepositoryError::unavailable(
                        "the database server changed while a subscription started",
                    ));
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(RepositoryError::unavailable(
                    "transactions running at the start of a subscription did not end in time",
                ));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
            lease.renew();
        }
    }

    async fn bounds(&self) -> Result<(u64, u64), RepositoryError> {
        let mut lease = lease(&self.pool).await?;
        let row = lease.query_one(BOUNDS, &[]).await?;
        Ok((unsigned(column(&row, 0)?), unsigned(column(&row, 1)?)))
    }
}

/// Rows one pruning statement deletes at most.
const PRUNE_BATCH: i64 = 10_000;

/// Prunes the changes past `retention` every `every`, until aborted (the
/// store's [`PrunerTask`] is dropped); a failure is logged and retried at
/// the next turn.
pub(super) async fn prune(pool: Pool, retention: Duration, every: Duration) {
    let retention = retention.as_secs_f64();
    loop {
        tokio::time::sleep(every).await;
        loop {
            match prune_once(&pool, retention).await {
                Ok(pruned) if pruned == PRUNE_BATCH => continue,
                Ok(_) => break,
                Err(error) => {
                    tracing::warn!(error = %ErrorChain(&error), "old changes could not be pruned; retrying later");
                    break;
                }
            }
        }
    }
}

async fn prune_once(pool: &Pool, retention: f64) -> Result<i64, RepositoryError> {
    let mut lease = lease(pool).await?;
    let row = lease.query_opt(PRUNE, &[&retention, &PRUNE_BATCH]).await?;
    row.map_or(Ok(0), |row| column(&row, 0))
}

/// The pruning task of a store, ended when the last clone of the store is
/// dropped (or the store closed).
#[derive(Debug)]
pub(super) struct PrunerTask(pub(super) tokio::task::AbortHandle);

impl Drop for PrunerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
