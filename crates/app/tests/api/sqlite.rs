//! The HTTP behaviour over the SQLite repositories, each test on a fresh
//! file: the same lifecycle, listing and conditional requests as over
//! PostgreSQL, and what a restart over the same file keeps (C2, C7, C12).

use std::path::PathBuf;

use items_adapters::sqlite::{SqliteSettings, SqliteStore};
use reqwest::Method;
use tempfile::TempDir;

use crate::support::*;

use crate::durable::*;

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
    the_item_lifecycle_matches_the_spec(&sqlite.app).await;
    sqlite.finish().await;
}

#[tokio::test]
async fn keyed_creates_are_replayed_after_a_restart_over_sqlite_c7() {
    let before = SqliteApp::spawn().await;
    let originals = keyed_creates(&before.app).await;
    let after = before.restart().await;
    keyed_creates_are_replayed(&after.app, &originals).await;
    after.finish().await;
}

#[tokio::test]
async fn products_and_users_over_sqlite_c4() {
    let sqlite = SqliteApp::spawn().await;
    products_and_users_are_served(&sqlite.app).await;
    sqlite.finish().await;
}

#[tokio::test]
async fn concurrent_creates_over_sqlite_get_distinct_ids_c2() {
    let sqlite = SqliteApp::spawn().await;
    concurrent_creates_get_distinct_ids(&sqlite.app).await;
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
    assert_eq!(listing_if_none_match(app, &tag).await.status(), 304);
    assert_eq!(
        app.create_item("d").await["id"],
        4,
        "3 is never handed out again"
    );
    assert_eq!(listing_if_none_match(app, &tag).await.status(), 200);
    sqlite.finish().await;
}

/// `GET /items` with `If-None-Match: tag`.
async fn listing_if_none_match(app: &TestApp, tag: &str) -> reqwest::Response {
    app.request(Method::GET, "/items")
        .header("if-none-match", tag)
        .send()
        .await
        .unwrap()
}
