//! `items-service migrate` (C1, `docs/operations.md` "Upgrade and roll
//! back"): the built binary applies the schema to a scratch PostgreSQL
//! database, or to a new SQLite file, and exits 0 saying how many
//! migrations it applied, does nothing the second time and says so, and
//! otherwise exits with one line saying why.

use std::time::{Duration, Instant};

use items_testkit::postgres::{ScratchDatabase, test_database_url, test_server_address};

use crate::helpers::*;

/// The tables of the public schema, sorted, and how many migrations are
/// recorded as applied (in sqlx's `_sqlx_migrations`).
async fn schema_of(database: &ScratchDatabase) -> (Vec<String>, i64) {
    let (client, connection) = tokio_postgres::connect(&database.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    let tables: Vec<String> = client
        .query(
            "select table_name::text from information_schema.tables \
             where table_schema = 'public' and table_type = 'BASE TABLE' order by 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let applied: i64 = if tables.iter().any(|table| table == "_sqlx_migrations") {
        client
            .query_one("select count(*) from _sqlx_migrations where success", &[])
            .await
            .unwrap()
            .get(0)
    } else {
        0
    };
    drop(client);
    connection.await.unwrap().unwrap();
    (tables, applied)
}

#[tokio::test]
async fn migrate_applies_the_schema_and_a_second_run_changes_nothing_c1() {
    let database = ScratchDatabase::create(&test_database_url()).await.unwrap();
    let url = database.url();
    assert_eq!(schema_of(&database).await, (vec![], 0));

    let (status, stdout, stderr) = run_to_exit(&[("DATABASE_URL", &url)], &["migrate"]);

    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "");
    assert_eq!(stdout.lines().count(), 1, "{stdout:?}");
    let (tables, applied) = schema_of(&database).await;
    assert!(
        stdout.starts_with(&format!(
            "items-service: applied {applied} migrations: the schema is up to date: PostgreSQL "
        )),
        "{stdout:?}"
    );
    for table in ["items", "products", "users", "_sqlx_migrations"] {
        assert!(
            tables.iter().any(|name| name == table),
            "{table} in {tables:?}"
        );
    }
    assert!(applied >= 2, "{applied} migrations recorded");

    let (again, stdout_again, stderr) = run_to_exit(&[("DATABASE_URL", &url)], &["migrate"]);

    assert_eq!(again.code(), Some(0), "{stderr}");
    assert_eq!(schema_of(&database).await, (tables, applied), "a no-op");
    assert_eq!(
        stdout_again,
        stdout.replacen(
            &format!("applied {applied} migrations: the schema is up to date"),
            "the schema was already up to date",
            1
        ),
        "the second run says it applied nothing"
    );
    database.drop().await;
}

#[tokio::test]
async fn a_service_started_after_migrate_serves_from_the_migrated_schema_c1() {
    let database = ScratchDatabase::create(&test_database_url()).await.unwrap();
    let url = database.url();
    let (status, _, stderr) = run_to_exit(&[], &["--database-url", &url, "migrate"]);
    assert_eq!(status.code(), Some(0), "{stderr}");

    let service = Service::start(&[("DATABASE_URL", &url)]).await;

    assert_eq!(service.client.get("/users").await.status(), 200);
    drop(service);
    database.drop().await;
}

/// How long `migrate` waits for an unreachable server, as the README says.
const MIGRATE_PATIENCE: Duration = Duration::from_secs(3);

#[test]
fn an_unreachable_server_exits_1_with_one_line_after_its_patience_c1() {
    // Port 1 on loopback: nothing listens, so every attempt is refused.
    let started = Instant::now();

    let (status, stdout, stderr) = run_to_exit(
        &[("DATABASE_URL", "postgres://postgres@127.0.0.1:1/items")],
        &["migrate"],
    );

    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(
        stderr.starts_with("items-service: the database is unreachable after "),
        "{stderr:?}"
    );
    assert!(
        started.elapsed() >= MIGRATE_PATIENCE,
        "migrate gave up after {:?}, before its patience",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "migrate waited {:?}",
        started.elapsed()
    );
}

/// Loopback sockets that listen and never accept, and their `host:port`:
/// the kernel completes each TCP handshake, and the startup message is
/// never answered (a host that hangs).
fn hanging_hosts(count: usize) -> (Vec<std::net::TcpListener>, Vec<String>) {
    let listeners: Vec<std::net::TcpListener> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let hosts = listeners
        .iter()
        .map(|listener| format!("127.0.0.1:{}", listener.local_addr().unwrap().port()))
        .collect();
    (listeners, hosts)
}

/// `database`'s URL with `hosts` in place of its host.
fn on_hosts(database: &ScratchDatabase, hosts: &[String]) -> String {
    let config: tokio_postgres::Config = database.url().parse().unwrap();
    format!(
        "postgres://{}@{}/{}",
        config.get_user().unwrap_or("postgres"),
        hosts.join(","),
        database.name()
    )
}

#[tokio::test]
async fn a_good_host_listed_after_fourteen_that_hang_is_reached_and_migrated_c1_c12() {
    let database = ScratchDatabase::create(&test_database_url()).await.unwrap();
    let (listeners, mut hosts) = hanging_hosts(14);
    hosts.push(test_server_address().await.to_string());
    let url = on_hosts(&database, &hosts);
    let started = Instant::now();

    let (status, stdout, stderr) = run_to_exit(&[("DATABASE_URL", &url)], &["migrate"]);

    let took = started.elapsed();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let every_migration = postgres_migrations();
    assert!(
        stdout.starts_with(&format!(
            "items-service: applied {every_migration} migrations: the schema is up to date: \
             PostgreSQL "
        )),
        "{stdout:?}"
    );
    assert!(took < Duration::from_secs(20), "migrated after {took:?}");
    eprintln!("migrate reached the 15th host and migrated in {took:?}");
    let (tables, _) = schema_of(&database).await;
    assert!(tables.iter().any(|table| table == "items"), "{tables:?}");
    drop(listeners);
    database.drop().await;
}

#[test]
fn when_every_host_hangs_migrate_exits_1_naming_each_host_and_why_c1_c12() {
    let (listeners, hosts) = hanging_hosts(15);
    let url = format!("postgres://postgres@{}/items", hosts.join(","));
    let started = Instant::now();

    let (status, _, stderr) = run_to_exit(&[("DATABASE_URL", &url)], &["migrate"]);

    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(
        stderr.starts_with(
            "items-service: the database is unreachable after 3.0 s: no host of the database \
             URL gave a session: "
        ),
        "{stderr:?}"
    );
    for host in &hosts {
        assert!(
            stderr.contains(&format!("{host}: no answer within ")),
            "{host} in {stderr:?}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(listeners);
}

#[test]
fn without_a_database_url_there_is_nothing_to_migrate_exit_2_c1() {
    let (status, stdout, stderr) = run_to_exit(&[], &["migrate"]);

    assert_eq!(status.code(), Some(2));
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "items-service: migrate needs DATABASE_URL (--database-url): \
         in memory there is no schema to migrate\n"
    );
}

#[tokio::test]
async fn migrate_creates_and_migrates_a_sqlite_file_c1_c12() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("items.db");
    let url = format!("sqlite://{}", file.display());

    let (status, stdout, stderr) = run_to_exit(&[("DATABASE_URL", &url)], &["migrate"]);

    assert_eq!(status.code(), Some(0), "{stderr}");
    let connection =
        rusqlite::Connection::open_with_flags(&file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let tables: Vec<String> = connection
        .prepare("select name from sqlite_master where type = 'table' order by 1")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let applied: i64 = connection
        .query_row(
            "select count(*) from _sqlx_migrations where success",
            [],
            |row| row.get(0),
        )
        .unwrap();
    connection.close().map_err(|(_, error)| error).unwrap();
    for table in ["items", "products", "users"] {
        assert!(
            tables.iter().any(|name| name == table),
            "{table} in {tables:?}"
        );
    }
    assert!(applied >= 2, "{applied} migrations recorded");
    assert_eq!(
        stdout,
        format!(
            "items-service: applied {applied} migrations: the schema is up to date: sqlite path={}\n",
            file.display()
        )
    );

    let (again, stdout, stderr) = run_to_exit(&[("DATABASE_URL", &url)], &["migrate"]);

    assert_eq!(again.code(), Some(0), "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "items-service: the schema was already up to date: sqlite path={}\n",
            file.display()
        )
    );
}

/// How many migrations the PostgreSQL store has: the `.sql` files of
/// `crates/adapters/migrations`, which a fresh database gets every one of.
fn postgres_migrations() -> usize {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters/migrations");
    std::fs::read_dir(&folder)
        .unwrap_or_else(|error| panic!("{}: {error}", folder.display()))
        .filter(|entry| {
            entry
                .as_ref()
                .is_ok_and(|entry| entry.path().extension().is_some_and(|ext| ext == "sql"))
        })
        .count()
}
