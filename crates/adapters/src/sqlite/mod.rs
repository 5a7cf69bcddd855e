//! SQLite repositories: the service's data in one local file, durable
//! without a database server (C12), through one driver, `rusqlite`.
//!
//! Invariants:
//! - durability: the file is in WAL mode with `synchronous=FULL`, so a
//!   commit has synced the write-ahead log before it returns, and an
//!   acknowledged write survives a killed process and a power loss alike
//!   (`NORMAL` would survive a killed process only; a `kill -9` test
//!   cannot tell the two apart, since the OS still writes its page cache);
//! - one writer: every write goes to ONE connection, owned by one thread
//!   (`writer.rs`), whose transactions begin `BEGIN IMMEDIATE`, so
//!   connections never race for the file's write lock;
//! - group commit: the writer applies every write queued while its
//!   previous commit ran in one transaction and answers each caller only
//!   after the commit returned; a lone write commits at once, no timer
//!   delays it; a failed batch is rolled back whole and each of its callers
//!   gets [`RepositoryError::Unavailable`] (503);
//! - reads never wait for the writer: an item by id on the calling thread
//!   (`point_reads.rs`), every other read through the reader pool
//!   (`readers.rs`, the full listing in `listing.rs`);
//! - ids come from `AUTOINCREMENT` counters, which never go back, also
//!   across restarts (C2); totals and the listing's version from a tally
//!   row the schema's triggers keep in the same transaction as each write
//!   (C7, C10);
//! - the schema is `crates/adapters/migrations_sqlite`, embedded and
//!   applied at open by the runner both SQL stores share, recorded as sqlx
//!   records it (`crate::sql::migrations`).
//!
//! [`SqliteStore::open`] opens a file (created when missing) with
//! [`SqliteSettings`] and makes the repositories and the change feed;
//! [`describe_metrics`] describes what
//! [`SqliteStore::record_writer_metrics`] publishes at scrape time.
//! [`backup()`] copies a store, consistent as of one moment, into a new file
//! while writers go on (`backup.rs`); [`SqliteSnapshot`] and [`SqliteSink`]
//! are the two ends of `items-service copy` (`transfer.rs`).
//!
//! The store itself is `store.rs`; opening the file, `opening.rs`.
//!
//! [`RepositoryError::Unavailable`]: items_domain::RepositoryError::Unavailable
//!
//! Why group commit: `POST /items` over SQLite is 6.0× a loop of one
//! INSERT per transaction, docs/performance.md "SQLite".

mod backup;
mod changes;
mod connections;
mod file;
mod items;
mod keys;
mod listing;
mod messages;
mod opening;
mod point_reads;
mod products;
mod readers;
mod rows;
mod settings;
mod store;
mod transfer;
mod users;
mod writer;
mod writes;

pub use crate::sql::migrations::MigrateError;
pub use backup::{BackupError, backup};
pub use file::{DEFAULT_WAL_LIMIT, WAL_BYTES};
pub use items::SqliteItemRepository;
pub use opening::OpenError;
pub use products::SqliteProductRepository;
pub use settings::{DEFAULT_CHANGES_RETENTION, SqliteSettings};
pub use store::{SqliteStore, describe_metrics};
pub use transfer::{SqliteSink, SqliteSnapshot};
pub use users::SqliteUserRepository;
pub use writer::{WRITER_QUEUE_DEPTH, WRITES_PER_COMMIT, WRITES_PER_COMMIT_BUCKETS};
