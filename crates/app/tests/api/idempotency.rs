//! `Idempotency-Key` on `POST /items` and `POST /products` (C7), over the
//! in-memory store: replays answer the first response and create nothing,
//! another body gets 422, a repeat in flight 409, a malformed key 400 (C6).
//! `durable.rs` checks the same across a restart (SQLite) and across
//! instances (PostgreSQL).

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use items_adapters::memory::InMemoryUserRepository;
use items_adapters::memory::{InMemoryItemRepository, InMemoryProductRepository};
use items_domain::{
    Id, IdempotencyKey, Item, ItemListing, ItemPage, ItemQuery, ItemRepository, Keyed, Name,
    Replaced, RepositoryError,
};
use items_testkit::Repositories;
use reqwest::Method;
use reqwest::header::HeaderValue;
use serde_json::json;
use tokio::sync::Notify;

use crate::support::*;

async fn count(app: &TestApp, path: &str) -> usize {
    app.list(path).await.len()
}

#[tokio::test]
async fn a_repeated_keyed_create_answers_the_first_response_and_creates_nothing_c7() {
    let app = TestApp::in_memory().await;
    app.create_item("before").await;
    let first = app
        .post_keyed("/items", "order-1", &json!({ "name": "pen" }))
        .await;
    assert_eq!(first.status(), 201);
    assert_eq!(header(&first, "location"), "/items/2");
    assert_eq!(header(&first, "idempotent-replayed"), "");
    let first_body = first.text().await.unwrap();

    // Renamed since: the replay still answers the first response.
    let renamed = app.put_json("/items/2", &json!({ "name": "ink" })).await;
    assert_eq!(renamed.status(), 200);
    for _ in 0..2 {
        let again = app
            .post_keyed("/items", "order-1", &json!({ "name": "pen" }))
            .await;
        assert_eq!(again.status(), 201, "C7: the same status");
        assert_eq!(
            header(&again, "location"),
            "/items/2",
            "C7: the same Location"
        );
        assert_eq!(header(&again, "content-type"), "application/json");
        assert_eq!(header(&again, "idempotent-replayed"), "true");
        assert_eq!(again.text().await.unwrap(), first_body, "C7: the same body");
    }
    assert_eq!(
        count(&app, "/items").await,
        2,
        "C7: a replay creates nothing"
    );

    // Without a key, or with another one, every POST creates.
    assert_eq!(app.create_item("pen").await["id"], 3);
    let other = app
        .post_keyed("/items", "order-2", &json!({ "name": "pen" }))
        .await;
    assert_eq!(header(&other, "location"), "/items/4");
}

#[tokio::test]
async fn a_key_repeated_with_another_body_gets_422_and_creates_nothing_c7() {
    let app = TestApp::in_memory().await;
    let first = app
        .post_keyed("/items", "k", &json!({ "name": "pen" }))
        .await;
    assert_eq!(first.status(), 201);
    let other = app
        .post_keyed("/items", "k", &json!({ "name": "ink" }))
        .await;
    let problem = assert_problem(other, 422).await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key")
    );
    // Fields the body schema ignores are not part of "the body" (C3).
    let extra = json!({ "name": "pen", "colour": "red" });
    assert_eq!(app.post_keyed("/items", "k", &extra).await.status(), 201);
    assert_eq!(count(&app, "/items").await, 1);

    let product = json!({ "name": "pen", "price": 1.5 });
    assert_eq!(
        app.post_keyed("/products", "p", &product).await.status(),
        201
    );
    let cheaper = json!({ "name": "pen", "price": 1.25 });
    assert_problem(app.post_keyed("/products", "p", &cheaper).await, 422).await;
    assert_eq!(count(&app, "/products").await, 1);
}

#[tokio::test]
async fn product_keys_replay_the_first_product_and_are_apart_from_item_keys_c7() {
    let app = TestApp::in_memory().await;
    let item = app
        .post_keyed("/items", "same", &json!({ "name": "pen" }))
        .await;
    assert_eq!(item.status(), 201);
    let body = json!({ "name": "pen", "price": 5 });
    let first = app.post_keyed("/products", "same", &body).await;
    assert_eq!(
        first.status(),
        201,
        "C7: an item's key does not answer for a product"
    );
    assert_eq!(header(&first, "location"), "/products/1");
    let first_body = first.text().await.unwrap();
    assert_eq!(first_body, r#"{"id":1,"name":"pen","price":5}"#);
    let again = app.post_keyed("/products", "same", &body).await;
    assert_eq!(again.status(), 201);
    assert_eq!(header(&again, "location"), "/products/1");
    assert_eq!(header(&again, "idempotent-replayed"), "true");
    assert_eq!(again.text().await.unwrap(), first_body);
    assert_eq!(count(&app, "/products").await, 1);
}

#[tokio::test]
async fn a_malformed_idempotency_key_gets_400_naming_the_header_c6_c7() {
    let app = TestApp::in_memory().await;
    let long = "k".repeat(256);
    let refused: [&[u8]; 5] = [
        b"",
        b"has space",
        b"caf\xc3\xa9",
        b"tab\there",
        long.as_bytes(),
    ];
    for key in refused {
        let response = app
            .request(Method::POST, "/items")
            .header("idempotency-key", HeaderValue::from_bytes(key).unwrap())
            .json(&json!({ "name": "pen" }))
            .send()
            .await
            .unwrap();
        let problem = assert_problem(response, 400).await;
        let entry = &problem["errors"][0];
        assert_eq!(entry["location"], "headers", "{key:?}");
        assert_eq!(entry["path"], "idempotency-key");
        assert_eq!(entry["type"], "field");
        assert!(entry["msg"].as_str().unwrap().contains("visible ASCII"));
    }
    let twice = app
        .request(Method::POST, "/products")
        .header("idempotency-key", "a")
        .header("idempotency-key", "b")
        .json(&json!({ "name": "pen", "price": 1 }))
        .send()
        .await
        .unwrap();
    assert_problem(twice, 400).await;
    // A bad body and a bad key: one 400 listing both (C6).
    let both = app
        .request(Method::POST, "/products")
        .header("idempotency-key", "two words")
        .json(&json!({ "name": "", "price": -1 }))
        .send()
        .await
        .unwrap();
    let problem = assert_problem(both, 400).await;
    let locations: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["location"].as_str().unwrap())
        .collect();
    assert_eq!(locations, ["body", "body", "headers"], "{problem}");
    let longest = "k".repeat(255);
    let accepted = app
        .post_keyed("/items", &longest, &json!({ "name": "pen" }))
        .await;
    assert_eq!(accepted.status(), 201, "255 characters are allowed");
    assert_eq!(
        count(&app, "/items").await,
        1,
        "C7: refused requests create nothing"
    );
    assert_eq!(count(&app, "/products").await, 0);
}

/// In-memory items whose keyed creates wait for the test's go-ahead, so a
/// request can be held in flight.
struct Gated {
    inner: InMemoryItemRepository,
    entered: Arc<Notify>,
    go: Arc<Notify>,
}

#[async_trait]
impl ItemRepository for Gated {
    async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        self.inner.list(query).await
    }
    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        self.inner.list_all().await
    }
    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        self.inner.get(id).await
    }
    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        self.inner.create(name).await
    }
    async fn create_keyed(
        &self,
        name: Name,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Item>, RepositoryError> {
        self.entered.notify_one();
        self.go.notified().await;
        self.inner.create_keyed(name, key, at).await
    }
    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        self.inner.replace(item, expected).await
    }
    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        self.inner.delete(id).await
    }
}

#[tokio::test]
async fn a_repeat_while_the_first_is_in_flight_gets_409_with_retry_after_c7() {
    let entered = Arc::new(Notify::new());
    let go = Arc::new(Notify::new());
    let items = Gated {
        inner: InMemoryItemRepository::new(),
        entered: Arc::clone(&entered),
        go: Arc::clone(&go),
    };
    let repositories = Repositories::new(
        items,
        InMemoryProductRepository::new(),
        InMemoryUserRepository::seeded(),
    );
    let app = TestApp::spawn(TestServices::over(repositories)).await;
    let first = app
        .request(Method::POST, "/items")
        .header("idempotency-key", "slow")
        .json(&json!({ "name": "pen" }))
        .send();
    let first = tokio::spawn(first);
    entered.notified().await;

    let duplicate = app
        .post_keyed("/items", "slow", &json!({ "name": "pen" }))
        .await;
    assert_eq!(header(&duplicate, "retry-after"), "1");
    assert_problem(duplicate, 409).await;

    go.notify_one();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status(), 201);
    assert_eq!(header(&first, "location"), "/items/1");
    // Once the first is done, a repeat is a replay.
    let replay = app
        .request(Method::POST, "/items")
        .header("idempotency-key", "slow")
        .json(&json!({ "name": "pen" }))
        .send();
    let replay = tokio::spawn(replay);
    entered.notified().await;
    go.notify_one();
    let replay = replay.await.unwrap().unwrap();
    assert_eq!(replay.status(), 201);
    assert_eq!(header(&replay, "idempotent-replayed"), "true");
    assert_eq!(count(&app, "/items").await, 1);
}
