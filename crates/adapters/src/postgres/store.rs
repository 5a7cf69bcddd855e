//! [`PostgresStore`]: a pool of connections to one database, from which the
//! repositories are made; how it is opened, and what it reports.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use items_domain::{ChangeFeed, Repositories};

use super::changes::{self, PostgresChanges, PrunerTask};
use super::coalesce::{self, Coalescer, CoalescingStats, ItemCreates, ItemReads, ProductCreates};
use super::histories::Histories;
use super::hosts::{self, FENCED_HOSTS, Hosts};
use super::items::PostgresItemRepository;
use super::link::OpenError;
use super::options::{self, QUIET};
use super::pool::{self, ACQUIRE_TIMEOUT, Pool};
use super::products::PostgresProductRepository;
use super::settings::PostgresSettings;
use super::standbys::{self, StandbySettings, Standbys};
use super::start::{self, ConnectError};
use super::url::PostgresUrl;
use super::users::PostgresUserRepository;
use crate::changes::cursor::CursorFormat;
use crate::changes::durable::DurableFeed;
use crate::sql::turns::ListingTurns;

/// A pool of connections to one database, from which the repositories are
/// made, and the queues in which their point reads and creates coalesce
/// while every connection is busy (`coalesce`): one per store, so every
/// repository made from it feeds the same batches.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pub(super) pool: Pool,
    /// The host of the connection the last readiness ping answered on.
    pub(super) pinged: Arc<AtomicUsize>,
    pub(super) item_reads: Coalescer<ItemReads>,
    pub(super) item_creates: Coalescer<ItemCreates>,
    pub(super) product_creates: Coalescer<ProductCreates>,
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
    pub(super) standbys: Option<Arc<Standbys>>,
    /// The primary's timeline histories (C13: older timelines' tokens).
    pub(super) histories: Arc<Histories>,
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
        let mut first = start::first_connection(&Hosts::new(url, QUIET), patience).await?;
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
        let hosts = Hosts::new(url, &options::with_budget(budget));
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
        let slots = coalesce::statement_slots(settings.pool_size);
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
            item_reads: Coalescer::new(pool.clone(), slots),
            item_creates: Coalescer::new(pool.clone(), slots),
            product_creates: Coalescer::new(pool.clone(), slots),
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
        self.standbys = Some(Standbys::start(
            url,
            settings,
            &options::with_budget(budget),
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
    /// histogram [`REQUESTS_PER_STATEMENT`](coalesce::REQUESTS_PER_STATEMENT)).
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

/// Describes the store's metrics to the installed recorder: how full the
/// coalesced statements are, failovers, read-only refusals and fencing.
pub fn describe_metrics() {
    coalesce::describe_metrics();
    hosts::describe_metrics();
    standbys::describe_metrics();
}
