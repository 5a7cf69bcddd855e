//! The budget of one store operation, `DATABASE_STATEMENT_TIMEOUT_MS`
//! (C1, C12), seen through the binary: a PostgreSQL server that stalls
//! (frozen behind the kit's proxy: no reset, no refusal), a lock another
//! session holds on PostgreSQL, and another process holding the SQLite
//! file's write lock. Each request gets 503 with `Retry-After` within about
//! the budget, what it was writing is never stored, and the service
//! recovers by itself.
//!
//! Timings are bounded from above only, with a margin a loaded 2-core
//! machine keeps: the bound is the budget plus [`MARGIN`], against the
//! freeze's (or the lock's) whole length without a budget.

use std::future::Future;
use std::time::{Duration, Instant};

use items_testkit::postgres::{ScratchDatabase, test_database_url, test_server_address};
use items_testkit::tcp_proxy::{TcpProxy, Trap};
use reqwest::Response;
use serde_json::{Value, json};
use tokio_postgres::Client as PgClient;
use tokio_postgres::types::ToSql;

use crate::support::{Client, assert_problem, header};

use crate::helpers::*;

/// The budget the services under test run with.
const BUDGET: Duration = Duration::from_millis(1000);
const BUDGET_MS: &str = "1000";
/// What a loaded machine may add to the budget before the 503 is out.
const MARGIN: Duration = Duration::from_secs(2);

/// Sends `request` and waits for its answer at most the budget plus the
/// margin (a failure, not a hang, without a budget); the answer and how
/// long it took.
async fn timed(what: &str, request: impl Future<Output = Response>) -> (Response, Duration) {
    let started = Instant::now();
    let response = tokio::time::timeout(BUDGET + MARGIN, request)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within the budget + {MARGIN:?}"));
    (response, started.elapsed())
}

/// A 503 problem with `Retry-After`, answered within the budget + margin.
async fn assert_over_budget(what: &str, (response, took): (Response, Duration)) {
    // The figure docs/security.md quotes (`--nocapture` shows it).
    eprintln!("{what}: {} after {took:?}", response.status());
    assert_eq!(response.status(), 503, "{what}");
    assert!(
        !header(&response, "retry-after").is_empty(),
        "{what}: Retry-After"
    );
    assert!(took < BUDGET + MARGIN, "{what} took {took:?}");
    let body = assert_problem(response, 503).await;
    assert!(
        !body.to_string().to_lowercase().contains("select"),
        "{what}: no SQL in the body (C6): {body}"
    );
}

/// Answers with what each request was (`POST behind the lock`).
type Answers = Vec<(String, (Response, Duration))>;

/// A POST of `body` to `/items` and a PUT of it to `/items/1`, sent
/// together, each [`timed`].
async fn post_and_put(client: &Client, when: &str, body: &Value) -> Answers {
    let (post, put) = (format!("POST {when}"), format!("PUT {when}"));
    let (posted, replaced) = tokio::join!(
        timed(&post, client.post_json("/items", body)),
        timed(&put, client.put_json("/items/1", body)),
    );
    vec![(post, posted), (put, replaced)]
}

/// A GET of item 1 sent together with [`post_and_put`].
async fn get_post_and_put(client: &Client, when: &str, body: &Value) -> Answers {
    let get = format!("GET {when}");
    let (got, mut answers) = tokio::join!(
        timed(&get, client.get("/items/1")),
        post_and_put(client, when, body),
    );
    answers.insert(0, (get, got));
    answers
}

/// [`assert_over_budget`] for each of `answers`.
async fn assert_all_over_budget(answers: Answers) {
    for (what, answer) in answers {
        assert_over_budget(&what, answer).await;
    }
}

/// The URL of `database` through the proxy on `port`.
fn through(database: &ScratchDatabase, port: u16) -> String {
    let config: tokio_postgres::Config = database.url().parse().unwrap();
    format!(
        "postgres://{}@127.0.0.1:{port}/{}",
        config.get_user().unwrap_or("postgres"),
        database.name()
    )
}

/// Rows of `table` whose `column` is `value`, read straight from the
/// database: names are `bytea`, keys `text`.
async fn rows_where<T>(database: &ScratchDatabase, table: &str, column: &str, value: T) -> i64
where
    T: ToSql + Sync,
{
    let connection = database.client().await.unwrap();
    let count = connection
        .query_one(
            &format!("select count(*) from {table} where {column} = $1"),
            &[&value],
        )
        .await
        .unwrap()
        .get(0);
    drop(connection);
    count
}

/// Items named `name`, read straight from the database.
async fn rows_named(database: &ScratchDatabase, name: &str) -> i64 {
    rows_where(database, "items", "name", name.as_bytes()).await
}

/// A session of `database` that holds `table` locked (access exclusive, in
/// an open transaction) until it runs `rollback`.
async fn lock_table(database: &ScratchDatabase, table: &str) -> PgClient {
    let holder = database.client().await.unwrap();
    holder.batch_execute("begin").await.unwrap();
    holder
        .batch_execute(&format!("lock table {table} in access exclusive mode"))
        .await
        .unwrap();
    holder
}

/// The service on `url` under the budget (no rate limit, `more` settings
/// besides), with item 1 `kept` stored.
async fn start_with_kept_item(url: &str, more: &[(&str, &str)]) -> Service {
    let mut settings = vec![
        ("DATABASE_URL", url),
        ("DATABASE_STATEMENT_TIMEOUT_MS", BUDGET_MS),
        ("RATE_LIMIT_MAX", "0"),
    ];
    settings.extend_from_slice(more);
    let service = Service::start(&settings).await;
    service.client.create_item("kept").await;
    service
}

/// The service on a fresh SQLite file in `directory`, [`start_with_kept_item`],
/// and another process's connection holding the file's write lock until it
/// runs `ROLLBACK`.
async fn sqlite_behind_a_lock(directory: &tempfile::TempDir) -> (Service, rusqlite::Connection) {
    let file = directory.path().join("items.db");
    let url = format!("sqlite://{}", file.display());
    let service = start_with_kept_item(&url, &[]).await;
    let holder = rusqlite::Connection::open(&file).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    (service, holder)
}

/// Sends `request` half a budget from now, queued behind what was sent
/// before, so it waits for the writer as well as for the lock: still one
/// budget in all; [`timed`].
async fn queued(what: &str, request: impl Future<Output = Response>) -> (Response, Duration) {
    tokio::time::sleep(BUDGET / 2).await;
    timed(what, request).await
}

/// Waits (at most 5 s) until `sessions` sessions of `database` wait for a
/// lock: the requests have reached the server. Whether they did.
async fn wait_for_lock_waiters(database: &ScratchDatabase, sessions: i64) -> bool {
    let observer = database.client().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let waiting: i64 = observer
            .query_one(
                "select count(*) from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting >= sessions {
            drop(observer);
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

/// Asks for item 1 until it is served again (at most 10 s).
async fn recovered(service: &Service) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = service.client.get("/items/1").await;
        if response.status() == 200 {
            return response.json().await.unwrap();
        }
        assert!(Instant::now() < deadline, "not recovered in 10 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_frozen_postgres_gets_503_within_the_budget_in_flight_and_new_and_recovers_c12() {
    let database = ScratchDatabase::create(&test_database_url()).await.unwrap();
    let proxy = TcpProxy::start(test_server_address().await).await;
    let url = through(&database, proxy.port());
    let service = start_with_kept_item(&url, &[]).await;

    // Requests in flight when the server stalls: held at the server by a
    // lock taken outside the proxy, then frozen while they wait, then the
    // lock let go, so the server runs them and their answers are stuck.
    let holder = lock_table(&database, "items").await;
    let client = &service.client;
    let in_flight_body = json!({"name": "in flight"});
    let in_flight = get_post_and_put(client, "in flight", &in_flight_body);
    let freeze = async {
        let waiting = wait_for_lock_waiters(&database, 3).await;
        proxy.freeze();
        holder.batch_execute("rollback").await.unwrap();
        waiting
    };
    let (answers, waiting) = tokio::join!(in_flight, freeze);
    assert!(waiting, "the three requests were waiting at the server");
    assert_all_over_budget(answers).await;

    // Requests that arrive while the server stalls.
    let while_frozen = json!({"name": "while frozen"});
    assert_all_over_budget(get_post_and_put(client, "while frozen", &while_frozen).await).await;
    service
        .log_once_it_contains("DATABASE_STATEMENT_TIMEOUT_MS")
        .await;

    proxy.thaw();
    assert_eq!(
        recovered(&service).await,
        json!({"id": 1, "name": "kept"}),
        "no PUT answered 503 was applied"
    );
    let created = service.client.create_item("after the thaw").await;
    assert_eq!(created["name"], "after the thaw");
    // Time for anything the freeze held back to reach the server.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rows_named(&database, "in flight").await, 0);
    assert_eq!(rows_named(&database, "while frozen").await, 0);
    assert_eq!(rows_named(&database, "kept").await, 1);
    drop(service);
    database.drop().await;
}

#[tokio::test]
async fn the_full_listing_of_a_frozen_postgres_gets_503_not_a_cut_200_c12() {
    let database = ScratchDatabase::create(&test_database_url()).await.unwrap();
    let proxy = TcpProxy::start(test_server_address().await).await;
    let url = through(&database, proxy.port());
    let service = start_with_kept_item(&url, &[]).await;

    // The server stalls once the listing's snapshot and count are read, as
    // its first batch of rows is asked for.
    proxy.trap(
        b"select id, name from items where id > $1 order by id limit $2",
        Trap::FreezeAfter,
    );
    let answer = timed("GET /items", service.client.get("/items")).await;
    assert!(proxy.trap_sprung(), "the first batch was asked for");
    assert_over_budget("GET /items stalled before its first rows", answer).await;

    proxy.thaw();
    recovered(&service).await;
    assert_eq!(
        service.client.list("/items").await,
        [json!({"id": 1, "name": "kept"})]
    );
    drop(service);
    database.drop().await;
}

#[tokio::test]
async fn a_lock_held_elsewhere_on_postgres_gets_503_within_the_budget_and_writes_nothing_c12() {
    let database = ScratchDatabase::create(&test_database_url()).await.unwrap();
    let url = database.url();
    let service = start_with_kept_item(&url, &[]).await;

    let holder = lock_table(&database, "items").await;
    let client = &service.client;
    let behind_the_lock = json!({"name": "behind the lock"});
    assert_all_over_budget(post_and_put(client, "behind the lock", &behind_the_lock).await).await;

    holder.batch_execute("rollback").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rows_named(&database, "behind the lock").await, 0);
    assert_eq!(recovered(&service).await, json!({"id": 1, "name": "kept"}));
    let created = service.client.create_item("after the lock").await;
    assert_eq!(created["name"], "after the lock");
    drop(holder);
    drop(service);
    database.drop().await;
}

#[tokio::test]
async fn another_process_holding_the_sqlite_write_lock_gets_503_within_the_budget_and_nothing_stored_c12()
 {
    let directory = tempfile::tempdir().unwrap();
    let (service, holder) = sqlite_behind_a_lock(&directory).await;
    let client = &service.client;
    let behind_the_lock = json!({"name": "behind the lock"});
    let queued_body = json!({"name": "queued"});
    let (answers, late) = tokio::join!(
        post_and_put(client, "behind the lock", &behind_the_lock),
        queued(
            "POST queued behind the lock",
            client.post_json("/items", &queued_body)
        ),
    );
    assert_all_over_budget(answers).await;
    assert_over_budget("POST queued behind the lock", late).await;
    // Readers do not wait for the write lock (WAL).
    assert_eq!(recovered(&service).await, json!({"id": 1, "name": "kept"}));

    holder.execute_batch("ROLLBACK").unwrap();
    holder.close().map_err(|(_, error)| error).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let listed = service.client.list("/items").await;
    assert_eq!(listed, [json!({"id": 1, "name": "kept"})]);
    let created = service.client.create_item("after the lock").await;
    assert_eq!(created["name"], "after the lock");
}

mod keyed;
