//! The SQLite executor of the migration runner, over the store's writing
//! `rusqlite` connection.
//!
//! SQLite has no advisory lock: two processes opening a new file at once
//! are kept apart by the file's write lock instead. Each missing migration
//! is applied in a `BEGIN IMMEDIATE` transaction of its own together with
//! its row, and looked for again once that lock is held, so it is applied
//! once.

#[cfg(test)]
mod tests;

use std::time::Instant;

use rusqlite::{Connection, OptionalExtension as _, TransactionBehavior, params};

use super::embedded::{Migration, SQLITE};
use super::errors::MigrateError;
use super::plan::{Recorded, plan};

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

/// sqlx's row of a migration applied, its time still unknown.
const INSERT_ROW: &str = "INSERT INTO _sqlx_migrations ( version, description, success, checksum, execution_time ) \
     VALUES ( ?1, ?2, TRUE, ?3, -1 )";

/// Brings the file of `connection` (a writing one) up to date with every
/// migration of `crates/adapters/migrations_sqlite`. Returns how many
/// migrations this run applied (0: the schema was already up to date; one
/// another process applied meanwhile is not counted).
///
/// # Errors
/// See [`MigrateError`]; what was applied before the error stays applied.
pub(crate) fn run_sqlite(connection: &mut Connection) -> Result<usize, MigrateError> {
    apply(connection, SQLITE)
}

/// [`run_sqlite`] with the migrations given, in version order.
fn apply(connection: &mut Connection, migrations: &[Migration]) -> Result<usize, MigrateError> {
    connection
        .execute_batch(CREATE_TABLE)
        .map_err(MigrateError::table)?;
    let recorded = recorded(connection)?;
    let mut applied = 0;
    for migration in plan("sqlite", migrations, &recorded)? {
        if apply_one(connection, migration, &migration.checksum())? {
            applied += 1;
        }
    }
    Ok(applied)
}

/// What `_sqlx_migrations` holds.
fn recorded(connection: &Connection) -> Result<Recorded, MigrateError> {
    let dirty = connection
        .query_row(
            "SELECT version FROM _sqlx_migrations WHERE success = false ORDER BY version LIMIT 1",
            [],
            |row| row.get(0),
        )
        .optional()
        .map_err(MigrateError::table)?;
    let mut statement = connection
        .prepare("SELECT version, checksum FROM _sqlx_migrations ORDER BY version")
        .map_err(MigrateError::table)?;
    let applied = statement
        .query_map([], |row| Ok((row.get(0)?, recorded_checksum(row, 1)?)))
        .map_err(MigrateError::table)?
        .collect::<rusqlite::Result<_>>()
        .map_err(MigrateError::table)?;
    Ok(Recorded { dirty, applied })
}

/// A recorded checksum: sqlx writes a blob; text is read as its bytes.
fn recorded_checksum(row: &rusqlite::Row<'_>, column: usize) -> rusqlite::Result<Vec<u8>> {
    Ok(row.get_ref(column)?.as_bytes()?.to_vec())
}

/// Applies `migration` and records it, in one transaction that holds the
/// write lock from its start; nothing (`false`) when another process
/// recorded it meanwhile (with the same checksum).
fn apply_one(
    connection: &mut Connection,
    migration: &Migration,
    checksum: &[u8],
) -> Result<bool, MigrateError> {
    let started = Instant::now();
    if migration.no_transaction() {
        // As sqlx: the script and its row, each on its own; a file that
        // opts out of the transaction must be safe to run twice, since
        // two processes may both find it missing.
        connection
            .execute_batch(migration.sql)
            .map_err(|source| MigrateError::execute(migration.version, source))?;
        connection
            .execute(
                INSERT_ROW,
                params![migration.version, migration.description, checksum],
            )
            .map_err(MigrateError::table)?;
    } else {
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(MigrateError::table)?;
        let recorded = transaction
            .query_row(
                "SELECT checksum FROM _sqlx_migrations WHERE version = ?1",
                [migration.version],
                |row| recorded_checksum(row, 0),
            )
            .optional()
            .map_err(MigrateError::table)?;
        match recorded {
            // Dropping the transaction rolls it back: it wrote nothing.
            Some(recorded) if recorded == checksum => return Ok(false),
            Some(_) => return Err(MigrateError::VersionMismatch(migration.version)),
            None => {}
        }
        transaction
            .execute_batch(migration.sql)
            .map_err(|source| MigrateError::execute(migration.version, source))?;
        transaction
            .execute(
                INSERT_ROW,
                params![migration.version, migration.description, checksum],
            )
            .map_err(MigrateError::table)?;
        transaction.commit().map_err(MigrateError::table)?;
    }
    // As sqlx: the time is recorded after the commit, and only for the
    // record (a process killed here leaves -1, which changes nothing).
    let nanos = i64::try_from(started.elapsed().as_nanos()).unwrap_or(i64::MAX);
    connection
        .execute(
            "UPDATE _sqlx_migrations SET execution_time = ?1 WHERE version = ?2",
            params![nanos, migration.version],
        )
        .map_err(MigrateError::table)?;
    Ok(true)
}
