//! The HTTP behaviour over the SQLite repositories, each test on a fresh
//! file: the same lifecycle, listing and conditional requests as over
//! PostgreSQL, and what a restart over the same file keeps (C2, C7, C12).

use std::path::PathBuf;

use items_adapters::sqlite::{SqliteSettings, SqliteStore};
use reqwest::Method;
use serde_json::{Value, json};
use tempfile::TempDir;

use items_testkit::http::*;

/// A server over a SQLite store in a temporary directory.
struct SqliteApp {
    app: TestApp,
    store: SqliteStore,
    directory: TempDir,
}

impl SqliteApp {
    async fn spawn() -> Self {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let store = open(directory.path().join("items.db")).await;
        let app = TestApp::spawn(TestServices::sqlite(&store)).await;
        Self {
            app,
            store,
            directory,
        }
    }

    /// Stops the server and closes the file, then serves it again, as a
    /// restarted process would.
    async fn restart(self) -> Self {
        let Self {
            app,
            store,
            directory,
        } = self;
        drop(app);
        store.close().await;
        let store = open(directory.path().join("items.db")).await;
        let app = TestApp::spawn(TestServices::sqlite(&store)).await;
        Self {
            app,
            store,
            directory,
        }
    }

    async fn finish(self) {
        drop(self.app);
        self.store.close().await;
    }
}

async fn open(path: PathBuf) -> SqliteStore {
    SqliteStore::open(path, SqliteSettings::default())
        .await
        .expect("the SQLite file opens")
}

#[tokio::test]
async fn the_item_lifecycle_over_sqlite_matches_the_spec_c2_c7_c10() {
    let sqlite = SqliteApp::spawn().await;
    let app = &sqlite.app;

    for name in ["a", "b", "a"] {
        app.create_item(name).await;
    }
    let created = app.post_json("/items", &json!({ "name": "d" })).await;
    assert_eq!(created.status(), 201);
    assert_eq!(header(&created, "location"), "/items/4");
    assert_eq!(
        app.get("/items/2").await.json::<Value>().await.unwrap(),
        json!({ "id": 2, "name": "b" })
    );
    assert_eq!(
        app.get("/items/99").await.text().await.unwrap(),
        "Item not found"
    );

    let tag = header(&app.get("/items/2").await, "etag");
    let stale = app
        .request(Method::PUT, "/items/2")
        .header("if-match", "\"stale\"")
        .json(&json!({ "name": "x" }))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 412);
    let fresh = app
        .request(Method::PUT, "/items/2")
        .header("if-match", &tag)
        .json(&json!({ "name": "B" }))
        .send()
        .await
        .unwrap();
    assert_eq!(fresh.status(), 200);

    assert_eq!(app.delete("/items/4").await.status(), 204);
    assert_eq!(app.delete("/items/4").await.status(), 204);
    assert_eq!(app.create_item("e").await["id"], 5, "ids are never reused");

    let page = app.get("/items?limit=2&name=a").await;
    assert_eq!(header(&page, "x-total-count"), "2");
    assert_eq!(header(&page, "link"), "");
    let first = app.get("/items?limit=2").await;
    assert_eq!(
        header(&first, "link"),
        r#"</items?limit=2&after=2>; rel="next""#
    );
    assert_eq!(header(&first, "x-total-count"), "4");
    sqlite.finish().await;
}

#[tokio::test]
async fn products_and_users_over_sqlite_c4() {
    let sqlite = SqliteApp::spawn().await;
    let app = &sqlite.app;

    let created = app
        .post_json("/products", &json!({ "name": "pen", "price": 1.5 }))
        .await;
    assert_eq!(created.status(), 201);
    assert_eq!(
        app.get("/products").await.json::<Value>().await.unwrap(),
        json!([{ "id": 1, "name": "pen", "price": 1.5 }])
    );
    assert_eq!(
        app.get("/users").await.json::<Value>().await.unwrap(),
        json!([{ "id": 1, "name": "John Doe" }, { "id": 2, "name": "Jane Doe" }])
    );
    sqlite.finish().await;
}

#[tokio::test]
async fn concurrent_creates_over_sqlite_get_distinct_ids_c2() {
    let sqlite = SqliteApp::spawn().await;
    let app = &sqlite.app;

    let creates: Vec<_> = (0..300)
        .map(|n| {
            let request = app
                .request(Method::POST, "/items")
                .json(&json!({ "name": format!("n{n}") }));
            tokio::spawn(async move {
                request.send().await.unwrap().json::<Value>().await.unwrap()["id"]
                    .as_i64()
                    .unwrap()
            })
        })
        .collect();
    let mut ids = std::collections::HashSet::new();
    for create in creates {
        assert!(ids.insert(create.await.unwrap()));
    }

    assert_eq!(ids.len(), 300);
    assert_eq!(
        app.get("/items")
            .await
            .json::<Vec<Value>>()
            .await
            .unwrap()
            .len(),
        300
    );
    sqlite.finish().await;
}

/// The streamed listing's tag comes from the version stored in the file:
/// a write changes it, the current one gives 304, and a restart over the
/// same file keeps both the tag and the id counter (C2, C7, C10, C12).
#[tokio::test]
async fn the_listing_tag_and_the_id_counter_survive_a_restart_c2_c7_c12() {
    let sqlite = SqliteApp::spawn().await;
    for name in ["a", "b", "c"] {
        sqlite.app.create_item(name).await;
    }
    let before = header(&sqlite.app.get("/items").await, "etag");
    assert_eq!(sqlite.app.delete("/items/3").await.status(), 204);
    let listing = sqlite.app.get("/items").await;
    let tag = header(&listing, "etag");
    assert_ne!(tag, before, "a delete changes the tag");
    let bytes = listing.bytes().await.unwrap();

    let sqlite = sqlite.restart().await;
    let app = &sqlite.app;
    let again = app.get("/items").await;
    assert_eq!(header(&again, "etag"), tag);
    assert_eq!(again.bytes().await.unwrap(), bytes);
    let cached = app
        .request(Method::GET, "/items")
        .header("if-none-match", &tag)
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status(), 304);
    assert_eq!(
        app.create_item("d").await["id"],
        4,
        "3 is never handed out again"
    );
    let stale = app
        .request(Method::GET, "/items")
        .header("if-none-match", &tag)
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 200);
    sqlite.finish().await;
}
