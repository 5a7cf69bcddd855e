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
//! - a final position is published only once the synchronous standbys
//!   have it: under synchronous replication a commit becomes visible on
//!   the primary before a standby confirmed it when its backend's wait
//!   ends early (`pg_cancel_backend`, a terminated backend), and a failover
//!   then loses it; published, it would be a change that was never
//!   committed (C14). With the rows, in a later statement of the same
//!   round trip, the reader takes the primary's WAL insert position `L`:
//!   every transaction that may hold a position at or below `W` had ended,
//!   so its commit record lies before `L`. The rows are published once as
//!   many synchronous standbys as `synchronous_standby_names` asks for
//!   report `flush_lsn` at or past `L` (at once when the setting is empty);
//!   until then they stay pending, `L` with them (a later `L` would chase
//!   the writers). When `pg_stat_replication` hides its columns from this
//!   role, the rows are held, with a warning naming the grant;
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

use std::sync::atomic::{AtomicBool, Ordering};
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

/// The synchronous standbys' confirmation of the WAL position `$1` (the
/// primary's insert position now, when null): the setting
/// `synchronous_standby_names`, the position asked about, how many
/// synchronous standbys flushed past it, and how many walsenders this role
/// may not see the state of (without `pg_read_all_stats` every column but
/// the pid is null). The insert position, not the write one: an
/// asynchronous commit is visible before its record is written. (When it
/// falls just past a page header, the standbys reach it only with the next
/// WAL record: on a primary that writes nothing, a wait of up to the
/// bgwriter's 15 s standby snapshot.)
const CONFIRMED: &str = "select current_setting('synchronous_standby_names'), w.lsn::text, \
    count(*) filter (where r.sync_state in ('sync', 'quorum') and r.flush_lsn >= w.lsn), \
    count(*) filter (where r.pid is not null and r.state is null) \
    from (select coalesce($1::text::pg_lsn, pg_current_wal_insert_lsn()) as lsn) w \
    left join pg_stat_replication r on true \
    group by w.lsn";

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
/// server, or a promoted standby, is another); once `W` was found final,
/// the WAL position `L` the synchronous standbys must reach before the
/// changes up to `W` are published.
#[derive(Debug, Clone, Copy)]
struct Pending {
    last: u64,
    own_id: i64,
    server: i64,
    wal: Option<u64>,
}

/// The feed's reads, on the pool.
#[derive(Debug)]
pub(super) struct PostgresChanges {
    pool: Pool,
    /// Read at the last poll and not yet final.
    pending: Mutex<Option<Pending>>,
    /// How long [`Source::present`] waits for the running transactions.
    budget: Duration,
    /// Whether the missing `pg_read_all_stats` was logged already.
    told_hidden: AtomicBool,
}

impl PostgresChanges {
    pub(super) fn new(pool: Pool, budget: Duration) -> Self {
        Self {
            pool,
            pending: Mutex::new(None),
            budget,
            told_hidden: AtomicBool::new(false),
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
        wal: None,
    })
}

/// Whether the synchronous standbys have a WAL position ([`CONFIRMED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standbys {
    /// As many as `synchronous_standby_names` asks for flushed past it (or
    /// it names none).
    Confirmed,
    /// Not yet.
    Behind,
    /// Not enough seen past it, and this role cannot see them all.
    Hidden,
}

/// How many synchronous standbys must confirm a commit under
/// `synchronous_standby_names`: `n` in `FIRST n (…)`, `ANY n (…)` and
/// `n (…)`, else 1 (`*`, a list of names: the first one connected); 0 when
/// it names none. With `FIRST n` only the `n` chosen ones are `sync`, with
/// `ANY n` every listed one is `quorum`: `n` of them flushed is what a
/// commit waits for either way.
fn required(names: &str) -> usize {
    let names = names.trim();
    if names.is_empty() {
        return 0;
    }
    let lower = names.to_ascii_lowercase();
    let rest = ["first", "any"]
        .iter()
        .find_map(|method| lower.strip_prefix(method))
        .filter(|rest| rest.starts_with(char::is_whitespace))
        .map_or(lower.as_str(), str::trim_start);
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 && rest[digits..].trim_start().starts_with('(') {
        rest[..digits].parse().map_or(1, |n: usize| n.max(1))
    } else {
        1
    }
}

/// A `pg_lsn`'s text (`hi/lo`, hexadecimal) as a number.
fn lsn(text: &str) -> Result<u64, RepositoryError> {
    let parsed = text.split_once('/').and_then(|(hi, lo)| {
        Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
    });
    parsed.ok_or_else(|| RepositoryError::unavailable(format!("a WAL position {text:?}")))
}

fn lsn_text(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

/// What [`CONFIRMED`]'s row says: the position asked about, and whether
/// the standbys have it.
fn standbys(row: &Row) -> Result<(u64, Standbys), RepositoryError> {
    let names: String = column(row, 0)?;
    let wal: String = column(row, 1)?;
    let flushed: i64 = column(row, 2)?;
    let hidden: i64 = column(row, 3)?;
    let flushed = usize::try_from(flushed).unwrap_or_default();
    let state = if flushed >= required(&names) {
        Standbys::Confirmed
    } else if hidden > 0 {
        Standbys::Hidden
    } else {
        Standbys::Behind
    };
    Ok((lsn(&wal)?, state))
}

/// What [`rows`] found.
enum Rows {
    /// Every transaction that may hold a position at or below the pending
    /// one has ended (or not), then the changes and the floor, and the WAL
    /// position the standbys must reach (the pending one's, else the
    /// primary's now) with whether they have.
    Read(bool, Vec<Entry>, u64, (u64, Standbys)),
    /// The server answering is not the one the pending position was read
    /// on: it means nothing here.
    OtherServer,
}

/// Whether every transaction that may hold a position at or below
/// `pending.last` has ended, then the changes in `(after, pending.last]`
/// (at most `limit`) and the floor, then whether the synchronous standbys
/// have the pending WAL position (or the primary's insert position now):
/// three statements sent together, the rows read in a snapshot taken after
/// the check, the insert position after that. The rows are used only when
/// the check passed, on the server `pending` was read on.
async fn rows(
    lease: &mut Lease,
    after: u64,
    pending: Pending,
    limit: usize,
) -> Result<Rows, RepositoryError> {
    let ended = lease.prepared(ENDED).await?;
    let range = lease.prepared(RANGE).await?;
    let confirmed = lease.prepared(CONFIRMED).await?;
    let (after, upto) = (signed(after), signed(pending.last));
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let wal = pending.wal.map(lsn_text);
    let (ended, rows, confirmed) = lease
        .run(|client| async move {
            futures_util::future::try_join3(
                client.query_one(&ended, &[&pending.own_id]),
                client.query(&range, &[&after, &upto, &limit]),
                client.query_one(&confirmed, &[&wal]),
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
    Ok(Rows::Read(ended, entries, floor, standbys(&confirmed)?))
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
        let (ended, entries, floor, (wal, standbys)) =
            match rows(&mut lease, head, pending, limit).await? {
                Rows::Read(ended, entries, floor, confirmed) => (ended, entries, floor, confirmed),
                // Read on a server that is gone (a failover, a restart): the
                // next poll reads a new `W` on this one.
                Rows::OtherServer => return Ok((Vec::new(), head, 0)),
            };
        if !ended {
            *self.pending.lock() = Some(pending);
            return Ok((Vec::new(), head, floor));
        }
        // Every commit up to `W` is before `wal` (the pending one, else
        // read after the check that found them ended): it stays with `W`.
        let pending = Pending {
            wal: Some(wal),
            ..pending
        };
        match standbys {
            Standbys::Confirmed => {}
            Standbys::Behind => {
                *self.pending.lock() = Some(pending);
                return Ok((Vec::new(), head, floor));
            }
            // Held, not published after some delay: no delay makes a
            // change the standbys may not have committed (C14), and a
            // feed that stops, with a warning naming the grant, is found
            // and fixed, where one that publishes changes a failover may
            // take back is not.
            Standbys::Hidden => {
                if !self.told_hidden.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "the change feed waits for the synchronous standbys, and this role \
                         cannot see them in pg_stat_replication: nothing is published until \
                         it can (GRANT pg_monitor TO <role>)"
                    );
                }
                *self.pending.lock() = Some(pending);
                return Ok((Vec::new(), head, floor));
            }
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
                Rows::Read(true, ..) => return Ok(pending.last),
                Rows::Read(false, ..) => {}
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

#[cfg(test)]
mod tests {
    use super::{lsn, lsn_text, required};

    #[test]
    fn a_commit_waits_for_as_many_standbys_as_the_setting_asks_for() {
        assert_eq!(required(""), 0);
        assert_eq!(required("  "), 0);
        assert_eq!(required("*"), 1);
        assert_eq!(required("db2, db3"), 1);
        assert_eq!(required("FIRST 2 (db2, db3, db4)"), 2);
        assert_eq!(required("any 3 (db2, db3, db4)"), 3);
        assert_eq!(required("2 (db2, db3)"), 2);
        assert_eq!(required("first"), 1);
        assert_eq!(required("anyhost"), 1);
    }

    #[test]
    fn a_wal_position_reads_back_as_postgresql_writes_it() {
        assert_eq!(lsn("0/0").ok(), Some(0));
        assert_eq!(lsn("16/B374D848").ok(), Some(0x16_B374_D848));
        assert_eq!(lsn_text(0x16_B374_D848), "16/B374D848");
        assert!(lsn("B374D848").is_err());
    }
}
