//! The HTTP behaviour over the PostgreSQL repositories (on the server of
//! `TEST_DATABASE_URL`, by default the local one), and what happens when the
//! database goes away.

use std::net::SocketAddr;
use std::time::Duration;

use items_testkit::Fixture;
use items_testkit::postgres::{ScratchStore, test_database_url};
use items_testkit::tcp_proxy::TcpProxy;
use serde_json::{Value, json};
use sqlx::postgres::PgConnectOptions;

use items_testkit::http::*;

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
    let url = test_database_url();
    let target: SocketAddr = {
        let options: PgConnectOptions = url.parse().unwrap();
        let host = if options.get_host().starts_with('/') {
            "127.0.0.1"
        } else {
            options.get_host()
        };
        tokio::net::lookup_host((host, options.get_port()))
            .await
            .unwrap()
            .next()
            .unwrap()
    };
    let proxy = TcpProxy::start(target).await;
    let port = proxy.port();
    let scratch =
        ScratchStore::connect_with(|database| database.options().host("127.0.0.1").port(port))
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
