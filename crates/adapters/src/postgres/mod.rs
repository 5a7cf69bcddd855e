//! PostgreSQL repositories: the same service, shared by many instances.
//!
//! The driver is tokio-postgres; each connection prepares its statements
//! once (`pool.rs`). Queries are checked at run time, not at build time, so
//! building needs no database; the repository contract suite runs every
//! query against a real PostgreSQL instead. Every database failure becomes
//! [`RepositoryError::Unavailable`]: the HTTP adapter answers 503 and logs the
//! cause, and the pool reconnects by itself once the database is back.
//! Every store operation has a budget (`DATABASE_STATEMENT_TIMEOUT_MS`),
//! kept by the server and by this client (`budget.rs`). A URL may list
//! several hosts, as libpq's do, read by the driver (`url.rs`): each new
//! connection goes to the first whose server has the URL's
//! `target_session_attrs` (`hosts.rs`), so a store whose primary is lost
//! goes on on the standby promoted in its place, and never writes again on
//! an old primary of an older timeline (fencing, C12). Every change to
//! items is recorded by the schema's triggers and read, in commit order,
//! by the change feed (C14, `changes.rs`).

mod budget;
mod changes;
mod coalesce;
mod decode;
mod fate;
mod histories;
mod hosts;
mod items;
mod keys;
mod link;
mod pool;
mod positions;
mod products;
mod scoped;
mod standbys;
mod transfer;
mod url;
mod users;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use items_domain::{ChangeFeed, DependencyDown, HealthCheck, Repositories, RepositoryError};

use changes::{PostgresChanges, PrunerTask};
use coalesce::{Coalescer, ItemCreates, ItemReads, ProductCreates};
use histories::Histories;
use hosts::Hosts;
use pool::Pool;
use standbys::Standbys;

use crate::changes::cursor::CursorFormat;
use crate::changes::durable::DurableFeed;
use crate::sql::turns::ListingTurns;

pub use crate::sql::migrations::MigrateError;
pub use link::NoHost;
pub use link::OpenError;
pub use url::{PostgresUrl, UrlError};

pub use crate::sql::budget::{DEFAULT_STATEMENT_TIMEOUT, OverBudget};
pub use coalesce::{CoalescingStats, REQUESTS_PER_STATEMENT, REQUESTS_PER_STATEMENT_BUCKETS};
pub use hosts::{FAILOVERS, FENCED_HOSTS, FENCED_REFUSALS, READ_ONLY_REFUSALS};
pub use items::PostgresItemRepository;
pub use products::PostgresProductRepository;
pub use standbys::{
    DEFAULT_READ_MAX_LAG, DEFAULT_READ_WAIT, READS, STANDBY_LAG, STANDBY_USABLE, StandbySettings,
};
pub use transfer::{BeginError, PostgresSink, PostgresSnapshot};
pub use users::PostgresUserRepository;

/// How long a request waits for a pooled connection (free, newly opened or
/// tidied) before it is answered 503; also the bound on each connection
/// attempt at start. The common default of 30 s is far too long for a client to
/// wait to learn that the database is down.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the readiness ping may take: under the readiness probe's own
/// bound of 1 s (`http/admin.rs`), so a ping that cannot answer says why
/// (a fenced host, what each host did) rather than just "no answer".
const PING_WITHIN: Duration = Duration::from_millis(900);
/// Connections per instance unless `DATABASE_POOL_SIZE` says otherwise (C1).
/// PostgreSQL's default `max_connections` is 100: ten instances of ten fit,
/// with room for administrators.
pub const DEFAULT_POOL_SIZE: u32 = 10;

/// Server settings every connection starts with: PostgreSQL's notices
/// (e.g. `relation "_sqlx_migrations" already exists, skipping` when a
/// second instance starts) are not the operator's business; only warnings
/// and errors are sent to the client.
const QUIET: &str = "-c client_min_messages=warning";

/// Why the database could not be used at start.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("the database URL cannot be used")]
    InvalidUrl(#[source] UrlError),
    #[error("the database is unreachable after {:.1} s", waited.as_secs_f64())]
    Unreachable { waited: Duration, source: OpenError },
    /// The server answered and said no: retrying cannot help.
    #[error("the database refused the connection")]
    Refused(#[source] OpenError),
    #[error("the database could not be migrated")]
    Migrate(#[from] MigrateError),
}

/// How the pool is sized, how long one store operation may take, and how
/// the change feed (C14) reads and prunes.
#[derive(Debug, Clone, Copy)]
pub struct PostgresSettings {
    /// Connections at most (`DATABASE_POOL_SIZE`).
    pub pool_size: u32,
    /// The budget of one store operation (`DATABASE_STATEMENT_TIMEOUT_MS`):
    /// the server's `statement_timeout` and the client's deadline.
    pub statement_timeout: Duration,
    /// How long changes are kept for subscribers resuming with a cursor
    /// (`CHANGES_RETENTION`).
    pub changes_retention: Duration,
    /// How often the change feed reads the database while this instance
    /// has subscribers (its own commits wake it at once).
    pub changes_poll: Duration,
    /// How often this instance prunes changes past the retention.
    pub changes_prune_every: Duration,
}

/// `CHANGES_RETENTION`'s default: a day (C14).
pub const DEFAULT_CHANGES_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

impl Default for PostgresSettings {
    fn default() -> Self {
        Self {
            pool_size: DEFAULT_POOL_SIZE,
            statement_timeout: DEFAULT_STATEMENT_TIMEOUT,
            changes_retention: DEFAULT_CHANGES_RETENTION,
            changes_poll: Duration::from_millis(100),
            changes_prune_every: Duration::from_secs(60),
        }
    }
}

/// A pool of connections to one database, from which the repositories are
/// made, and the queues in which their point reads and creates coalesce
/// while every connection is busy (`coalesce`): one per store, so every
/// repository made from it feeds the same batches.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: Pool,
    /// The host of the connection the last readiness ping answered on.
    pinged: Arc<AtomicUsize>,
    item_reads: Coalescer<ItemReads>,
    item_creates: Coalescer<ItemCreates>,
    product_creates: Coalescer<ProductCreates>,
    /// How many migrations [`PostgresStore::connect`] applied.
    migrations_applied: usize,
    /// The turns of the full listings (C12), shared by every item
    /// repository made from this store.
    listings: ListingTurns,
    /// The change feed of the items (C14).
    changes: DurableFeed,
    /// Prunes old changes while the store lives.
    _pruner: Arc<PrunerTask>,
    /// The standbys that may serve reads (`DATABASE_READ_URL`, C13).
    standbys: Option<Arc<Standbys>>,
    /// The primary's timeline histories (C13: older timelines' tokens).
    histories: Arc<Histories>,
}

impl PostgresStore {
    /// Connects to `url`, retrying with exponential backoff (0.1 s
    /// doubling, at most 2 s apart) for up to `patience` — a database that
    /// starts a moment after the service is normal in a deployment —
    /// applies the migrations on that first connection (under an advisory
    /// lock, so instances starting together migrate once; the migrations
    /// run without the statement budget: an index built on a large table
    /// may take longer), and returns a pool of at most
    /// `settings.pool_size` connections, opened as requests need them.
    ///
    /// A URL may list several hosts, as libpq's do
    /// (`postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write`):
    /// each new connection then goes to the first host whose server has
    /// the attribute (`any`, `read-write`, `read-only`, `primary`,
    /// `standby`, `prefer-standby`), starting with the host the last one
    /// went to.
    ///
    /// # Errors
    /// [`ConnectError::Refused`] when the server said no for good (no such
    /// database, a wrong password); [`ConnectError::Unreachable`] when no
    /// connection succeeded in time; [`ConnectError::Migrate`] when the
    /// schema could not be brought up to date.
    pub async fn connect(
        url: &PostgresUrl,
        settings: PostgresSettings,
        patience: Duration,
    ) -> Result<Self, ConnectError> {
        let hosts = Hosts::new(url, QUIET);
        let started = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(100);
        let first = loop {
            // Bounded by the selection itself, whose failure names each host.
            match hosts.connect(ACQUIRE_TIMEOUT).await {
                Ok(opened) => break opened,
                Err(source) if source.is_permanent() => return Err(ConnectError::Refused(source)),
                Err(source) if started.elapsed() >= patience => {
                    return Err(ConnectError::Unreachable {
                        waited: started.elapsed(),
                        source,
                    });
                }
                Err(source) => {
                    tracing::warn!(error = %crate::report::ErrorChain(&source), "database not reachable yet; retrying");
                    // The last pause ends at the patience, for a last try
                    // then: the whole patience is waited, not the sum of
                    // whole pauses that fit in it.
                    let left = patience.saturating_sub(started.elapsed());
                    tokio::time::sleep(pause.min(left)).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        };
        let mut first = first;
        let migrations_applied = crate::sql::migrations::run_postgres(&mut first.link).await?;
        let origin: String = first
            .link
            .query_one(changes::ORIGIN, &[])
            .await
            .and_then(|row| row.try_get(0))
            .map_err(|error| ConnectError::Refused(OpenError::Driver(error)))?;
        // The pool opens its own connections as requests need them, on the
        // host the first one found.
        first.link.close(ACQUIRE_TIMEOUT).await;
        let budget = settings.statement_timeout;
        let options = format!("{QUIET} {}", budget::statement_timeout(budget));
        let hosts = Hosts::new(url, &options);
        hosts.adopt(&first.server);
        let manager = pool::Manager {
            hosts: Arc::new(hosts),
            budget,
            latest: Arc::default(),
        };
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size as usize)
            .build()
            .expect("a pool without timeouts needs no runtime");
        let lanes = coalesce::lanes(settings.pool_size);
        let source = PostgresChanges::new(pool.clone(), budget);
        let changes = DurableFeed::new(
            Arc::new(source),
            CursorFormat::new('p', &origin),
            settings.changes_poll,
            budget,
        );
        let pruning = changes::prune(
            pool.clone(),
            settings.changes_retention,
            settings.changes_prune_every,
        );
        let pruner = PrunerTask(tokio::spawn(pruning).abort_handle());
        Ok(Self {
            item_reads: Coalescer::new(pool.clone(), lanes),
            item_creates: Coalescer::new(pool.clone(), lanes),
            product_creates: Coalescer::new(pool.clone(), lanes),
            pinged: Arc::new(AtomicUsize::new(usize::MAX)),
            listings: ListingTurns::of(settings.pool_size),
            pool,
            migrations_applied,
            changes,
            _pruner: Arc::new(pruner),
            standbys: None,
            histories: Arc::default(),
        })
    }

    /// The same store, with the standbys of `url` serving reads (C13):
    /// each host of the URL a standby with a pool of its own (opened as
    /// reads need it), tracked by tasks started here, which end when the
    /// store is dropped. Every read of a request then goes to a standby
    /// that meets its token, or the primary.
    #[must_use]
    pub fn with_standbys(mut self, url: &PostgresUrl, settings: StandbySettings) -> Self {
        let budget = self.pool.manager().budget;
        let options = format!("{QUIET} {}", budget::statement_timeout(budget));
        self.standbys = Some(Standbys::start(
            url,
            settings,
            &options,
            budget,
            self.pool.clone(),
        ));
        self
    }

    /// How many migrations opening this store applied: 0 when the schema
    /// was already up to date (or another runner brought it there first).
    pub fn migrations_applied(&self) -> usize {
        self.migrations_applied
    }

    /// The host writes go to, when the URL lists several: the host of the
    /// connection the last readiness ping answered on, else the host the
    /// last connection went to. `None` for a URL of one host, whose
    /// readiness says just `ok`.
    pub fn writing_to(&self) -> Option<String> {
        let hosts = &self.pool.manager().hosts;
        if !hosts.several() {
            return None;
        }
        let pinged = Some(self.pinged.load(Ordering::SeqCst)).filter(|host| *host != usize::MAX);
        pinged
            .or_else(|| hosts.current())
            .map(|host| hosts.label(host).to_owned())
    }

    pub fn items(&self) -> PostgresItemRepository {
        PostgresItemRepository::new(
            self.pool.clone(),
            self.item_reads.clone(),
            self.item_creates.clone(),
            self.listings.clone(),
            self.changes.clone(),
        )
    }

    pub fn products(&self) -> PostgresProductRepository {
        PostgresProductRepository::new(self.pool.clone(), self.product_creates.clone())
    }

    pub fn users(&self) -> PostgresUserRepository {
        PostgresUserRepository::new(self.pool.clone())
    }

    /// The three repositories, sharing this pool; each operation in a span
    /// of its own when traces are on (C11); and the change feed of the
    /// items (C14).
    pub fn repositories(&self) -> Repositories {
        crate::sql::traced::repositories("postgresql", self.items(), self.products(), self.users())
            .with_changes(self.changes.clone())
    }

    /// The change feed of this database's items (C14): every change
    /// committed through any instance (or any other writer).
    pub fn changes(&self) -> Arc<dyn ChangeFeed> {
        Arc::new(self.changes.clone())
    }

    /// The hosts fenced now, each with its timeline and the one written on
    /// (`fenced: db1:5432 (a primary on timeline 1, older than timeline 2
    /// written on)`), for `/readyz`; `None` when no host is.
    pub fn fenced(&self) -> Option<String> {
        self.pool.manager().hosts.fenced_report()
    }

    /// Publishes the pool's state to the metrics recorder (C11); called at
    /// scrape time, so the values are current and cost nothing per request.
    pub fn record_pool_metrics(&self) {
        let status = self.pool.status();
        metrics::gauge!(POOL_CONNECTIONS).set(status.size as f64);
        metrics::gauge!(POOL_IDLE_CONNECTIONS).set(status.available as f64);
        metrics::gauge!(POOL_MAX_CONNECTIONS).set(status.max_size as f64);
        let fenced = self.pool.manager().hosts.fenced_count();
        metrics::gauge!(FENCED_HOSTS).set(fenced as f64);
    }

    /// What the coalescing queues did so far: item reads, item creates,
    /// product creates (for tests and benchmarks; `/metrics` has the
    /// histogram [`REQUESTS_PER_STATEMENT`]).
    pub fn coalescing_stats(&self) -> [CoalescingStats; 3] {
        [
            self.item_reads.stats(),
            self.item_creates.stats(),
            self.product_creates.stats(),
        ]
    }

    /// Stops pruning changes and closes every connection (tests drop their
    /// database afterwards).
    pub async fn close(&self) {
        self._pruner.0.abort();
        if let Some(standbys) = &self.standbys {
            standbys.close().await;
        }
        pool::close(&self.pool).await;
    }
}

/// Connections open now, idle or in use.
pub const POOL_CONNECTIONS: &str = "database_pool_connections";
/// Connections open and idle now.
pub const POOL_IDLE_CONNECTIONS: &str = "database_pool_idle_connections";
/// The most connections the pool opens (`DATABASE_POOL_SIZE`).
pub const POOL_MAX_CONNECTIONS: &str = "database_pool_max_connections";

/// The database answers when a pooled connection's server says it still
/// has the URL's attribute (`target_session_attrs`, `any` by default) and
/// is not fenced, in one round trip, within `PING_WITHIN` (0.9 s). A connection
/// whose server lost it is closed, so the next request's connection goes
/// to another host. While a host is fenced, each ping also asks it again
/// what it is (so one rejoined as a standby is no longer reported), and a
/// failure names the fenced hosts first: why no primary is left.
#[async_trait]
impl HealthCheck for PostgresStore {
    fn name(&self) -> &'static str {
        "database"
    }

    async fn ping(&self) -> Result<(), DependencyDown> {
        let hosts = &self.pool.manager().hosts;
        let answered = async {
            let mut lease = pool::lease(&self.pool).await?;
            lease.confirm().await?;
            Ok(lease.host())
        };
        let (answered, ()) = tokio::join!(
            tokio::time::timeout(PING_WITHIN, answered),
            hosts.recheck_fenced(PING_WITHIN)
        );
        // The repository error says "unavailable" and holds why: the why is
        // what the readiness report shows.
        let cause: Box<dyn std::error::Error + Send + Sync> = match answered {
            Ok(Ok(host)) => {
                if let Some(host) = host {
                    self.pinged.store(host, Ordering::SeqCst);
                }
                return Ok(());
            }
            Ok(Err(
                RepositoryError::Unavailable(cause) | RepositoryError::OutcomeUnknown(cause),
            )) => cause,
            Err(_) => format!("no answer within {} ms", PING_WITHIN.as_millis()).into(),
        };
        Err(DependencyDown::new(match hosts.fenced_report() {
            Some(fenced) => Box::new(NoPrimary { fenced, cause }),
            None => cause,
        }))
    }
}

/// Why the readiness ping failed while a host is fenced: the fenced hosts,
/// then what the others did.
#[derive(Debug, thiserror::Error)]
#[error("no primary this instance may write to; {fenced}")]
struct NoPrimary {
    fenced: String,
    #[source]
    cause: Box<dyn std::error::Error + Send + Sync>,
}

/// Describes the store's metrics to the installed recorder: how full the
/// coalesced statements are, failovers, read-only refusals and fencing.
pub fn describe_metrics() {
    coalesce::describe_metrics();
    hosts::describe_metrics();
    standbys::describe_metrics();
}

fn unavailable(error: impl std::error::Error + Send + Sync + 'static) -> RepositoryError {
    RepositoryError::unavailable(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_waited_is_reported_in_tenths_of_a_second() {
        let error = ConnectError::Unreachable {
            waited: Duration::from_nanos(16_512_223_983),
            source: OpenError::TimedOut(Duration::from_secs(3)),
        };

        assert_eq!(
            error.to_string(),
            "the database is unreachable after 16.5 s"
        );
    }

    #[test]
    fn a_refusal_without_a_database_code_is_retried() {
        assert!(!OpenError::TimedOut(Duration::from_secs(1)).is_permanent());
        assert!(
            !OpenError::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
                .is_permanent()
        );
    }

    #[test]
    fn each_connect_error_names_every_cause_once() {
        let refused = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let io = || OpenError::Io(refused());
        crate::report::assert_chains(vec![
            (
                Box::new(ConnectError::InvalidUrl(
                    PostgresUrl::parse("postgres:///db").expect_err("no host"),
                )),
                "the database URL cannot be used: the URL names no host",
            ),
            (
                Box::new(ConnectError::Unreachable {
                    waited: Duration::from_secs(15),
                    source: io(),
                }),
                "the database is unreachable after 15.0 s: cannot reach the server: refused",
            ),
            (
                Box::new(ConnectError::Refused(io())),
                "the database refused the connection: cannot reach the server: refused",
            ),
            (
                Box::new(RepositoryError::unavailable(io())),
                "the repository is unavailable: cannot reach the server: refused",
            ),
        ]);
    }
}
