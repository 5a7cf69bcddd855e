//! The change feed over HTTP (C14): `GET /items` with
//! `Accept: text/event-stream`, read as a browser's `EventSource` reads
//! it, over each store.
//!
//! - [`streams`]: events, cursors, `Last-Event-ID`, `reset`, heartbeats,
//!   and what the edge does to a stream (CORS, rate limit, no
//!   compression), in memory;
//! - [`limits`]: a slow subscriber cut, the stream limit, the drain;
//! - [`durable`]: SQLite and PostgreSQL, one instance and two sharing a
//!   store;
//! - [`concurrency`]: many writers, forced reconnects, nothing missed,
//!   repeated or reordered.

mod concurrency;
mod durable;
mod limits;
mod streams;

use std::sync::Arc;

use items_adapters::http::HttpSettings;
use items_adapters::memory;
use items_domain::ItemRepository;
use serde_json::{Value, json};

use crate::support::*;

/// A server over a fresh in-memory store, and that store's items, which
/// a test may write to directly (thousands of writes, no HTTP in the way).
pub(super) struct MemoryFeed {
    pub app: TestApp,
    pub items: Arc<dyn ItemRepository>,
}

impl MemoryFeed {
    pub async fn start() -> Self {
        Self::with(test_settings()).await
    }

    pub async fn with(settings: HttpSettings) -> Self {
        let repositories = memory::repositories();
        let items = Arc::clone(&repositories.items);
        let app = TestApp::spawn_with(settings, TestServices::over(repositories)).await;
        Self { app, items }
    }
}

/// What an event says: its kind and its data.
pub(super) fn said(frame: &Frame) -> (String, Value) {
    frame.change()
}

pub(super) fn created(id: i64, name: &str) -> (String, Value) {
    ("created".to_owned(), json!({ "id": id, "name": name }))
}

pub(super) fn replaced(id: i64, name: &str) -> (String, Value) {
    ("replaced".to_owned(), json!({ "id": id, "name": name }))
}

pub(super) fn deleted(id: i64) -> (String, Value) {
    ("deleted".to_owned(), json!({ "id": id }))
}

/// Renames item `id` over HTTP, asserting 200.
pub(super) async fn rename(client: &Client, id: i64, name: &str) {
    let response = client
        .put_json(&format!("/items/{id}"), &json!({ "name": name }))
        .await;
    assert_eq!(response.status(), 200, "renaming {id} to {name:?}");
}

/// Deletes item `id` over HTTP, asserting 204.
pub(super) async fn delete(client: &Client, id: i64) {
    let response = client.delete(&format!("/items/{id}")).await;
    assert_eq!(response.status(), 204, "deleting {id}");
}
