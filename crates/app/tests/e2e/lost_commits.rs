//! A 503 tells the truth about the write (C12): once a `COMMIT` is sent,
//! the service answers by what PostgreSQL did, not by its own clock. The
//! binary runs on a scratch database behind the kit's proxy, which loses a
//! commit's answer, loses the commit itself, or freezes right after it; and
//! under load with a budget so small that it fires while commits are in
//! flight, no request answered 503 was written.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use items_testkit::postgres::{ScratchDatabase, test_database_url, test_server_address};
use items_testkit::tcp_proxy::{TcpProxy, Trap};
use serde_json::{Value, json};
use tokio_postgres::Client as PgClient;

use crate::helpers::*;
use crate::support::{Client, assert_problem, assert_problem_of_type, header};

/// PostgreSQL's `commit` as the service sends it: a simple query message.
const COMMIT: &[u8] = b"Q\0\0\0\x0bcommit\0";

/// The budget of the services under test, and how long an answer may take:
/// the commit's wait past the budget and the fate's lookup (a second each
/// at most), and what a loaded machine adds.
const BUDGET_MS: &str = "1000";
const ANSWER_WITHIN: Duration = Duration::from_secs(6);

/// The URL of `database` through the proxy on `port`.
fn through(database: &ScratchDatabase, port: u16) -> String {
    let config: tokio_postgres::Config = database.url().parse().unwrap();
    format!(
        "postgres://{}@127.0.0.1:{port}/{}",
        config.get_user().unwrap_or("postgres"),
        database.name()
    )
}

/// A scratch database, a proxy in front of the test server, and the binary
/// on the database through the proxy under `settings` (no rate limit).
async fn behind_a_proxy(settings: &[(&str, &str)]) -> (ScratchDatabase, TcpProxy, Service) {
    let database = ScratchDatabase::create(&test_database_url()).await.unwrap();
    let proxy = TcpProxy::start(test_server_address().await).await;
    let url = through(&database, proxy.port());
    let mut all = vec![("DATABASE_URL", url.as_str()), ("RATE_LIMIT_MAX", "0")];
    all.extend_from_slice(settings);
    let service = Service::start(&all).await;
    (database, proxy, service)
}

/// Items named `name`, read straight from the database.
async fn rows_named(database: &ScratchDatabase, name: &str) -> i64 {
    let connection = database.client().await.unwrap();
    let count = connection
        .query_one(
            "select count(*) from items where name = $1",
            &[&name.as_bytes()],
        )
        .await
        .unwrap()
        .get(0);
    drop(connection);
    count
}

/// The name item `id` holds now, read straight from the database.
async fn name_of(connection: &PgClient, id: i64) -> String {
    let name: Vec<u8> = connection
        .query_one("select name from items where id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    String::from_utf8(name).unwrap()
}

#[tokio::test]
async fn a_create_whose_commit_answer_is_lost_is_answered_by_what_postgres_committed_c12() {
    let (database, proxy, service) =
        behind_a_proxy(&[("DATABASE_STATEMENT_TIMEOUT_MS", BUDGET_MS)]).await;

    proxy.trap(COMMIT, Trap::LoseAnswer);
    let started = Instant::now();
    let response = service
        .client
        .post_json("/items", &json!({"name": "answer lost"}))
        .await;
    let took = started.elapsed();

    assert!(proxy.trap_sprung(), "the commit went through the proxy");
    assert_eq!(response.status(), 201, "PostgreSQL committed it");
    assert!(took < ANSWER_WITHIN, "answered after {took:?}");
    let created: Value = response.json().await.unwrap();
    assert_eq!(created["name"], "answer lost");
    assert_eq!(rows_named(&database, "answer lost").await, 1);
    service
        .log_once_it_contains("PostgreSQL says it committed")
        .await;
    drop(service);
    database.drop().await;
}

#[tokio::test]
async fn a_replace_whose_commit_never_reached_postgres_is_rolled_back_and_answered_503_c12() {
    let (database, proxy, service) =
        behind_a_proxy(&[("DATABASE_STATEMENT_TIMEOUT_MS", BUDGET_MS)]).await;
    service.client.create_item("kept").await;

    proxy.trap(COMMIT, Trap::LoseMessage);
    let started = Instant::now();
    let response = service
        .client
        .put_json("/items/1", &json!({"name": "never committed"}))
        .await;
    let took = started.elapsed();

    assert!(proxy.trap_sprung(), "the commit went to the proxy");
    assert_eq!(response.status(), 503, "the transaction was rolled back");
    assert!(!header(&response, "retry-after").is_empty());
    assert!(took < ANSWER_WITHIN, "answered after {took:?}");
    assert_problem(response, 503).await;
    assert_eq!(rows_named(&database, "never committed").await, 0);
    assert_eq!(rows_named(&database, "kept").await, 1);
    drop(service);
    database.drop().await;
}

#[tokio::test]
async fn a_commit_whose_fate_cannot_be_learned_is_answered_504_and_a_keyed_retry_replays_it_c7_c12()
{
    let (database, proxy, service) =
        behind_a_proxy(&[("DATABASE_STATEMENT_TIMEOUT_MS", BUDGET_MS)]).await;
    let body = json!({"name": "fate unknown"});

    // The commit reaches the server, then the proxy freezes: its answer and
    // every lookup of its fate are held.
    proxy.trap(COMMIT, Trap::FreezeAfter);
    let started = Instant::now();
    let response = service.client.post_keyed("/items", "key-1", &body).await;
    let took = started.elapsed();

    assert_eq!(response.status(), 504);
    assert!(took < ANSWER_WITHIN, "answered after {took:?}");
    assert!(
        header(&response, "retry-after").is_empty(),
        "no Retry-After: a blind retry could write it twice"
    );
    assert_problem_of_type(response, 504, "outcome-unknown").await;

    proxy.thaw();
    assert_eq!(
        rows_named(&database, "fate unknown").await,
        1,
        "the write was applied, as the 504 allowed"
    );
    let retried = service.client.post_keyed("/items", "key-1", &body).await;
    assert_eq!(retried.status(), 201, "the first response, again (C7)");
    let replayed: Value = retried.json().await.unwrap();
    assert_eq!(replayed["name"], "fate unknown");
    assert_eq!(
        rows_named(&database, "fate unknown").await,
        1,
        "nothing new"
    );
    drop(service);
    database.drop().await;
}

/// What one writer saw: its creates and replaces answered 503, and those
/// answered 504 (which may have been written).
#[derive(Debug, Default)]
struct Tally {
    answers: BTreeMap<u16, u32>,
    refused_creates: Vec<String>,
    /// Replaces answered 503 whose name the item held right after.
    refused_replaces_applied: Vec<String>,
}

/// Creates `rounds` items named `w{writer}-{round}` and replaces item
/// `item` with `w{writer}-put-{round}` after each, sequentially. After a
/// 503 on a replace, the item's name is read straight from the database:
/// it must not be the refused one. (It may differ from the one before: a
/// replace answered 504 before it may commit late, as a 504 allows.)
async fn write(client: Client, database: Arc<ScratchDatabase>, writer: usize, item: i64) -> Tally {
    let rounds = 250;
    let mut tally = Tally::default();
    let direct = database.client().await.unwrap();
    for round in 0..rounds {
        let name = format!("w{writer}-{round}");
        let created = client.post_json("/items", &json!({"name": name})).await;
        *tally.answers.entry(created.status().as_u16()).or_default() += 1;
        if created.status() == 503 {
            tally.refused_creates.push(name);
        }
        let new = format!("w{writer}-put-{round}");
        let replaced = client
            .put_json(&format!("/items/{item}"), &json!({"name": new}))
            .await;
        *tally.answers.entry(replaced.status().as_u16()).or_default() += 1;
        if replaced.status() == 503 && name_of(&direct, item).await == new {
            tally.refused_replaces_applied.push(new);
        }
    }
    drop(direct);
    tally
}

#[tokio::test]
async fn under_load_with_a_budget_that_fires_while_commits_are_in_flight_no_503_was_written_c12() {
    // A slow, jittery network (each chunk up to 5 ms late) and a budget of
    // 40 ms: a transaction's three round trips fit in it or not, so the
    // budget fires before the commit, while it is in flight, and after.
    let database = Arc::new(ScratchDatabase::create(&test_database_url()).await.unwrap());
    let proxy = TcpProxy::start(test_server_address().await).await;
    let url = through(&database, proxy.port());
    let service = Service::start(&[
        ("DATABASE_URL", url.as_str()),
        ("DATABASE_STATEMENT_TIMEOUT_MS", "40"),
        ("DATABASE_POOL_SIZE", "3"),
        ("RATE_LIMIT_MAX", "0"),
    ])
    .await;
    proxy.set_delay(Duration::from_millis(5));
    let writers = 12;
    let mut items = Vec::new();
    for writer in 0..writers {
        // The budget may refuse a create too: ask until one is made.
        let created = loop {
            let response = service
                .client
                .post_json("/items", &json!({"name": format!("item of {writer}")}))
                .await;
            if response.status() == 201 {
                break response.json::<Value>().await.unwrap();
            }
        };
        items.push(created["id"].as_i64().unwrap());
    }

    let tasks: Vec<_> = items
        .iter()
        .enumerate()
        .map(|(writer, &item)| {
            tokio::spawn(write(
                service.client.clone(),
                Arc::clone(&database),
                writer,
                item,
            ))
        })
        .collect();
    let mut answers = BTreeMap::new();
    let mut refused_creates = Vec::new();
    let mut refused_replaces_applied = Vec::new();
    for task in tasks {
        let tally = task.await.unwrap();
        for (status, count) in tally.answers {
            *answers.entry(status).or_insert(0) += count;
        }
        refused_creates.extend(tally.refused_creates);
        refused_replaces_applied.extend(tally.refused_replaces_applied);
    }

    // The figures the closing of the race is reported with (`--nocapture`).
    eprintln!("answers by status: {answers:?}");
    let mut written = Vec::new();
    for name in &refused_creates {
        if rows_named(&database, name).await > 0 {
            written.push(name.clone());
        }
    }
    eprintln!(
        "creates answered 503: {}, of them written: {}; replaces answered 503 and applied: {}",
        refused_creates.len(),
        written.len(),
        refused_replaces_applied.len()
    );
    assert!(
        answers.get(&503).copied().unwrap_or(0) > 0,
        "the budget fired at least once: {answers:?}"
    );
    assert!(
        written.is_empty(),
        "creates answered 503 but written: {written:?}"
    );
    assert!(
        refused_replaces_applied.is_empty(),
        "replaces answered 503 but applied: {refused_replaces_applied:?}"
    );
    assert!(
        answers
            .keys()
            .all(|status| [200, 201, 503, 504].contains(status)),
        "{answers:?}"
    );
    drop(service);
    if let Ok(database) = Arc::try_unwrap(database) {
        database.drop().await;
    }
}
