//! The PostgreSQL executor of the migration runner, over a
//! `tokio_postgres::Client`, statement for statement what sqlx-postgres
//! 0.8.6 runs (`sqlx-postgres/src/migrate.rs` and
//! `sqlx-core/src/migrate/migrator.rs`), so that this build and one that
//! migrates with sqlx move both ways on one database:
//! - the session-level advisory lock `pg_advisory_lock(id)`, with sqlx's
//!   id of the database's name ([`lock_id`]), is taken before the table is
//!   created and held until every migration is applied, so two runners of
//!   either kind on one database migrate once;
//! - each migration's script and its row are one transaction (a file
//!   starting `-- no-transaction` runs without one); the time it took is
//!   written after the commit.

#[cfg(test)]
mod tests;

use std::time::Instant;

use tokio_postgres::Client;

use super::embedded::{Migration, POSTGRES};
use super::errors::MigrateError;
use super::plan::{Recorded, plan};

/// sqlx 0.8's table, statement for statement, so either can create it.
const CREATE_TABLE: &str = "
CREATE TABLE IF NOT EXISTS _sqlx_migrations (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMPTZ NOT NULL DEFAULT now(),
    success BOOLEAN NOT NULL,
    checksum BYTEA NOT NULL,
    execution_time BIGINT NOT NULL
);";

/// sqlx's row of a migration applied, its time still unknown.
const INSERT_ROW: &str = "INSERT INTO _sqlx_migrations ( version, description, success, checksum, execution_time ) \
     VALUES ( $1, $2, TRUE, $3, -1 )";

/// Brings the database of `client` up to date with every migration of
/// `crates/adapters/migrations`: takes sqlx's advisory lock, applies what
/// is missing, gives the lock back (also when applying failed, so a
/// client kept afterwards holds nothing).
///
/// `&mut`: the migrations' transactions are the client's, and no other
/// task may slip a statement into them meanwhile. The client should carry
/// no `statement_timeout`: a migration (an index built on a large table)
/// may take longer than any request's budget. The lock waits as long as
/// another runner migrates. Returns how many migrations this run applied
/// (0: the schema was already up to date).
///
/// # Errors
/// See [`MigrateError`]; what was applied before the error stays applied.
pub(crate) async fn run_postgres(client: &mut Client) -> Result<usize, MigrateError> {
    apply(client, POSTGRES).await
}

/// [`run_postgres`] with the migrations given, in version order.
async fn apply(client: &mut Client, migrations: &[Migration]) -> Result<usize, MigrateError> {
    let database: String = client
        .query_one("SELECT current_database()", &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(MigrateError::lock)?;
    let lock = lock_id(&database);
    client
        .execute("SELECT pg_advisory_lock($1)", &[&lock])
        .await
        .map_err(MigrateError::lock)?;
    let applied = apply_locked(client, migrations).await;
    let released = client
        .execute("SELECT pg_advisory_unlock($1)", &[&lock])
        .await;
    // The first error is the one to tell; a release that fails after it
    // comes of the same lost connection, which ends the lock anyway.
    let applied = applied?;
    released.map_err(MigrateError::lock)?;
    Ok(applied)
}

/// sqlx's `generate_lock_id`: the CRC-32 (ISO-HDLC, zlib's) of the
/// database's name times 0x3d32ad9e. No overflow: both factors are below
/// 2^32 and the first below 2^30.
fn lock_id(database: &str) -> i64 {
    0x3d32_ad9e * i64::from(crc32(database.as_bytes()))
}

/// CRC-32/ISO-HDLC (reflected polynomial 0xEDB88320), bit by bit: it runs
/// once per migration run, over a database's name.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0_u32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            let low_bit = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & low_bit);
        }
    }
    !crc
}

/// The run itself, the lock held; how many migrations it applied.
async fn apply_locked(
    client: &mut Client,
    migrations: &[Migration],
) -> Result<usize, MigrateError> {
    client
        .batch_execute(CREATE_TABLE)
        .await
        .map_err(MigrateError::table)?;
    let recorded = recorded(client).await?;
    let pending = plan("postgres", migrations, &recorded)?;
    for migration in &pending {
        apply_one(client, migration).await?;
    }
    Ok(pending.len())
}

/// What `_sqlx_migrations` holds.
async fn recorded(client: &Client) -> Result<Recorded, MigrateError> {
    let dirty = client
        .query_opt(
            "SELECT version FROM _sqlx_migrations WHERE success = false ORDER BY version LIMIT 1",
            &[],
        )
        .await
        .and_then(|row| row.map(|row| row.try_get(0)).transpose())
        .map_err(MigrateError::table)?;
    let applied = client
        .query(
            "SELECT version, checksum FROM _sqlx_migrations ORDER BY version",
            &[],
        )
        .await
        .and_then(|rows| {
            rows.iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect()
        })
        .map_err(MigrateError::table)?;
    Ok(Recorded { dirty, applied })
}

/// Applies `migration` and records it, then writes the time it took.
async fn apply_one(client: &mut Client, migration: &Migration) -> Result<(), MigrateError> {
    let started = Instant::now();
    let checksum = migration.checksum();
    let row: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
        [&migration.version, &migration.description, &checksum];
    if migration.no_transaction() {
        client
            .batch_execute(migration.sql)
            .await
            .map_err(|source| MigrateError::execute(migration.version, source))?;
        client
            .execute(INSERT_ROW, &row)
            .await
            .map_err(MigrateError::table)?;
    } else {
        // Dropped without a commit (an error below), the transaction is
        // rolled back: the script leaves nothing without its row.
        let transaction = client.transaction().await.map_err(MigrateError::table)?;
        transaction
            .batch_execute(migration.sql)
            .await
            .map_err(|source| MigrateError::execute(migration.version, source))?;
        transaction
            .execute(INSERT_ROW, &row)
            .await
            .map_err(MigrateError::table)?;
        transaction.commit().await.map_err(MigrateError::table)?;
    }
    // As sqlx: only for the record (a process killed here leaves -1,
    // which changes nothing).
    let nanos = i64::try_from(started.elapsed().as_nanos()).unwrap_or(i64::MAX);
    client
        .execute(
            "UPDATE _sqlx_migrations SET execution_time = $1 WHERE version = $2",
            &[&nanos, &migration.version],
        )
        .await
        .map_err(MigrateError::table)?;
    Ok(())
}
