//! The SQLite executor against sqlx's own records: a new file, a file sqlx
//! migrated, and each refusal and tolerance of [`super::apply`].

#![allow(clippy::unwrap_used)]

use rusqlite::Connection;

use super::*;

fn memory() -> Connection {
    Connection::open_in_memory().unwrap()
}

/// A row of `_sqlx_migrations`: version, description, success, checksum,
/// execution time.
type Row = (i64, String, bool, Vec<u8>, i64);

fn rows(connection: &Connection) -> Vec<Row> {
    let mut statement = connection
        .prepare(
            "select version, description, success, checksum, execution_time \
             from _sqlx_migrations order by version",
        )
        .unwrap();
    statement
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn tables(connection: &Connection) -> Vec<String> {
    let mut statement = connection
        .prepare("select name from sqlite_schema where type = 'table' order by name")
        .unwrap();
    statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// What sqlx 0.8's runner leaves in a file it migrated: its table, each
/// migration's SQL, and each row as its `apply` writes it (`TRUE`, the
/// checksum bound as a blob, -1, then the time in nanoseconds).
fn migrated_by_sqlx(connection: &Connection, migrations: &[Migration]) {
    connection.execute_batch(CREATE_TABLE).unwrap();
    for migration in migrations {
        connection.execute_batch("BEGIN").unwrap();
        connection.execute_batch(migration.sql).unwrap();
        connection
            .execute(
                INSERT_ROW,
                rusqlite::params![
                    migration.version,
                    migration.description,
                    migration.checksum()
                ],
            )
            .unwrap();
        connection.execute_batch("COMMIT").unwrap();
        connection
            .execute(
                "UPDATE _sqlx_migrations SET execution_time = ?1 WHERE version = ?2",
                rusqlite::params![1_234_567_i64, migration.version],
            )
            .unwrap();
    }
}

#[test]
fn a_new_file_gets_every_migration_recorded_as_sqlx_records_it() {
    let mut connection = memory();

    run_sqlite(&mut connection).unwrap();

    let recorded = rows(&connection);
    assert_eq!(recorded.len(), SQLITE.len());
    for (row, migration) in recorded.iter().zip(SQLITE) {
        assert_eq!(row.0, migration.version);
        assert_eq!(row.1, migration.description);
        assert!(row.2, "success");
        assert_eq!(row.3, migration.checksum());
        assert!(row.4 >= 0, "the time it took, in nanoseconds: {}", row.4);
    }
    let (checksum_type, installed_on): (String, String) = connection
        .query_row(
            "select typeof(checksum), installed_on from _sqlx_migrations where version = 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(checksum_type, "blob");
    assert_eq!(
        installed_on.len(),
        "2026-01-01 00:00:00".len(),
        "{installed_on}"
    );
    for table in ["items", "products", "users", "item_keys", "product_keys"] {
        assert!(
            tables(&connection).iter().any(|name| name == table),
            "{table}"
        );
    }
}

#[test]
fn a_second_run_applies_nothing() {
    let mut connection = memory();
    assert_eq!(run_sqlite(&mut connection).unwrap(), SQLITE.len());
    let first = rows(&connection);

    assert_eq!(run_sqlite(&mut connection).unwrap(), 0, "applied nothing");

    assert_eq!(rows(&connection), first);
}

#[test]
fn a_file_migrated_by_sqlx_is_accepted_as_it_is() {
    let mut connection = memory();
    migrated_by_sqlx(&connection, SQLITE);
    let before = rows(&connection);

    run_sqlite(&mut connection).unwrap();

    assert_eq!(rows(&connection), before, "nothing applied again");
}

#[test]
fn only_the_missing_migrations_are_applied_in_order() {
    let mut connection = memory();
    migrated_by_sqlx(&connection, &SQLITE[..1]);

    run_sqlite(&mut connection).unwrap();

    let versions: Vec<i64> = rows(&connection).iter().map(|row| row.0).collect();
    let known: Vec<i64> = SQLITE.iter().map(|migration| migration.version).collect();
    assert_eq!(versions, known);
    assert_eq!(rows(&connection)[0].4, 1_234_567, "sqlx's row left alone");
}

#[test]
fn a_migration_edited_after_it_was_applied_is_refused() {
    let mut connection = memory();
    run_sqlite(&mut connection).unwrap();
    connection
        .execute(
            "update _sqlx_migrations set checksum = x'00' where version = 1",
            [],
        )
        .unwrap();

    let refused = run_sqlite(&mut connection).unwrap_err();

    assert!(
        matches!(refused, MigrateError::VersionMismatch(1)),
        "{refused:?}"
    );
}

#[test]
fn a_migration_left_half_done_is_refused() {
    let mut connection = memory();
    run_sqlite(&mut connection).unwrap();
    connection
        .execute(
            "update _sqlx_migrations set success = false where version = 2",
            [],
        )
        .unwrap();

    let refused = run_sqlite(&mut connection).unwrap_err();

    assert!(matches!(refused, MigrateError::Dirty(2)), "{refused:?}");
}

#[test]
fn a_migration_a_newer_build_applied_is_tolerated_c12() {
    let mut connection = memory();
    run_sqlite(&mut connection).unwrap();
    connection
        .execute(
            "insert into _sqlx_migrations (version, description, success, checksum, execution_time) \
             values (9999, 'from a newer release', true, x'00', 0)",
            [],
        )
        .unwrap();

    run_sqlite(&mut connection).unwrap();

    assert_eq!(rows(&connection).len(), SQLITE.len() + 1);
}

#[test]
fn a_failing_migration_leaves_nothing_of_itself() {
    let mut connection = memory();
    let migrations = [
        Migration {
            version: 1,
            description: "good",
            sql: "create table good (x integer);",
        },
        Migration {
            version: 2,
            description: "bad",
            sql: "create table half (x integer); insert into missing values (1);",
        },
    ];

    let failed = apply(&mut connection, &migrations).unwrap_err();

    assert!(
        matches!(failed, MigrateError::Execute { version: 2, .. }),
        "{failed:?}"
    );
    assert_eq!(rows(&connection).len(), 1, "only the good one recorded");
    let tables = tables(&connection);
    assert!(tables.iter().any(|name| name == "good"), "{tables:?}");
    assert!(!tables.iter().any(|name| name == "half"), "{tables:?}");
}

#[test]
fn a_migration_another_process_recorded_meanwhile_is_not_applied_again() {
    let mut connection = memory();
    migrated_by_sqlx(&connection, SQLITE);
    let before = rows(&connection);

    // As if the first look had found it missing.
    apply_one(&mut connection, &SQLITE[0], &SQLITE[0].checksum()).unwrap();

    assert_eq!(rows(&connection), before);
}

#[test]
fn a_file_that_opts_out_of_the_transaction_runs_outside_one_as_sqlx_runs_it() {
    let mut connection = memory();
    // `VACUUM` fails inside a transaction: it passes only outside one.
    let migrations = [Migration {
        version: 1,
        description: "vacuum",
        sql: "-- no-transaction\nVACUUM;",
    }];

    apply(&mut connection, &migrations).unwrap();

    let recorded = rows(&connection);
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].3, migrations[0].checksum());
    assert!(recorded[0].4 >= 0, "the time it took: {}", recorded[0].4);
}
