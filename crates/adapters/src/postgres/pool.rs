//! The connections the repositories share, and how one is lent for a unit
//! of work.
//!
//! Invariants:
//! - a connection goes back as it is, without a round trip, unless a
//!   transaction may still be open on it (its work was abandoned or
//!   failed between `begin` and `commit`): that one is rolled back, with
//!   one round trip, before it is lent again, or closed when that fails.
//!   The driver reads every reply for itself, so a query abandoned
//!   half-way leaves nothing for the next one to read;
//! - each lease carries the operation's deadline (`budget.rs`): the work on
//!   it must end by then, and a connection whose work was cut by the
//!   deadline is closed instead of going back;
//! - a connection whose server refused a write as read-only (SQLSTATE
//!   25006: a primary turned standby, or made read-only) is closed, never
//!   lent again, and so are the idle ones to the same host: the next
//!   connection goes through the host selection (`hosts`) again;
//! - fencing: a connection opened on a primary whose timeline is older
//!   than one written on since (`hosts`) is never lent again, and a
//!   transaction on one is never committed: it is closed, rolled back, and
//!   the write answered 503;
//! - a commit answered with a warning is not acknowledged: PostgreSQL
//!   warns when it ends a commit's wait for a synchronous standby
//!   (cancelled, or the backend terminated), the transaction committed on
//!   the primary alone (C12: 504, `fate.rs`);
//! - new connections are opened by the host selection of `hosts`, which
//!   says which server each one is on, so a transaction's fate is asked
//!   of that same server (`fate.rs`);
//! - each connection prepares a statement once and keeps it: a query
//!   after the first is one round trip (bind and execute), and the server
//!   plans it from its cache.
//!
//! Why deadpool's managed pool with a manager of our own rather than
//! deadpool-postgres: its recycling either trusts a connection that may
//! still hold an open transaction or sends a query every time one comes
//! back (client CPU per query 40–48 → 18–23 µs without that round trip,
//! docs/performance.md "The PostgreSQL store, measured").

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool::managed::{
    self, Metrics, Object, PoolError, RecycleError, RecycleResult, TimeoutType, Timeouts,
};
use items_domain::RepositoryError;
use tokio::time::Instant;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, SimpleQueryMessage, Statement};

use super::fate::{self, LostAnswer, Transaction};
use super::hosts::{Hosts, Server, ServerState};
use super::link::{Link, OpenError};
use super::positions::{self, Latest};
use crate::sql::budget::over_budget;

/// Why a connection on a fenced host is closed.
const FENCED: &str = "its server is a primary on a timeline older than one written on";

/// How long a request waits for a pooled connection (free, newly opened or
/// tidied) before it is answered 503; also the bound on each connection
/// attempt at start. The common default of 30 s is far too long for a client to
/// wait to learn that the database is down.
pub(super) const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// The pool: at most `DATABASE_POOL_SIZE` connections, opened on demand.
pub(super) type Pool = managed::Pool<Manager>;

/// Parameters of a statement, as the driver takes them.
pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// Opens connections to the store's hosts, and rolls back the ones that
/// come back with a transaction open.
#[derive(Debug)]
pub(super) struct Manager {
    /// The servers of the URL and which one a new connection goes to.
    pub(super) hosts: Arc<Hosts>,
    /// The budget of one store operation (`DATABASE_STATEMENT_TIMEOUT_MS`).
    pub(super) budget: Duration,
    /// The latest position a commit was seen at (C13: writes' tokens).
    pub(super) latest: Arc<Latest>,
}

/// A connection, and what its last work may have left on it.
#[derive(Debug)]
pub(super) struct Connection {
    link: Link,
    /// A transaction was begun on it and not (yet) committed.
    in_transaction: bool,
    /// Why its server can no longer take this store's writes (it refused
    /// one as read-only, lost the attribute, or is fenced): closed, never
    /// lent again, and the idle ones to its host with it.
    refused: Option<&'static str>,
    /// The server it is on.
    server: Server,
    /// The statements it prepared, by their SQL.
    statements: HashMap<&'static str, Statement>,
}

impl managed::Manager for Manager {
    type Type = Connection;
    type Error = OpenError;

    /// A connection to the first host that fits (`hosts`), the wait for
    /// it shared among the hosts. The selection gets nine tenths of the
    /// lease's wait, so its own failure, naming every host, ends the wait
    /// rather than the lease's bare timeout.
    async fn create(&self) -> Result<Connection, OpenError> {
        let wait = ACQUIRE_TIMEOUT.min(self.budget);
        let opened = self.hosts.connect(wait - wait / 10).await?;
        Ok(Connection {
            link: opened.link,
            in_transaction: false,
            refused: None,
            server: opened.server,
            statements: HashMap::new(),
        })
    }

    /// Free unless a transaction may be open on it: then `rollback`, and a
    /// connection that cannot do that is closed. A broken one is closed,
    /// and so is one on a primary older than a timeline written on since
    /// (its host is fenced).
    async fn recycle(&self, connection: &mut Connection, _: &Metrics) -> RecycleResult<OpenError> {
        if let Some(why) = connection.refused {
            return Err(RecycleError::message(why));
        }
        if self.hosts.is_behind(&connection.server) {
            if let Some(timeline) = connection.server.timeline {
                self.hosts.fence(connection.server.host, timeline);
            }
            return Err(RecycleError::message(FENCED));
        }
        if connection.link.is_closed() {
            return Err(RecycleError::message("the connection is closed"));
        }
        if connection.in_transaction {
            connection
                .link
                .batch_execute("rollback")
                .await
                .map_err(|error| RecycleError::Backend(error.into()))?;
            connection.in_transaction = false;
        }
        Ok(())
    }
}

/// A connection lent by the pool for one store operation, and the
/// operation's deadline; it goes back when dropped, unless the deadline cut
/// its work short.
#[derive(Debug)]
pub(super) struct Lease {
    /// `None` only while being dropped.
    connection: Option<Object<Manager>>,
    budget: Duration,
    deadline: Instant,
    /// Work on it was cut by the deadline: the connection is closed. Atomic
    /// so the batches pipelined on a shared lease ([`Lease::run_shared`])
    /// can each mark it.
    expired: AtomicBool,
    /// The write transaction open on it ([`Lease::begin_write`]), for
    /// learning its fate if its commit's answer is lost (`fate.rs`).
    transaction: Option<Transaction>,
}

/// A connection from `pool` for one store operation, which must end within
/// the pool's budget from now. The wait for a connection (free or newly
/// opened) counts against the budget and is cut at [`ACQUIRE_TIMEOUT`] if
/// the budget is longer, so a database that is down is reported as fast
/// with a long budget as with a short one.
pub(super) async fn lease(pool: &Pool) -> Result<Lease, RepositoryError> {
    lease_from(pool, pool.get())
        .await?
        .map_err(RepositoryError::unavailable)
}

/// A connection from `pool` if one is free now (idle, or not yet opened),
/// else `None` at once: the coalesced operations queue only when every
/// connection is busy. The pool's waiters are served first (tokio's
/// semaphore hands a returned connection to the longest waiter), so this
/// never overtakes a queued batch. The lease's deadline is the budget from
/// now, as for [`lease`].
pub(super) async fn try_lease(pool: &Pool) -> Result<Option<Lease>, RepositoryError> {
    const NOW: Timeouts = Timeouts {
        wait: Some(Duration::ZERO),
        create: None,
        recycle: None,
    };
    match lease_from(pool, pool.timeout_get(&NOW)).await? {
        Ok(lease) => Ok(Some(lease)),
        Err(PoolError::Timeout(TimeoutType::Wait)) => Ok(None),
        Err(error) => Err(RepositoryError::unavailable(error)),
    }
}

/// The lease of the connection `get` gives, its deadline the budget from
/// now; waiting (opening a connection included) counts against the budget
/// and is cut at [`ACQUIRE_TIMEOUT`]. The pool's own error is the caller's
/// to judge ([`try_lease`] takes "none free" for an answer).
async fn lease_from(
    pool: &Pool,
    get: impl Future<Output = Result<Object<Manager>, PoolError<OpenError>>>,
) -> Result<Result<Lease, PoolError<OpenError>>, RepositoryError> {
    let budget = pool.manager().budget;
    let deadline = Instant::now() + budget;
    let wait = ACQUIRE_TIMEOUT.min(budget);
    match tokio::time::timeout(wait, get).await {
        Ok(Ok(connection)) => Ok(Ok(Lease {
            connection: Some(connection),
            budget,
            deadline,
            expired: AtomicBool::new(false),
            transaction: None,
        })),
        Ok(Err(error)) => Ok(Err(error)),
        Err(_) if wait == budget => Err(over_budget(budget)),
        Err(_) => Err(RepositoryError::unavailable(OpenError::TimedOut(wait))),
    }
}

impl Lease {
    /// Runs `work` (one or more statements, pipelined when it sends them
    /// together) on the connection, if it ends before the operation's
    /// deadline; work the deadline cut leaves a connection that is closed.
    pub(super) async fn run<'c, T, F>(
        &'c mut self,
        work: impl FnOnce(&'c Client) -> F,
    ) -> Result<T, RepositoryError>
    where
        F: Future<Output = Result<T, tokio_postgres::Error>> + 'c,
    {
        let Self {
            connection,
            budget,
            deadline,
            expired,
            ..
        } = self;
        // `timeout_at` polls the work once even after the deadline, which
        // would send it (a `commit`, say): nothing is sent once it passed.
        if expired.load(Ordering::Relaxed) || Instant::now() >= *deadline {
            return Err(over_budget(*budget));
        }
        let Some(connection) = connection.as_mut() else {
            return Err(RepositoryError::unavailable("the connection was closed"));
        };
        let Connection { link, refused, .. } = &mut **connection;
        match tokio::time::timeout_at(*deadline, work(link)).await {
            Ok(Err(error)) if is_read_only(&error) => {
                // Closed when the lease drops, with the idle ones to its host.
                *refused = Some("its server refused a write as read-only");
                Err(RepositoryError::unavailable(error))
            }
            Ok(result) => result.map_err(RepositoryError::unavailable),
            Err(_) => {
                expired.store(true, Ordering::Relaxed);
                Err(over_budget(*budget))
            }
        }
    }

    /// Runs `work` on a connection shared by read batches pipelined on it
    /// (`coalesce`): each sends its statement without waiting for the
    /// replies of those before it, and must end by its own `deadline`.
    /// Work the deadline cut marks the connection, which is closed once the
    /// last batch on it lets it go. Only statements prepared while the
    /// lease was not shared are used ([`Lease::prepared_already`]).
    pub(super) async fn run_shared<'c, T, F>(
        &'c self,
        deadline: Instant,
        work: impl FnOnce(&'c Client) -> F,
    ) -> Result<T, RepositoryError>
    where
        F: Future<Output = Result<T, tokio_postgres::Error>> + 'c,
    {
        if self.is_cut() || Instant::now() >= deadline {
            return Err(over_budget(self.budget));
        }
        let Some(connection) = self.connection.as_ref() else {
            return Err(RepositoryError::unavailable("the connection was closed"));
        };
        match tokio::time::timeout_at(deadline, work(&connection.link)).await {
            Ok(result) => result.map_err(RepositoryError::unavailable),
            Err(_) => {
                self.expired.store(true, Ordering::Relaxed);
                Err(over_budget(self.budget))
            }
        }
    }

    /// Whether work on the connection was cut by a deadline: it is closed
    /// when the lease goes, and nothing more is sent on it.
    pub(super) fn is_cut(&self) -> bool {
        self.expired.load(Ordering::Relaxed)
    }

    /// The statement for `sql` if the connection prepared it already.
    pub(super) fn prepared_already(&self, sql: &str) -> Option<Statement> {
        self.connection
            .as_ref()
            .and_then(|connection| connection.statements.get(sql).cloned())
    }

    /// The connection's statement for `sql`, prepared on first use.
    pub(super) async fn prepared(
        &mut self,
        sql: &'static str,
    ) -> Result<Statement, RepositoryError> {
        if let Some(statement) = self
            .connection
            .as_ref()
            .and_then(|connection| connection.statements.get(sql))
        {
            return Ok(statement.clone());
        }
        let statement = self.run(|client| client.prepare(sql)).await?;
        if let Some(connection) = self.connection.as_mut() {
            connection.statements.insert(sql, statement.clone());
        }
        Ok(statement)
    }

    /// The rows of `sql` with `params`.
    pub(super) async fn query(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, RepositoryError> {
        let statement = self.prepared(sql).await?;
        self.run(|client| async move { client.query(&statement, params).await })
            .await
    }

    /// The row of `sql` with `params`, if any (at most one is read).
    pub(super) async fn query_opt(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> Result<Option<Row>, RepositoryError> {
        let statement = self.prepared(sql).await?;
        self.run(|client| async move { client.query_opt(&statement, params).await })
            .await
    }

    /// The one row of `sql` with `params`.
    pub(super) async fn query_one(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> Result<Row, RepositoryError> {
        let statement = self.prepared(sql).await?;
        self.run(|client| async move { client.query_one(&statement, params).await })
            .await
    }

    /// The rows `sql` changed.
    pub(super) async fn execute(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> Result<u64, RepositoryError> {
        let statement = self.prepared(sql).await?;
        self.run(|client| async move { client.execute(&statement, params).await })
            .await
    }

    /// Gives the operation a whole budget again from now: for a listing,
    /// whose every batch is an operation of its own, and for a coalesced
    /// batch, whose lease was taken before the batch was known.
    pub(super) fn renew(&mut self) {
        self.deadline = Instant::now() + self.budget;
    }

    /// Brings the deadline in to `deadline` when that is earlier: a
    /// coalesced batch must end by its earliest caller's deadline
    /// (`coalesce`).
    pub(super) fn limit(&mut self, deadline: Instant) {
        self.deadline = self.deadline.min(deadline);
    }

    /// Opens a transaction with `statement` (`begin …`); it stays open
    /// across [`Lease::run`]s until [`Lease::commit`], and is rolled back
    /// if the lease goes back to the pool first (or, the connection closed,
    /// by the server). For reads; a transaction that writes begins with
    /// [`Lease::begin_write`].
    pub(super) async fn begin(&mut self, statement: &'static str) -> Result<(), RepositoryError> {
        self.opening()?;
        self.run(|client| client.batch_execute(statement)).await
    }

    /// Opens a transaction that writes, as [`Lease::begin`] does, and takes
    /// its id and backend in the same round trip, so that its fate can be
    /// learned if its commit's answer is lost (`fate.rs`).
    pub(super) async fn begin_write(&mut self) -> Result<(), RepositoryError> {
        self.opening()?;
        // The statement the commit's position is read with (C13) is
        // prepared once per connection, in the round trip of its first
        // `begin`: a prepared statement is not planned again at each commit.
        let flushed = self.prepared_already(positions::FLUSHED);
        let (messages, flushed) = self
            .run(|client| async move {
                let flushed = async {
                    match flushed {
                        Some(statement) => Ok(statement),
                        None => client.prepare(positions::FLUSHED).await,
                    }
                };
                futures_util::future::try_join(client.simple_query(fate::BEGIN_WRITE), flushed)
                    .await
            })
            .await?;
        if let Some(connection) = self.connection.as_mut() {
            connection.statements.insert(positions::FLUSHED, flushed);
        }
        let server = self
            .connection
            .as_ref()
            .map(|connection| connection.server.clone());
        let transaction = messages
            .iter()
            .find_map(|message| match message {
                SimpleQueryMessage::Row(row) => Some(row),
                _ => None,
            })
            .and_then(|row| {
                Some(Transaction {
                    id: row.get(0)?.to_owned(),
                    backend: row.get(1)?.parse().ok()?,
                    server,
                })
            })
            .ok_or_else(|| RepositoryError::unavailable("`begin` gave no transaction id"))?;
        self.transaction = Some(transaction);
        Ok(())
    }

    /// Marks the connection as in a transaction about to open; past the
    /// deadline nothing is sent, so there is no transaction to roll back.
    fn opening(&mut self) -> Result<(), RepositoryError> {
        if self.is_cut() || Instant::now() >= self.deadline {
            return Err(over_budget(self.budget));
        }
        if let Some(connection) = self.connection.as_mut() {
            connection.in_transaction = true;
        }
        Ok(())
    }

    /// Commits, unless the deadline passed or the connection's server is
    /// fenced: a write answered 503 is then rolled back, never committed
    /// afterwards (`sql/budget.rs`). Once sent, the commit's answer is
    /// awaited past the deadline by [`fate::grace`]; an answer with a
    /// warning is `OutcomeUnknown` (a synchronous standby's confirmation
    /// given up); without an answer, the transaction's fate is learned from
    /// the server and answered by (C12, `fate.rs`): `Ok` if it committed,
    /// `Unavailable` if it was rolled back, `OutcomeUnknown` only if that
    /// cannot be learned (or, under synchronous replication, whether a
    /// standby has it).
    pub(super) async fn commit(&mut self) -> Result<(), RepositoryError> {
        if self.is_cut() || Instant::now() >= self.deadline {
            return Err(over_budget(self.budget));
        }
        let transaction = self.transaction.take();
        let Some(connection) = self.connection.as_mut() else {
            return Err(RepositoryError::unavailable("the connection was closed"));
        };
        if let Some(pool) = Object::pool(connection)
            && pool.manager().hosts.is_behind(&connection.server)
        {
            // Closed when the lease drops: the server rolls it back.
            connection.refused = Some(FENCED);
            return Err(RepositoryError::unavailable(format!(
                "not committed: {FENCED}"
            )));
        }
        let grace = fate::grace(self.budget);
        let sent = Instant::now();
        let warned = connection.link.warnings();
        // A write's commit is followed, pipelined (no round trip more), by
        // the position it committed at (C13); a read-only transaction's has
        // none to give. Two messages, not one: the commit's fate is its own
        // answer's alone, whatever becomes of the question after it.
        let link = &connection.link;
        let flushed = transaction
            .as_ref()
            .and_then(|_| connection.statements.get(positions::FLUSHED));
        let commit = async move {
            let Some(flushed) = flushed else {
                return link.batch_execute("commit").await.map(|()| None);
            };
            let (committed, position) = futures_util::future::join(
                link.batch_execute("commit"),
                link.query_one(flushed, &[]),
            )
            .await;
            committed.map(|()| position.ok().and_then(|row| positions::read(&row, 0).ok()))
        };
        let lost = match tokio::time::timeout_at(self.deadline + grace, commit).await {
            Ok(Ok(position)) => {
                connection.in_transaction = false;
                if let (Some(position), Some(pool)) = (position, Object::pool(connection)) {
                    pool.manager().latest.observe(position);
                }
                return match connection.link.warning_since(warned) {
                    Some(warning) => Err(fate::unconfirmed(warning)),
                    None => Ok(()),
                };
            }
            Ok(Err(error)) => LostAnswer::Failed(error),
            Err(_) => LostAnswer::Unanswered {
                waited: sent.elapsed(),
            },
        };
        // The connection is not trusted again: closed when the lease drops.
        self.expired.store(true, Ordering::Relaxed);
        let warning = connection.link.warning_since(warned);
        let hosts = Object::pool(connection).map(|pool| Arc::clone(&pool.manager().hosts));
        fate::learn(hosts, transaction, lost, warning, grace).await
    }

    /// Asks the connection's server whether it still has the attribute the
    /// URL asks for and is not fenced (the readiness ping, one round trip);
    /// one that lost it (a primary turned standby) is closed, as after a
    /// write refused as read-only. A server that cannot say what it is
    /// (one host, no attribute: `hosts`) answers `select 1` instead.
    pub(super) async fn confirm(&mut self) -> Result<(), RepositoryError> {
        let Some(pool) = self.connection.as_ref().and_then(Object::pool) else {
            return Err(RepositoryError::unavailable("the connection was closed"));
        };
        let hosts = Arc::clone(&pool.manager().hosts);
        let state = match self.run(ServerState::read).await {
            Err(RepositoryError::Unavailable(_)) if !hosts.asks() && !self.is_cut() => {
                return self.run(|client| client.batch_execute("select 1")).await;
            }
            state => state?,
        };
        let host = self.host().unwrap_or_default();
        let refusal = match hosts.fenced_on(&state) {
            Some(timeline) => {
                hosts.fence(host, timeline);
                format!("{} is fenced: {FENCED}", hosts.label(host))
            }
            None if state.fits(hosts.attrs()) => return Ok(()),
            None => format!(
                "{} no longer gives a {} session",
                hosts.label(host),
                hosts.attrs().name()
            ),
        };
        if let Some(connection) = self.connection.as_mut() {
            // Closed when the lease drops, with the idle ones to its host.
            connection.refused = Some("its server lost the attribute asked for, or is fenced");
        }
        Err(RepositoryError::unavailable(refusal))
    }

    /// The index of the host the connection is on.
    pub(super) fn host(&self) -> Option<usize> {
        self.connection
            .as_ref()
            .map(|connection| connection.server.host)
    }
}

/// Whether `error` is the server refusing a write as read-only
/// (`read_only_sql_transaction`: a standby, or a read-only primary).
fn is_read_only(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&SqlState::READ_ONLY_SQL_TRANSACTION)
}

/// Closes the idle connections to `host`, whose server can no longer take
/// this store's writes (`why`): each would fail its next write alike.
/// Those lent out are closed as their own writes fail.
fn forget_host(pool: &Pool, host: usize, why: &str) {
    let removed = pool
        .retain(|connection, _| connection.server.host != host)
        .removed;
    tracing::warn!(
        host = %pool.manager().hosts.label(host),
        idle_closed = removed.len(),
        why,
        "a database host can no longer take writes; its connections are closed"
    );
}

impl Drop for Lease {
    /// A connection the deadline cut may be stuck on a socket that answers
    /// nothing: taken out of the pool and dropped (its socket closed, which
    /// makes the server roll back any transaction open on it), so no later
    /// request waits on it. One whose server can no longer take writes
    /// (it refused one as read-only, lost the attribute, or is fenced) is
    /// dropped alike, and the idle connections to the same host with it
    /// (`recycle` also refuses it, should it ever come back).
    fn drop(&mut self) {
        let refused = self
            .connection
            .as_ref()
            .and_then(|connection| connection.refused);
        if let Some(why) = refused
            && let Some(connection) = self.connection.as_ref()
            && let Some(pool) = Object::pool(connection)
        {
            forget_host(&pool, connection.server.host, why);
        }
        if (self.is_cut() || refused.is_some())
            && let Some(connection) = self.connection.take()
        {
            drop(Object::take(connection));
        }
    }
}

/// Closes the connections not lent out, each with a proper goodbye; the
/// ones lent out are closed as they come back.
pub(super) async fn close(pool: &Pool) {
    let idle = pool.retain(|_, _| false).removed;
    pool.close();
    for connection in idle {
        // Closing is a courtesy to the server: a failure changes nothing.
        connection.link.close(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::{FutureExt, StreamExt};
    use items_domain::{self as items, Id, ItemRepository, Name};

    use crate::postgres::{PostgresSettings, PostgresStore, PostgresUrl};
    use items_testkit::postgres::{ScratchDatabase, test_database_url, test_server_address};

    fn url_of(database: &ScratchDatabase) -> PostgresUrl {
        PostgresUrl::parse(&database.url()).expect("a valid URL")
    }

    /// A store whose pool holds one connection, so every lease after the
    /// first gets the connection the one before it left behind.
    async fn one_connection() -> (PostgresStore, ScratchDatabase) {
        let database = ScratchDatabase::create(&test_database_url())
            .await
            .expect("a scratch database");
        let settings = PostgresSettings {
            pool_size: 1,
            ..PostgresSettings::default()
        };
        let store = PostgresStore::connect(&url_of(&database), settings, Duration::from_secs(5))
            .await
            .expect("connects and migrates");
        (store, database)
    }

    fn name(text: &str) -> Name {
        Name::parse(text).expect("a valid name")
    }

    #[tokio::test]
    async fn a_query_abandoned_before_its_reply_leaves_no_reply_for_the_next_c2() {
        let (store, database) = one_connection().await;
        let items = store.items();
        for text in ["first", "second"] {
            items.create(name(text)).await.expect("created");
        }

        // Polled once: the query is sent, its reply not yet read. On a busy
        // machine the reply can already be there at the first poll (in runs
        // since reads are coalesced, up to all of 20 tries), so the abandon
        // is tried 200 times; each next query must get its own reply either
        // way.
        let mut abandoned = 0;
        for _ in 0..200 {
            if items.get(Id::new(1)).now_or_never().is_none() {
                abandoned += 1;
            }
            let second = items.get(Id::new(2)).await.expect("answered");
            assert_eq!(second.map(|item| item.name), Some(name("second")));
        }

        assert!(
            abandoned > 0,
            "no query was ever abandoned before its reply"
        );
        store.close().await;
        database.drop().await;
    }

    #[tokio::test]
    async fn a_connection_the_deadline_cut_is_closed_not_lent_again_c12() {
        use items_testkit::tcp_proxy::TcpProxy;

        let database = ScratchDatabase::create(&test_database_url())
            .await
            .expect("a scratch database");
        let proxy = TcpProxy::start(test_server_address().await).await;
        let budget = Duration::from_millis(300);
        let settings = PostgresSettings {
            pool_size: 1,
            statement_timeout: budget,
            ..PostgresSettings::default()
        };
        let url = PostgresUrl::parse(&database.url_through(proxy.port())).expect("a valid URL");
        let store = PostgresStore::connect(&url, settings, Duration::from_secs(5))
            .await
            .expect("connects and migrates");
        let items = store.items();
        items.create(name("kept")).await.expect("created");
        assert_eq!(store.pool.status().size, 1);

        proxy.freeze();
        let started = tokio::time::Instant::now();
        let error = items.create(name("frozen")).await.expect_err("over budget");
        assert!(started.elapsed() < budget + Duration::from_secs(2));
        assert!(
            std::error::Error::source(&error)
                .is_some_and(|cause| cause.to_string().contains("300 ms")),
            "{error:?}"
        );
        assert_eq!(store.pool.status().size, 0, "the cut connection was closed");

        proxy.thaw();
        let kept = items.get(Id::new(1)).await.expect("answered again");
        assert_eq!(kept.map(|item| item.name), Some(name("kept")));
        store.close().await;
        database.drop().await;
    }

    #[tokio::test]
    async fn a_connection_whose_write_is_refused_as_read_only_is_closed_not_lent_again() {
        let (store, database) = one_connection().await;
        let items = store.items();
        items.create(name("before")).await.expect("created");
        assert_eq!(store.pool.status().size, 1);
        // What a primary turned standby answers every write: SQLSTATE 25006.
        let admin = database.client().await.expect("the test connects");
        admin
            .batch_execute(
                "create function refuse() returns trigger language plpgsql as $$ begin \
                 raise exception 'read-only' using errcode = '25006'; end $$; \
                 create trigger refuse before update on items \
                 for each row execute function refuse()",
            )
            .await
            .expect("the trigger is made");

        let renamed = items::Item {
            id: Id::new(1),
            name: name("after"),
        };
        let error = items
            .replace(&renamed, None)
            .await
            .expect_err("refused as read-only");
        assert!(
            format!("{error:?}").contains("25006"),
            "the cause is the refusal: {error:?}"
        );
        assert_eq!(
            store.pool.status().size,
            0,
            "the refused connection was closed"
        );

        admin
            .batch_execute("drop trigger refuse on items")
            .await
            .expect("the trigger goes");
        items
            .replace(&renamed, None)
            .await
            .expect("written on a new connection");
        drop(admin);
        store.close().await;
        database.drop().await;
    }

    #[tokio::test]
    async fn with_read_write_asked_a_read_only_server_gives_no_connection_until_it_is_writable() {
        let database = ScratchDatabase::create(&test_database_url())
            .await
            .expect("a scratch database");
        let url = PostgresUrl::parse(&format!(
            "{}?target_session_attrs=read-write",
            database.url()
        ))
        .expect("a valid URL");
        let settings = PostgresSettings {
            pool_size: 2,
            statement_timeout: Duration::from_millis(500),
            ..PostgresSettings::default()
        };
        let store = PostgresStore::connect(&url, settings, Duration::from_secs(5))
            .await
            .expect("connects and migrates");
        let items = store.items();
        items.create(name("kept")).await.expect("created");
        let admin = database.client().await.expect("the test connects");
        let database_name = database.name().to_owned();
        admin
            .batch_execute(&format!(
                "alter database \"{database_name}\" set default_transaction_read_only = on"
            ))
            .await
            .expect("the database turns read-only for new sessions");
        store.close().await;
        let store = PostgresStore::connect(&url, settings, Duration::from_millis(300))
            .await
            .expect_err("no read-write session to start on");
        let text = crate::report::ErrorChain(&store).to_string();
        assert!(
            text.contains("no host of the database URL gave a read-write session")
                && text.contains("read-only"),
            "{text}"
        );

        admin
            .batch_execute(&format!(
                "alter database \"{database_name}\" reset default_transaction_read_only"
            ))
            .await
            .expect("writable again");
        let store = PostgresStore::connect(&url, settings, Duration::from_secs(5))
            .await
            .expect("connects once writable");
        let kept = store.items().get(Id::new(1)).await.expect("answered");
        assert_eq!(kept.map(|item| item.name), Some(name("kept")));
        drop(admin);
        store.close().await;
        database.drop().await;
    }

    #[tokio::test]
    async fn once_a_newer_timeline_was_written_on_an_older_primary_gets_no_write_c12() {
        use items_domain::HealthCheck;

        let (store, database) = one_connection().await;
        let items = store.items();
        items.create(name("before")).await.expect("created");
        let hosts = std::sync::Arc::clone(&store.pool.manager().hosts);
        let mut lease = super::lease(&store.pool).await.expect("a lease");
        let timeline = lease
            .connection
            .as_ref()
            .and_then(|connection| connection.server.timeline)
            .expect("a URL of one host reads its primary's timeline too");
        lease.begin_write().await.expect("begun");
        lease
            .run(|client| client.batch_execute("create table fenced_probe (x int)"))
            .await
            .expect("written, not yet committed");

        // The store learns of a newer timeline (its primary was promoted
        // elsewhere): this server is now an old primary.
        hosts.adopt(&super::Server {
            host: 0,
            timeline: Some(timeline + 1),
        });
        let refused = lease.commit().await.expect_err("never committed");
        drop(lease);

        assert!(!refused.is_outcome_unknown(), "{refused:?}: a 503");
        let admin = database.client().await.expect("the test connects");
        let probe: Option<String> = admin
            .query_one("select to_regclass('fenced_probe')::text", &[])
            .await
            .expect("asked")
            .get(0);
        assert_eq!(probe, None, "rolled back");
        let fenced = format!(
            "fenced: a primary on timeline {timeline}, older than timeline {} this instance \
             wrote on",
            timeline + 1
        );
        let error = items.create(name("after")).await.expect_err("no host left");
        let text = crate::report::ErrorChain(&error).to_string();
        assert!(text.contains(&fenced), "{text}");
        assert_eq!(
            store.fenced(),
            Some(format!(
                "fenced: {} (a primary on timeline {timeline}, older than timeline {} written \
                 on)",
                hosts.label(0),
                timeline + 1
            ))
        );
        let down = store.ping().await.expect_err("not ready");
        let text = crate::report::ErrorChain(&down).to_string();
        assert!(
            text.contains("no primary this instance may write to; fenced: "),
            "{text}"
        );
        drop(admin);
        store.close().await;
        database.drop().await;
    }

    #[tokio::test]
    async fn a_listing_abandoned_half_way_leaves_no_transaction_for_the_next_c7() {
        let (store, database) = one_connection().await;
        let items = store.items();
        items.create(name("before")).await.expect("created");

        let abandoned = items.list_all().await.expect("a listing");
        drop(abandoned);
        // Outside the abandoned listing's snapshot, this write is seen.
        items.create(name("after")).await.expect("created");
        let listing = items.list_all().await.expect("a listing");
        let names: Vec<Name> = listing
            .batches
            .flat_map(|batch| futures_util::stream::iter(batch.expect("a batch")))
            .map(|item| item.name)
            .collect()
            .await;

        assert_eq!(listing.total, 2);
        assert_eq!(names, [name("before"), name("after")]);
        store.close().await;
        database.drop().await;
    }
}
