//! PostgreSQL repositories: the same service, shared by many instances.
//!
//! [`PostgresStore::connect`] opens a store on a [`PostgresUrl`] with
//! [`PostgresSettings`], migrating the schema first;
//! [`PostgresStore::with_standbys`] adds standbys to serve reads (C13). The
//! store makes the repositories and the change feed, is the readiness
//! check named `database`, and publishes its pool's gauges at scrape time
//! ([`describe_metrics`] describes the rest). [`PostgresSnapshot`] and
//! [`PostgresSink`] are the two ends of `items-service copy`.
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
//!
//! The store itself is `store.rs`: opened by `start.rs`'s first connection,
//! each connection starting with `options.rs`'s server settings, its
//! readiness in `readiness.rs`.
//!
//! [`RepositoryError::Unavailable`]: items_domain::RepositoryError::Unavailable

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
mod options;
mod pool;
mod positions;
mod products;
mod readiness;
mod scoped;
mod settings;
mod standbys;
mod start;
mod store;
mod transfer;
mod url;
mod users;

pub use crate::sql::budget::{DEFAULT_STATEMENT_TIMEOUT, OverBudget};
pub use crate::sql::migrations::MigrateError;
pub use coalesce::{CoalescingStats, REQUESTS_PER_STATEMENT, REQUESTS_PER_STATEMENT_BUCKETS};
pub use hosts::{FAILOVERS, FENCED_HOSTS, FENCED_REFUSALS, READ_ONLY_REFUSALS};
pub use items::PostgresItemRepository;
pub use link::{NoHost, OpenError};
pub use products::PostgresProductRepository;
pub use settings::{DEFAULT_CHANGES_RETENTION, DEFAULT_POOL_SIZE, PostgresSettings};
pub use standbys::{
    DEFAULT_READ_MAX_LAG, DEFAULT_READ_WAIT, READS, STANDBY_LAG, STANDBY_USABLE, StandbySettings,
};
pub use start::ConnectError;
pub use store::{
    POOL_CONNECTIONS, POOL_IDLE_CONNECTIONS, POOL_MAX_CONNECTIONS, PostgresStore, describe_metrics,
};
pub use transfer::{BeginError, PostgresSink, PostgresSnapshot};
pub use url::{PostgresUrl, UrlError};
pub use users::PostgresUserRepository;
