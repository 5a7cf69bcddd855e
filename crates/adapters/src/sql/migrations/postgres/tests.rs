//! The PostgreSQL executor against a scratch database and against what
//! sqlx 0.8.6 records: an empty database, one sqlx migrated (its rows
//! written as sqlx writes them, checksums from `migrations/CHECKSUMS`),
//! each refusal and tolerance, and the advisory lock two runners share.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use items_testkit::postgres::{ScratchDatabase, test_database_url};
use tokio_postgres::{Client, NoTls};

use super::*;

/// sqlx-postgres 0.8.6's `ensure_migrations_table`, copied verbatim: the
/// table this runner creates must be the same.
const SQLX_CREATE_TABLE: &str = r#"
CREATE TABLE IF NOT EXISTS _sqlx_migrations (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMPTZ NOT NULL DEFAULT now(),
    success BOOLEAN NOT NULL,
    checksum BYTEA NOT NULL,
    execution_time BIGINT NOT NULL
);
                "#;

async fn scratch() -> ScratchDatabase {
    ScratchDatabase::create(&test_database_url()).await.unwrap()
}

/// A client of `database`, its connection driven by a task of its own.
async fn connect(database: &ScratchDatabase) -> Client {
    let (client, connection) = tokio_postgres::connect(&database.url(), NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// A row of `_sqlx_migrations`: version, description, success, checksum,
/// execution time, and when it was installed (as text, to compare).
type Row = (i64, String, bool, Vec<u8>, i64, String);

async fn rows(client: &Client) -> Vec<Row> {
    client
        .query(
            "select version, description, success, checksum, execution_time, \
                    installed_on::text \
             from _sqlx_migrations order by version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| {
            (
                row.get(0),
                row.get(1),
                row.get(2),
                row.get(3),
                row.get(4),
                row.get(5),
            )
        })
        .collect()
}

async fn tables(client: &Client) -> Vec<String> {
    client
        .query(
            "select table_name::text from information_schema.tables \
             where table_schema = 'public' order by 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// Whether another session could take the runner's lock now (the
/// session holding an advisory lock could take it again).
async fn lock_is_free(database: &ScratchDatabase) -> bool {
    let client = connect(database).await;
    let database = database_name(&client).await;
    let free: bool = client
        .query_one("select pg_try_advisory_lock($1)", &[&lock_id(&database)])
        .await
        .unwrap()
        .get(0);
    if free {
        client
            .execute("select pg_advisory_unlock($1)", &[&lock_id(&database)])
            .await
            .unwrap();
    }
    free
}

/// A migration file as sqlx resolves it, read from `migrations/`
/// independently of the embedded list: version, description, SQL, and
/// the checksum `CHECKSUMS` lists for it.
struct Released {
    version: i64,
    description: String,
    sql: String,
    checksum: Vec<u8>,
}

fn released() -> Vec<Released> {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let listed: BTreeMap<String, Vec<u8>> = std::fs::read_to_string(folder.join("CHECKSUMS"))
        .unwrap()
        .lines()
        .map(|line| {
            let (hex, file) = line.split_once("  ").unwrap();
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).unwrap())
                .collect();
            (file.to_owned(), bytes)
        })
        .collect();
    let mut files: Vec<Released> = listed
        .iter()
        .map(|(file, checksum)| {
            let (version, rest) = file.split_once('_').unwrap();
            Released {
                version: version.parse().unwrap(),
                description: rest.trim_end_matches(".sql").replace('_', " "),
                sql: std::fs::read_to_string(folder.join(file)).unwrap(),
                checksum: checksum.clone(),
            }
        })
        .collect();
    files.sort_by_key(|file| file.version);
    files
}

/// What sqlx 0.8.6's `Migrator::run` leaves in a database it migrated
/// with `files`: its table, then per file one transaction with the SQL
/// and its row (`TRUE`, the checksum, -1), then the time in nanoseconds.
async fn migrated_by_sqlx(client: &mut Client, files: &[Released]) {
    client.batch_execute(SQLX_CREATE_TABLE).await.unwrap();
    for file in files {
        let transaction = client.transaction().await.unwrap();
        transaction.batch_execute(&file.sql).await.unwrap();
        transaction
            .execute(
                "INSERT INTO _sqlx_migrations ( version, description, success, checksum, execution_time ) \
                 VALUES ( $1, $2, TRUE, $3, -1 )",
                &[&file.version, &file.description, &file.checksum],
            )
            .await
            .unwrap();
        transaction.commit().await.unwrap();
        client
            .execute(
                "UPDATE _sqlx_migrations SET execution_time = $1 WHERE version = $2",
                &[&1_234_567_i64, &file.version],
            )
            .await
            .unwrap();
    }
}

#[test]
fn the_lock_id_is_sqlx_s_for_the_database_name() {
    // CRC-32/ISO-HDLC's check value, and sqlx's ids, computed apart with
    // Python's `0x3d32ad9e * zlib.crc32(name)`.
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(lock_id("postgres"), 368_907_709_894_077_238);
    assert_eq!(lock_id("items"), 3_877_861_296_846_603_910);
    assert_eq!(
        lock_id("items_test_0123456789abcdef"),
        903_617_652_728_609_788
    );
    assert_eq!(lock_id("été"), 1_185_439_018_846_023_384);
    assert_eq!(lock_id(""), 0);
}

#[tokio::test]
async fn an_empty_database_gets_every_migration_recorded_as_sqlx_records_it() {
    let database = scratch().await;
    let mut client = connect(&database).await;

    run_postgres(&mut client).await.unwrap();

    let recorded = rows(&client).await;
    let files = released();
    assert_eq!(recorded.len(), files.len());
    for (row, file) in recorded.iter().zip(&files) {
        assert_eq!(row.0, file.version);
        assert_eq!(row.1, file.description);
        assert!(row.2, "success");
        assert_eq!(row.3, file.checksum, "migration {}", file.version);
        assert!(row.4 >= 0, "the time it took, in nanoseconds: {}", row.4);
    }
    let tables = tables(&client).await;
    for table in ["items", "products", "users", "item_tally", "item_keys"] {
        assert!(tables.iter().any(|name| name == table), "{table}");
    }
    assert!(lock_is_free(&database).await, "the lock is given back");
    database.drop().await;
}

#[tokio::test]
async fn the_table_is_the_one_sqlx_creates() {
    let database = scratch().await;
    let mut client = connect(&database).await;
    run_postgres(&mut client).await.unwrap();
    client
        .batch_execute("create schema by_sqlx; set search_path to by_sqlx")
        .await
        .unwrap();
    client.batch_execute(SQLX_CREATE_TABLE).await.unwrap();

    let columns = |schema: &'static str| {
        let client = &client;
        async move {
            client
                .query(
                    "select column_name::text, data_type::text, is_nullable::text, \
                            coalesce(column_default, '') \
                     from information_schema.columns \
                     where table_schema = $1 and table_name = '_sqlx_migrations' \
                     order by ordinal_position",
                    &[&schema],
                )
                .await
                .unwrap()
                .iter()
                .map(|row| {
                    (
                        row.get::<_, String>(0),
                        row.get::<_, String>(1),
                        row.get::<_, String>(2),
                        row.get::<_, String>(3),
                    )
                })
                .collect::<Vec<_>>()
        }
    };

    let ours = columns("public").await;
    assert_eq!(ours.len(), 6, "{ours:?}");
    assert_eq!(ours, columns("by_sqlx").await);
    database.drop().await;
}

#[tokio::test]
async fn a_second_run_applies_nothing() {
    let database = scratch().await;
    let mut client = connect(&database).await;
    assert_eq!(run_postgres(&mut client).await.unwrap(), POSTGRES.len());
    let first = rows(&client).await;

    assert_eq!(
        run_postgres(&mut client).await.unwrap(),
        0,
        "applied nothing"
    );

    assert_eq!(rows(&client).await, first);
    database.drop().await;
}

/// The previous build (sqlx) migrated the database: this one starts on
/// it as it is, and applies nothing again.
#[tokio::test]
async fn a_database_sqlx_migrated_is_accepted_as_up_to_date() {
    let database = scratch().await;
    let mut client = connect(&database).await;
    migrated_by_sqlx(&mut client, &released()).await;
    let before = rows(&client).await;

    run_postgres(&mut client).await.unwrap();

    assert_eq!(rows(&client).await, before, "nothing applied again");
    database.drop().await;
}

#[tokio::test]
async fn only_the_migrations_sqlx_had_not_applied_are_applied_in_order() {
    let database = scratch().await;
    let mut client = connect(&database).await;
    let files = released();
    migrated_by_sqlx(&mut client, &files[..2]).await;
    let by_sqlx = rows(&client).await;

    run_postgres(&mut client).await.unwrap();

    let recorded = rows(&client).await;
    let versions: Vec<i64> = recorded.iter().map(|row| row.0).collect();
    let known: Vec<i64> = files.iter().map(|file| file.version).collect();
    assert_eq!(versions, known);
    assert_eq!(recorded[..2], by_sqlx[..], "sqlx's rows left alone");
    database.drop().await;
}

/// C12: during a rolling upgrade the previous build must still start on
/// the schema a newer build migrated.
#[tokio::test]
async fn a_version_a_newer_build_applied_is_tolerated_c12() {
    let database = scratch().await;
    let mut client = connect(&database).await;
    run_postgres(&mut client).await.unwrap();
    client
        .batch_execute(
            "insert into _sqlx_migrations (version, description, success, checksum, execution_time) \
             values (9999, 'from a newer release', true, '\\x00', 0)",
        )
        .await
        .unwrap();

    run_postgres(&mut client).await.unwrap();

    assert_eq!(rows(&client).await.len(), POSTGRES.len() + 1);
    database.drop().await;
}

#[tokio::test]
async fn a_migration_edited_after_it_was_applied_is_refused_and_nothing_applied() {
    let database = scratch().await;
    let mut client = connect(&database).await;
    run_postgres(&mut client).await.unwrap();
    let last = POSTGRES.len() - 1;
    client
        .batch_execute(&format!(
            "update _sqlx_migrations set checksum = '\\x00' where version = 1; \
             delete from _sqlx_migrations where version = {}",
            POSTGRES[last].version
        ))
        .await
        .unwrap();

    let refused = run_postgres(&mut client).await.unwrap_err();

    assert!(
        matches!(refused, MigrateError::VersionMismatch(1)),
        "{refused:?}"
    );
    assert_eq!(
        rows(&client).await.len(),
        last,
        "the missing one not applied"
    );
    assert!(lock_is_free(&database).await, "the lock is given back");
    database.drop().await;
}

#[tokio::test]
async fn a_migration_left_half_done_is_refused() {
    let database = scratch().await;
    let mut client = connect(&database).await;
    run_postgres(&mut client).await.unwrap();
    client
        .batch_execute("update _sqlx_migrations set success = false where version = 2")
        .await
        .unwrap();

    let refused = run_postgres(&mut client).await.unwrap_err();

    assert!(matches!(refused, MigrateError::Dirty(2)), "{refused:?}");
    database.drop().await;
}

#[tokio::test]
async fn runners_started_together_apply_each_migration_once() {
    let database = scratch().await;
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(connect(&database).await);
    }

    let runs = clients.into_iter().map(|mut client| {
        tokio::spawn(async move {
            run_postgres(&mut client)
                .await
                .map(|applied| (applied, client))
        })
    });
    let mut finished = Vec::new();
    for run in runs.collect::<Vec<_>>() {
        // A runner that kept the lock would leave the others waiting.
        let run = tokio::time::timeout(Duration::from_secs(30), run).await;
        finished.push(run.expect("every runner finishes").unwrap().unwrap());
    }

    let recorded = rows(&finished[0].1).await;
    let versions: Vec<i64> = recorded.iter().map(|row| row.0).collect();
    let known: Vec<i64> = POSTGRES.iter().map(|migration| migration.version).collect();
    assert_eq!(versions, known);
    let applied: usize = finished.iter().map(|(applied, _)| applied).sum();
    assert_eq!(
        applied,
        POSTGRES.len(),
        "each counted by the one runner that applied it"
    );
    database.drop().await;
}

/// sqlx's runner takes this lock before it even creates its table: a
/// runner of this build waits for it, so the two never migrate at once.
#[tokio::test]
async fn a_runner_waits_while_sqlx_s_lock_is_held() {
    let database = scratch().await;
    let holder = connect(&database).await;
    let lock = lock_id(&database_name(&holder).await);
    holder
        .execute("select pg_advisory_lock($1)", &[&lock])
        .await
        .unwrap();
    let mut client = connect(&database).await;

    let run = tokio::spawn(async move { run_postgres(&mut client).await });
    tokio::time::sleep(Duration::from_millis(300)).await;

    assert!(!run.is_finished(), "the runner did not wait for the lock");
    assert!(
        !tables(&holder)
            .await
            .iter()
            .any(|name| name == "_sqlx_migrations"),
        "nothing done before the lock is taken"
    );
    holder
        .execute("select pg_advisory_unlock($1)", &[&lock])
        .await
        .unwrap();
    run.await.unwrap().unwrap();
    assert_eq!(rows(&holder).await.len(), POSTGRES.len());
    database.drop().await;
}

async fn database_name(client: &Client) -> String {
    client
        .query_one("select current_database()", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_failing_migration_leaves_nothing_of_itself_and_gives_the_lock_back() {
    let database = scratch().await;
    let mut client = connect(&database).await;
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

    let failed = apply(&mut client, &migrations).await.unwrap_err();

    assert!(
        matches!(failed, MigrateError::Execute { version: 2, .. }),
        "{failed:?}"
    );
    assert_eq!(rows(&client).await.len(), 1, "only the good one recorded");
    let tables = tables(&client).await;
    assert!(tables.iter().any(|name| name == "good"), "{tables:?}");
    assert!(!tables.iter().any(|name| name == "half"), "{tables:?}");
    assert!(lock_is_free(&database).await, "the lock is given back");
    database.drop().await;
}

#[tokio::test]
async fn a_file_that_opts_out_of_the_transaction_runs_outside_one_as_sqlx_runs_it() {
    let database = scratch().await;
    let mut client = connect(&database).await;
    // `create index concurrently` fails inside a transaction block.
    let migrations = [
        Migration {
            version: 1,
            description: "table",
            sql: "create table t (x integer);",
        },
        Migration {
            version: 2,
            description: "index",
            sql: "-- no-transaction\ncreate index concurrently t_x on t (x);",
        },
    ];

    apply(&mut client, &migrations).await.unwrap();

    let recorded = rows(&client).await;
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[1].3, migrations[1].checksum());
    assert!(recorded[1].4 >= 0, "the time it took: {}", recorded[1].4);
    database.drop().await;
}

/// C1: a failed start is one line to the operator, the server's `DETAIL`
/// (which key is duplicated) on it.
#[tokio::test]
async fn a_failed_migration_is_told_on_one_line_with_the_server_s_detail() {
    let database = scratch().await;
    let mut client = connect(&database).await;
    let migrations = [Migration {
        version: 1,
        description: "unique",
        sql: "create table u (x integer); insert into u values (1), (1); \
              create unique index u_x on u (x);",
    }];

    let failed = apply(&mut client, &migrations).await.unwrap_err();

    let line = crate::report::ErrorChain(&failed).to_string();
    assert!(!line.contains('\n'), "{line:?}");
    assert!(
        line.starts_with(
            "while executing migration 1: db error: ERROR: could not create unique index"
        ),
        "{line}"
    );
    assert!(
        line.contains("; DETAIL: Key (x)=(1) is duplicated."),
        "{line}"
    );
    database.drop().await;
}
