//! The schema's migrations (`crates/adapters/migrations_sqlite`, embedded
//! in the binary) and [`run`], which brings a file up to date over the
//! writing connection.
//!
//! Invariants:
//! - what is applied is recorded in `_sqlx_migrations` exactly as sqlx 0.8
//!   records it (the table as sqlx creates it; per migration its version,
//!   description, `success` true, the SHA-384 of the file's bytes as
//!   `checksum`, and `execution_time` -1, then the nanoseconds it took), so
//!   a file migrated by a build that used sqlx opens with this one and the
//!   other way round;
//! - each missing migration is applied in order, in a `BEGIN IMMEDIATE`
//!   transaction of its own together with its row, and looked for again
//!   once that lock is held: two processes opening a new file at once apply
//!   it once, and a migration that fails leaves nothing of itself;
//! - a known migration recorded with another checksum (its file was edited
//!   after it was released) is refused, and so is any row with
//!   `success = false` (a migration left half-done), as sqlx refuses them;
//! - an applied migration this build does not know (a newer build migrated
//!   the file) is tolerated and logged at warn, so the previous build still
//!   runs on an upgraded file (C12), as on PostgreSQL.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Instant;

use rusqlite::{Connection, OptionalExtension as _, TransactionBehavior, params};
use sha2::{Digest as _, Sha384};

/// One migration file: `<version>_<description>.sql`, as sqlx names them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Migration {
    pub(super) version: i64,
    /// The file name's part after the version, `_` read as a space.
    pub(super) description: &'static str,
    pub(super) sql: &'static str,
}

impl Migration {
    /// What sqlx records as the migration's checksum: the SHA-384 of its
    /// SQL, byte for byte (`CHECKSUMS` beside the files lists the same).
    pub(super) fn checksum(&self) -> Vec<u8> {
        Sha384::digest(self.sql.as_bytes()).to_vec()
    }
}

/// Every file of `crates/adapters/migrations_sqlite`, in version order. A
/// test holds this list to the folder, so a new file cannot be left out.
pub(super) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "collections",
        sql: include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/migrations_sqlite/0001_collections.sql"
        )),
    },
    Migration {
        version: 2,
        description: "idempotency keys",
        sql: include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/migrations_sqlite/0002_idempotency_keys.sql"
        )),
    },
];

/// sqlx 0.8's table, statement for statement, so either can create it.
const CREATE_TABLE: &str = "
CREATE TABLE IF NOT EXISTS _sqlx_migrations (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    success BOOLEAN NOT NULL,
    checksum BLOB NOT NULL,
    execution_time BIGINT NOT NULL
);";

/// Why a file could not be brought up to date; the messages are sqlx's.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The migration's file changed after it was applied to this file.
    #[error("migration {0} was previously applied but has been modified")]
    VersionMismatch(i64),
    /// A migration was left half-done (`success = false`).
    #[error("migration {0} is partially applied; fix and remove row from `_sqlx_migrations` table")]
    Dirty(i64),
    /// The migration's SQL failed; nothing of it was kept.
    #[error("while executing migration {version}")]
    Execute {
        version: i64,
        #[source]
        source: rusqlite::Error,
    },
    /// `_sqlx_migrations` could not be read or written (a lock held past
    /// the busy timeout, a file that cannot be written…).
    #[error("the migrations table `_sqlx_migrations` could not be read or written")]
    Table(#[source] rusqlite::Error),
}

/// Brings the file of `connection` (a writing one) up to date with
/// [`MIGRATIONS`].
///
/// # Errors
/// See [`MigrateError`]; what was applied before the error stays applied.
pub(super) fn run(connection: &mut Connection) -> Result<(), MigrateError> {
    apply(connection, MIGRATIONS)
}

/// [`run`] with the migrations given, in version order.
fn apply(connection: &mut Connection, migrations: &[Migration]) -> Result<(), MigrateError> {
    connection
        .execute_batch(CREATE_TABLE)
        .map_err(MigrateError::Table)?;
    if let Some(version) = dirty(connection)? {
        return Err(MigrateError::Dirty(version));
    }
    let applied = applied(connection)?;
    for version in applied.keys() {
        if !migrations.iter().any(|known| known.version == *version) {
            tracing::warn!(
                version,
                "the SQLite file holds a migration this build does not know (a newer build \
                 applied it); going on, as its schema keeps the previous build working"
            );
        }
    }
    for migration in migrations {
        let checksum = migration.checksum();
        match applied.get(&migration.version) {
            Some(recorded) if *recorded == checksum => {}
            Some(_) => return Err(MigrateError::VersionMismatch(migration.version)),
            None => apply_one(connection, migration, &checksum)?,
        }
    }
    Ok(())
}

/// The first version recorded as not applied whole, if any.
fn dirty(connection: &Connection) -> Result<Option<i64>, MigrateError> {
    connection
        .query_row(
            "SELECT version FROM _sqlx_migrations WHERE success = false ORDER BY version LIMIT 1",
            [],
            |row| row.get(0),
        )
        .optional()
        .map_err(MigrateError::Table)
}

/// The checksum recorded for each applied version.
fn applied(connection: &Connection) -> Result<BTreeMap<i64, Vec<u8>>, MigrateError> {
    let mut statement = connection
        .prepare("SELECT version, checksum FROM _sqlx_migrations ORDER BY version")
        .map_err(MigrateError::Table)?;
    let rows = statement
        .query_map([], |row| Ok((row.get(0)?, recorded_checksum(row, 1)?)))
        .map_err(MigrateError::Table)?;
    rows.collect::<rusqlite::Result<_>>()
        .map_err(MigrateError::Table)
}

/// A recorded checksum: sqlx writes a blob; text is read as its bytes.
fn recorded_checksum(row: &rusqlite::Row<'_>, column: usize) -> rusqlite::Result<Vec<u8>> {
    Ok(row.get_ref(column)?.as_bytes()?.to_vec())
}

/// Applies `migration` and records it, in one transaction that holds the
/// write lock from its start; nothing when another process recorded it
/// meanwhile (with the same checksum).
fn apply_one(
    connection: &mut Connection,
    migration: &Migration,
    checksum: &[u8],
) -> Result<(), MigrateError> {
    let started = Instant::now();
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(MigrateError::Table)?;
    let recorded = transaction
        .query_row(
            "SELECT checksum FROM _sqlx_migrations WHERE version = ?1",
            [migration.version],
            |row| recorded_checksum(row, 0),
        )
        .optional()
        .map_err(MigrateError::Table)?;
    match recorded {
        // Dropping the transaction rolls it back: it wrote nothing.
        Some(recorded) if recorded == checksum => return Ok(()),
        Some(_) => return Err(MigrateError::VersionMismatch(migration.version)),
        None => {}
    }
    transaction
        .execute_batch(migration.sql)
        .map_err(|source| MigrateError::Execute {
            version: migration.version,
            source,
        })?;
    transaction
        .execute(
            "INSERT INTO _sqlx_migrations ( version, description, success, checksum, execution_time ) \
             VALUES ( ?1, ?2, TRUE, ?3, -1 )",
            params![migration.version, migration.description, checksum],
        )
        .map_err(MigrateError::Table)?;
    transaction.commit().map_err(MigrateError::Table)?;
    // As sqlx: the time is recorded after the commit, and only for the
    // record (a process killed here leaves -1, which changes nothing).
    let nanos = i64::try_from(started.elapsed().as_nanos()).unwrap_or(i64::MAX);
    connection
        .execute(
            "UPDATE _sqlx_migrations SET execution_time = ?1 WHERE version = ?2",
            params![nanos, migration.version],
        )
        .map_err(MigrateError::Table)?;
    Ok(())
}
