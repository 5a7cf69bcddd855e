//! The one migration runner of both SQL stores: the embedded migration
//! folders (`crates/adapters/migrations` for PostgreSQL,
//! `crates/adapters/migrations_sqlite`; `embedded.rs`), what to apply of
//! them (`plan.rs`), and the error, [`MigrateError`] (`errors.rs`); each
//! store's executor (`postgres.rs`, `sqlite.rs`) reads and writes the
//! records over its own driver.
//!
//! Invariants, on either store:
//! - what is applied is recorded in `_sqlx_migrations` exactly as sqlx 0.8
//!   records it (the table as sqlx creates it; per migration its version,
//!   the description sqlx derives from the file name, `success` true, the
//!   SHA-384 of the file's bytes as `checksum`, `execution_time` -1 in the
//!   migration's transaction, then the nanoseconds it took), so a database
//!   migrated by a build that used sqlx opens with this one and the other
//!   way round;
//! - each missing migration is applied in version order, in a transaction
//!   of its own together with its row, so one that fails leaves nothing of
//!   itself (a file starting `-- no-transaction` runs outside one, as sqlx
//!   runs it);
//! - a known migration recorded with another checksum (its file was edited
//!   after it was released) is refused, and so is any row with
//!   `success = false` (a migration left half-done), as sqlx refuses them;
//!   both before anything is applied;
//! - an applied migration this build does not know (a newer build migrated
//!   the database) is tolerated and logged at warn, so the previous build
//!   still starts on an upgraded schema (C12): sqlx's
//!   `set_ignore_missing(true)`.

mod embedded;
mod errors;
mod plan;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(test)]
mod tests;

pub use errors::MigrateError;
#[cfg(feature = "postgres")]
pub(crate) use postgres::run_postgres;
#[cfg(feature = "sqlite")]
pub(crate) use sqlite::run_sqlite;
