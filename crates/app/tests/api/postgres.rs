//! The HTTP behaviour over the PostgreSQL repositories (on the server of
//! `TEST_DATABASE_URL`, by default the local one), and what happens when the
//! database goes away.

use std::time::Duration;

use crate::support::ScratchStore;
use items_adapters::postgres::{PostgresSettings, PostgresStore, PostgresUrl};
use items_testkit::Fixture;
use items_testkit::postgres::test_server_address;
use items_testkit::tcp_proxy::TcpProxy;
use serde_json::{Value, json};

use crate::support::*;

use crate::durable::*;

/// A server over PostgreSQL repositories in a scratch database.
struct PostgresApp {
    app: TestApp,
    scratch: ScratchStore,
}

impl PostgresApp {
    async fn spawn(scratch: ScratchStore) -> Self {
        let app = TestApp::spawn(TestServices::postgres(&scratch.store)).await;
        Self { app, scratch }
    }

    async fn finish(self) {
        drop(self.app);
        self.scratch.teardown().await;
    }
}

#[tokio::test]
async fn the_item_lifecycle_over_postgres_matches_the_spec_c2_c7_c10() {
    let postgres = PostgresApp::spawn(ScratchStore::create().await).await;
    the_item_lifecycle_matches_the_spec(&postgres.app).await;
    postgres.finish().await;
}

/// A second instance: its own pool and its own in-flight registry over the
/// same database.
async fn second_instance(scratch: &ScratchStore) -> (TestApp, PostgresStore) {
    let settings = PostgresSettings {
        pool_size: 8,
        ..PostgresSettings::default()
    };
    let store = PostgresStore::connect(&scratch.url(), settings, Duration::from_secs(5))
        .await
        .unwrap();
    (TestApp::spawn(TestServices::postgres(&store)).await, store)
}

#[tokio::test]
async fn keyed_creates_are_replayed_by_another_instance_over_postgres_c7() {
    let postgres = PostgresApp::spawn(ScratchStore::create().await).await;
    let (other, store) = second_instance(&postgres.scratch).await;
    let originals = keyed_creates(&postgres.app).await;
    keyed_creates_are_replayed(&other, &originals).await;
    drop(other);
    store.close().await;
    postgres.finish().await;
}

/// Two instances get the same key at once, many times: the database's
/// primary key makes one create and the others wait and replay it; within
/// one instance a repeat may instead get 409 (its registry saw the first in
/// flight). Never a second item (C7).
#[tokio::test]
async fn concurrent_keyed_creates_on_two_instances_make_one_item_over_postgres_c7() {
    let postgres = PostgresApp::spawn(ScratchStore::create().await).await;
    let (other, store) = second_instance(&postgres.scratch).await;
    let body = json!({ "name": "pen" });
    let requests = (0..20).map(|n| {
        let app = if n % 2 == 0 { &postgres.app } else { &other };
        app.request(reqwest::Method::POST, "/items")
            .header("idempotency-key", "race")
            .json(&body)
            .send()
    });
    let mut created = std::collections::BTreeSet::new();
    for response in futures_util::future::join_all(requests).await {
        let response = response.unwrap();
        match response.status().as_u16() {
            201 => {
                created.insert(header(&response, "location"));
            }
            409 => {}
            status => panic!("C7: a concurrent duplicate gets 201 or 409, not {status}"),
        }
    }
    assert_eq!(
        created.len(),
        1,
        "C7: every 201 names the same item: {created:?}"
    );
    let items = other.list("/items").await;
    assert_eq!(items.len(), 1, "C7: one item for one key");
    drop(other);
    store.close().await;
    postgres.finish().await;
}

#[tokio::test]
async fn products_and_users_over_postgres_c4() {
    let postgres = PostgresApp::spawn(ScratchStore::create().await).await;
    products_and_users_are_served(&postgres.app).await;
    postgres.finish().await;
}

#[tokio::test]
async fn concurrent_creates_over_postgres_get_distinct_ids_c2() {
    let postgres = PostgresApp::spawn(ScratchStore::create().await).await;
    concurrent_creates_get_distinct_ids(&postgres.app).await;
    postgres.finish().await;
}

#[tokio::test]
async fn a_lost_database_gives_503_and_the_service_recovers_by_itself_without_losing_data() {
    let target = test_server_address().await;
    let proxy = TcpProxy::start(target).await;
    let port = proxy.port();
    let scratch = ScratchStore::connect_with(|database| {
        PostgresUrl::parse(&database.url_through(port)).unwrap()
    })
    .await;
    let postgres = PostgresApp::spawn(scratch).await;
    let app = &postgres.app;
    app.create_item("before the cut").await;

    proxy.set_cut(true);
    let read = app.get("/items/1").await;
    let write = app
        .post_json("/items", &json!({ "name": "during the cut" }))
        .await;
    assert!(!header(&read, "retry-after").is_empty());
    assert_problem(read, 503).await;
    assert_problem(write, 503).await;

    proxy.set_cut(false);
    let mut recovered = app.get("/items/1").await;
    for _ in 0..20 {
        if recovered.status() == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        recovered = app.get("/items/1").await;
    }
    assert_eq!(recovered.status(), 200);
    assert_eq!(
        recovered.json::<Value>().await.unwrap(),
        json!({ "id": 1, "name": "before the cut" })
    );
    assert_eq!(
        app.post_json("/items", &json!({ "name": "after" }))
            .await
            .status(),
        201
    );
    let names: Vec<Value> = app.get("/items").await.json().await.unwrap();
    assert!(
        names.iter().all(|item| item["name"] != "during the cut"),
        "a refused write stored nothing"
    );
    postgres.finish().await;
}

/// The `Consistency-Token` of a response, as a position.
fn token_of(response: &reqwest::Response) -> items_domain::Position {
    let token = header(response, "consistency-token");
    items_domain::Position::parse(&token)
        .unwrap_or_else(|_| panic!("C13: a well-formed token, not {token:?}"))
}

/// Whether `later` is at or after `earlier` on one history.
fn at_or_after(later: items_domain::Position, earlier: items_domain::Position) -> bool {
    (later.era(), later.offset()) >= (earlier.era(), earlier.offset())
}

#[tokio::test]
async fn every_item_and_product_answer_over_postgres_carries_a_token_that_never_goes_back_c13() {
    let postgres = PostgresApp::spawn(ScratchStore::create().await).await;
    let app = &postgres.app;
    let created = app.post_json("/items", &json!({ "name": "pen" })).await;
    assert_eq!(created.status(), 201);
    let mut last = token_of(&created);
    assert!(
        header(&created, "consistency-token").len() <= 64,
        "C13: at most 64 characters"
    );
    for (path, status) in [
        ("/items/1", 200),
        ("/items", 200),
        ("/items?limit=1", 200),
        ("/items?name=pen", 200),
        ("/items/9", 404),
        ("/products", 200),
    ] {
        let response = app
            .request(reqwest::Method::GET, path)
            .header("consistency-token", last.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{path}");
        let served = token_of(&response);
        assert!(
            at_or_after(served, last),
            "C13: {path} served {served}, after {last} was handed out"
        );
        last = served;
    }
    let replaced = app.put_json("/items/1", &json!({ "name": "ink" })).await;
    let written = token_of(&replaced);
    assert!(
        written.offset() > last.offset(),
        "C13: a write moves the position on"
    );
    let read = app
        .request(reqwest::Method::GET, "/items/1")
        .header("consistency-token", written.to_string())
        .send()
        .await
        .unwrap();
    assert!(at_or_after(token_of(&read), written));
    assert_eq!(read.json::<Value>().await.unwrap()["name"], "ink");
    assert_eq!(header(&app.get("/users").await, "consistency-token"), "");
    postgres.finish().await;
}

#[tokio::test]
async fn a_token_the_primary_never_reached_is_a_409_consistency_unmet_c13() {
    let postgres = PostgresApp::spawn(ScratchStore::create().await).await;
    let app = &postgres.app;
    let now = token_of(&app.post_json("/items", &json!({ "name": "pen" })).await);
    let ahead = items_domain::Position::new(now.era(), now.offset() + (1 << 40));
    let newer = items_domain::Position::new(now.era() + 1, 1);
    for token in [ahead, newer] {
        for path in ["/items/1", "/items", "/items?limit=5", "/products"] {
            let response = app
                .request(reqwest::Method::GET, path)
                .header("consistency-token", token.to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(header(&response, "consistency-token"), "", "{path}");
            assert_problem_of_type(response, 409, "consistency-unmet").await;
        }
    }
    postgres.finish().await;
}
