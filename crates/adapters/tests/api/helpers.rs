//! The test harness: a real server on port 0 over chosen repositories, and a
//! typed client for it.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::ServerHandle;
use items_adapters::disk::DiskUploadStore;
use items_adapters::http::{HttpServer, HttpSettings, RateLimitSettings, Services};
use items_adapters::memory::{
    InMemoryItemRepository, InMemoryProductRepository, InMemoryRateLimitStore,
    InMemoryUserRepository,
};
use items_domain::{ItemService, ProductService, RateLimiter, UploadService, UserService};
use reqwest::{Method, RequestBuilder, Response};
use serde_json::Value;

/// A running server and a client pointed at it. Dropping it stops the server.
pub struct TestApp {
    pub address: String,
    /// Where this server stores uploads.
    pub uploads: tempfile::TempDir,
    #[allow(dead_code)] // read by the modules that open raw TCP connections
    pub port: u16,
    pub client: reqwest::Client,
    handle: ServerHandle,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        let handle = self.handle.clone();
        // Stopping is async; the test's runtime may already be shutting down,
        // in which case the process exit reaps the server anyway.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { handle.stop(false).await });
        }
    }
}

/// Settings for tests: one worker (tests start many servers) and no rate
/// limit (tests send bursts; the limiter has tests of its own).
pub fn test_settings() -> HttpSettings {
    let defaults = HttpSettings::default();
    HttpSettings {
        workers: 1,
        rate_limit: RateLimitSettings {
            max: None,
            ..defaults.rate_limit
        },
        ..defaults
    }
}

/// The use cases a test server drives, and the temporary uploads directory
/// it writes to (deleted when the test app is dropped).
pub struct TestServices {
    pub services: Services,
    uploads: tempfile::TempDir,
}

/// Use cases over `build`'s repositories and an upload store in a fresh
/// temporary directory.
pub fn with_uploads(build: impl FnOnce(UploadService) -> Services) -> TestServices {
    let uploads = tempfile::tempdir().expect("a temporary directory");
    let store = DiskUploadStore::open(uploads.path()).expect("the uploads directory opens");
    TestServices {
        services: build(UploadService::new(Arc::new(store))),
        uploads,
    }
}

/// Rate-limit budgets in this process, as one instance keeps them.
pub fn local_rate_limits() -> RateLimiter {
    RateLimiter::local(Arc::new(InMemoryRateLimitStore::default()))
}

/// Fresh in-memory repositories, the default store.
pub fn in_memory_services() -> TestServices {
    with_uploads(|uploads| Services {
        items: ItemService::new(Arc::new(InMemoryItemRepository::new())),
        products: ProductService::new(Arc::new(InMemoryProductRepository::new())),
        users: UserService::new(Arc::new(InMemoryUserRepository::seeded())),
        uploads,
        rate_limits: local_rate_limits(),
    })
}

/// A server with the default settings over fresh in-memory repositories.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(test_settings(), in_memory_services()).await
}

/// A server with these settings over these use cases, bound to port 0.
pub async fn spawn_app_with(settings: HttpSettings, services: TestServices) -> TestApp {
    let TestServices { services, uploads } = services;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let server = HttpServer::bind(listener, settings, services, std::future::pending())
        .expect("the server builds");
    let port = server.port();
    let handle = server.handle();
    tokio::spawn(server.run());
    TestApp {
        address: format!("http://127.0.0.1:{port}"),
        uploads,
        port,
        client: reqwest::Client::builder().build().expect("client builds"),
        handle,
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, self.url(path))
    }

    pub async fn get(&self, path: &str) -> Response {
        self.request(Method::GET, path)
            .send()
            .await
            .expect("GET is answered")
    }

    pub async fn delete(&self, path: &str) -> Response {
        self.request(Method::DELETE, path)
            .send()
            .await
            .expect("DELETE is answered")
    }

    /// POST with a JSON body and `Content-Type: application/json`.
    pub async fn post_json(&self, path: &str, body: &Value) -> Response {
        self.request(Method::POST, path)
            .json(body)
            .send()
            .await
            .expect("POST is answered")
    }

    /// PUT with a JSON body and `Content-Type: application/json`.
    pub async fn put_json(&self, path: &str, body: &Value) -> Response {
        self.request(Method::PUT, path)
            .json(body)
            .send()
            .await
            .expect("PUT is answered")
    }

    /// POST of raw bytes with the given content type.
    #[allow(dead_code)] // used by the body and upload modules
    pub async fn post_raw(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> Response {
        self.request(Method::POST, path)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .expect("POST is answered")
    }

    /// Creates an item and returns its JSON.
    pub async fn create_item(&self, name: &str) -> Value {
        let response = self
            .post_json("/items", &serde_json::json!({ "name": name }))
            .await;
        assert_eq!(response.status(), 201, "creating {name:?}");
        response.json().await.expect("created item is JSON")
    }
}

/// Asserts a problem document (C6) with this status and returns it.
pub async fn assert_problem(response: Response, status: u16) -> Value {
    assert_eq!(response.status(), status);
    assert_eq!(
        header(&response, "content-type"),
        "application/problem+json"
    );
    let body: Value = response.json().await.expect("problem is JSON");
    assert_eq!(body["type"], "about:blank");
    assert_eq!(body["status"], status);
    assert!(
        body["title"]
            .as_str()
            .is_some_and(|title| !title.is_empty())
    );
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|detail| !detail.is_empty())
    );
    body
}

/// The value of a response header, or "" when absent.
pub fn header(response: &Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}
