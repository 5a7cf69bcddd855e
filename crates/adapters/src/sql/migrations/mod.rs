//! The one migration runner of both SQL stores: the embedded migration
//! folders (`crates/adapters/migrations` for PostgreSQL,
//! `crates/adapters/migrations_sqlite`), what to apply of them, and the
//! error; each store's executor (`postgres.rs`, `sqlite.rs`) reads and
//! writes the records over its own driver.
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

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::error::Error;

use sha2::{Digest as _, Sha384};

#[cfg(feature = "postgres")]
pub(crate) use postgres::run_postgres;
#[cfg(feature = "sqlite")]
pub(crate) use sqlite::run_sqlite;

/// One migration file: `<version>_<description>.sql`, as sqlx names them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    pub(crate) version: i64,
    /// The file name's part after the version, without `.sql`, `_` read
    /// as a space: what sqlx records.
    pub(crate) description: &'static str,
    /// The file's text, byte for byte.
    pub(crate) sql: &'static str,
}

impl Migration {
    /// What sqlx records as the migration's checksum: the SHA-384 of its
    /// SQL, byte for byte (`CHECKSUMS` beside the files lists the same).
    pub(crate) fn checksum(&self) -> Vec<u8> {
        Sha384::digest(self.sql.as_bytes()).to_vec()
    }

    /// Whether the migration runs outside a transaction: sqlx's opt-out,
    /// a file whose first bytes are `-- no-transaction` (for statements a
    /// transaction refuses, such as PostgreSQL's `create index
    /// concurrently`).
    pub(crate) fn no_transaction(&self) -> bool {
        self.sql.starts_with("-- no-transaction")
    }
}

// `POSTGRES` and `SQLITE`: every file of each folder, in version order,
// written by build.rs (each behind its store's feature).
include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// What a runner found in `_sqlx_migrations` before applying anything.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    /// The first version recorded with `success = false`, if any.
    pub(crate) dirty: Option<i64>,
    /// The checksum recorded for each applied version.
    pub(crate) applied: BTreeMap<i64, Vec<u8>>,
}

/// The migrations of `known` still to apply, in order, given what is
/// `recorded`; `store` names the database in the warning about versions
/// this build does not know.
///
/// # Errors
/// [`MigrateError::Dirty`] when a row says a migration was left half-done,
/// [`MigrateError::VersionMismatch`] when a known migration was recorded
/// with another checksum: refused before anything is applied, since the
/// schema is then not what this build was written against.
pub(crate) fn plan<'a>(
    store: &'static str,
    known: &'a [Migration],
    recorded: &Recorded,
) -> Result<Vec<&'a Migration>, MigrateError> {
    if let Some(version) = recorded.dirty {
        return Err(MigrateError::Dirty(version));
    }
    for version in recorded.applied.keys() {
        if !known.iter().any(|migration| migration.version == *version) {
            tracing::warn!(
                store,
                version,
                "the database holds a migration this build does not know (a newer build \
                 applied it); going on, as its schema keeps the previous build working (C12)"
            );
        }
    }
    let mut pending = Vec::new();
    for migration in known {
        match recorded.applied.get(&migration.version) {
            Some(checksum) if *checksum == migration.checksum() => {}
            Some(_) => return Err(MigrateError::VersionMismatch(migration.version)),
            None => pending.push(migration),
        }
    }
    Ok(pending)
}

/// A driver's error, whichever store's: a [`OneLine`] once in
/// [`MigrateError`].
type Cause = Box<dyn Error + Send + Sync>;

/// A driver's error and its causes told on one line. PostgreSQL's own
/// (`DbError`) put `DETAIL` and `HINT` on lines of their own, and a failed
/// migration ends the service's start with one line to the operator (C1):
/// a unique index refused on duplicate rows says which key on that line.
#[derive(Debug)]
struct OneLine(Cause);

impl std::fmt::Display for OneLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut text = self.0.to_string();
        let mut cause = self.0.source();
        while let Some(error) = cause {
            let told = error.to_string();
            // Some drivers repeat their cause in their message.
            if !text.ends_with(&told) {
                text.push_str(": ");
                text.push_str(&told);
            }
            cause = error.source();
        }
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect();
        f.write_str(&lines.join("; "))
    }
}

// Its causes are in its message already.
impl Error for OneLine {}

/// A driver's error as the source of a [`MigrateError`].
fn one_line(source: impl Into<Cause>) -> Cause {
    Box::new(OneLine(source.into()))
}

/// Why a database could not be brought up to date. Each message is one
/// line and leaves its cause to [`Error::source`], which is one line too
/// (the driver's error with its own causes, PostgreSQL's `DETAIL` and
/// `HINT` included); the refusals' messages are sqlx's.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The migration's file changed after it was applied to this database.
    #[error("migration {0} was previously applied but has been modified")]
    VersionMismatch(i64),
    /// A migration was left half-done (`success = false`).
    #[error("migration {0} is partially applied; fix and remove row from `_sqlx_migrations` table")]
    Dirty(i64),
    /// The migration's SQL failed; nothing of it was kept (unless it runs
    /// outside a transaction).
    #[error("while executing migration {version}")]
    Execute {
        version: i64,
        #[source]
        source: Cause,
    },
    /// `_sqlx_migrations` could not be read or written (a lock held past
    /// SQLite's busy timeout, a lost connection, a read-only file…).
    #[error("the migrations table `_sqlx_migrations` could not be read or written")]
    Table(#[source] Cause),
    /// PostgreSQL's advisory lock, which keeps two runners from migrating
    /// at once, could not be taken or given back.
    #[error("the migration lock (`pg_advisory_lock`) could not be taken or released")]
    Lock(#[source] Cause),
}

impl MigrateError {
    /// [`MigrateError::Table`] of a driver's error.
    pub(crate) fn table(source: impl Into<Cause>) -> Self {
        Self::Table(one_line(source))
    }

    /// [`MigrateError::Lock`] of a driver's error.
    #[cfg(feature = "postgres")]
    pub(crate) fn lock(source: impl Into<Cause>) -> Self {
        Self::Lock(one_line(source))
    }

    /// [`MigrateError::Execute`] of migration `version`.
    pub(crate) fn execute(version: i64, source: impl Into<Cause>) -> Self {
        Self::Execute {
            version,
            source: one_line(source),
        }
    }
}
