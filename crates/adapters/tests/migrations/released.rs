//! A released migration is never edited. The migration runner (as sqlx
//! before it) stores each applied migration's SHA-384 in
//! `_sqlx_migrations` and refuses to start on a database whose applied
//! migration no longer matches its file — in production, after the deploy. `CHECKSUMS` beside the migrations (the
//! output of `sha384sum 0*.sql`) catches the edit here instead. The SQLite
//! store keeps sqlx's records and refuses alike. Also here: the previous
//! release starts on a schema a newer release has migrated, on either
//! store (C12).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::scratch_store::ScratchStore;
use items_adapters::postgres::{ConnectError, PostgresSettings, PostgresStore};
use items_adapters::sqlite::{self, OpenError, SqliteSettings, SqliteStore};
use items_testkit::Fixture;
use items_testkit::postgres::ScratchDatabase;
use sha2::{Digest as _, Sha384};

use crate::migration_folders;

/// The `<sha384 hex>  <file>` lines of `folder/CHECKSUMS`, by file name.
fn released_checksums(folder: &Path) -> Option<BTreeMap<String, String>> {
    let listed = std::fs::read_to_string(folder.join("CHECKSUMS")).ok()?;
    Some(
        listed
            .lines()
            .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
            .map(|line| {
                let (checksum, file) = line.split_once("  ").unwrap();
                (file.trim().to_owned(), checksum.to_owned())
            })
            .collect(),
    )
}

/// A pool of one connection: the tests only start the store.
fn one_connection() -> PostgresSettings {
    PostgresSettings {
        pool_size: 1,
        ..PostgresSettings::default()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Runs `sql` on `database` as someone at psql would, on a connection of
/// its own.
async fn psql(database: &ScratchDatabase, sql: &str) {
    let (client, connection) = tokio_postgres::connect(&database.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap();
    drop(client);
    connection.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_released_migration_file_is_never_edited() {
    let mut failures = Vec::new();
    for folder in migration_folders() {
        // The checksum recorded of each: the SHA-384 of its bytes.
        let files: BTreeMap<String, String> = crate::migration_files(&folder)
            .iter()
            .map(|file| {
                let name = file.file_name().unwrap().to_string_lossy().into_owned();
                let (version, _) = name.split_once('_').unwrap();
                assert_eq!(version.len(), 4, "{name}: a four-digit version");
                let checksum = Sha384::digest(std::fs::read(file).unwrap());
                (name, hex(&checksum))
            })
            .collect();
        let Some(released) = released_checksums(&folder) else {
            failures.push(format!(
                "{}/CHECKSUMS is missing; write it with `sha384sum 0*.sql > CHECKSUMS` there",
                folder.display()
            ));
            continue;
        };
        for (file, checksum) in &files {
            match released.get(file) {
                None => failures.push(format!(
                    "{file} is not in {}/CHECKSUMS: add the line `{checksum}  {file}`",
                    folder.display()
                )),
                Some(listed) if listed != checksum => failures.push(format!(
                    "{file} changed after release: a database that applied it would refuse \
                     this build at start. Restore it and put the change in a new migration \
                     (if it was never released, its line becomes `{checksum}  {file}`)"
                )),
                Some(_) => {}
            }
        }
        for file in released.keys().filter(|file| !files.contains_key(*file)) {
            failures.push(format!(
                "{file} is listed as released but is gone: a database that applied it \
                 cannot tell what this build would do"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn the_store_refuses_to_start_on_a_database_where_an_edited_migration_was_applied() {
    let scratch = ScratchStore::create().await;
    psql(
        &scratch.database,
        "update _sqlx_migrations set checksum = '\\x00' where version = 1",
    )
    .await;

    let refused = PostgresStore::connect(&scratch.url(), one_connection(), Duration::from_secs(5))
        .await
        .unwrap_err();
    // The words sqlx said it with, which the runner keeps.
    let ConnectError::Migrate(refusal) = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(
        refusal.to_string(),
        "migration 1 was previously applied but has been modified"
    );
    scratch.teardown().await;
}

/// C12: an applied migration unknown to the binary is tolerated.
#[tokio::test]
async fn the_previous_release_starts_on_a_schema_a_newer_release_migrated_c12() {
    let scratch = ScratchStore::create().await;
    // What a newer release leaves behind: one more applied migration.
    psql(
        &scratch.database,
        "insert into _sqlx_migrations \
             (version, description, success, checksum, execution_time) \
         values (9999, 'from a newer release', true, '\\x00', 0)",
    )
    .await;

    let started =
        PostgresStore::connect(&scratch.url(), one_connection(), Duration::from_secs(5)).await;
    assert!(started.is_ok(), "{:?}", started.err());
    started.unwrap().close().await;
    scratch.teardown().await;
}

/// A SQLite file with a store's schema, closed, and a connection to it.
async fn migrated_sqlite_file() -> (tempfile::TempDir, PathBuf, rusqlite::Connection) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("items.db");
    SqliteStore::open(&path, SqliteSettings::default())
        .await
        .unwrap()
        .close()
        .await;
    let connection = rusqlite::Connection::open(&path).unwrap();
    (directory, path, connection)
}

#[tokio::test]
async fn the_sqlite_store_refuses_a_file_where_an_edited_migration_was_applied() {
    let (_directory, path, connection) = migrated_sqlite_file().await;
    connection
        .execute_batch("update _sqlx_migrations set checksum = x'00' where version = 1")
        .unwrap();
    drop(connection);

    let refused = SqliteStore::open(&path, SqliteSettings::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            OpenError::Migrate(sqlite::MigrateError::VersionMismatch(1))
        ),
        "{refused:?}"
    );
}

/// C12: an applied migration unknown to the binary is tolerated alike on
/// every store.
#[tokio::test]
async fn the_previous_release_starts_on_a_sqlite_file_a_newer_release_migrated_c12() {
    let (_directory, path, connection) = migrated_sqlite_file().await;
    // What a newer release leaves behind: one more applied migration.
    connection
        .execute_batch(
            "insert into _sqlx_migrations \
                 (version, description, success, checksum, execution_time) \
             values (9999, 'from a newer release', true, x'00', 0)",
        )
        .unwrap();
    drop(connection);

    let started = SqliteStore::open(&path, SqliteSettings::default()).await;
    assert!(started.is_ok(), "{:?}", started.err());
    started.unwrap().close().await;
}
