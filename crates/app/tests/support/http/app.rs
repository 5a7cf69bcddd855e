//! A real server on port 0, stopped when the test drops it.

use std::net::TcpListener;
use std::ops::Deref;
use std::path::Path;

use items_adapters::http::{HttpServer, HttpServerHandle, HttpSettings, RateLimitSettings};
use tempfile::TempDir;

use super::{Client, TestServices};

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

/// A running [`HttpServer`] and a [`Client`] pointed at it (its methods are
/// the app's, by `Deref`). Dropping it stops the server and deletes its
/// uploads directory.
#[derive(Debug)]
pub struct TestApp {
    client: Client,
    uploads: TempDir,
    handle: HttpServerHandle,
}

impl TestApp {
    /// A server with [`test_settings`] over fresh in-memory repositories.
    pub async fn in_memory() -> Self {
        Self::spawn(TestServices::in_memory()).await
    }

    /// A server with [`test_settings`] over these use cases.
    pub async fn spawn(services: TestServices) -> Self {
        Self::spawn_with(test_settings(), services).await
    }

    /// A server with these settings over these use cases, on a loopback
    /// port the OS chose.
    ///
    /// # Panics
    /// When no loopback port can be bound or the server cannot be built.
    pub async fn spawn_with(settings: HttpSettings, services: TestServices) -> Self {
        items_testkit::init_test_log();
        let TestServices { services, uploads } = services;
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
        let server = HttpServer::bind(listener, settings, services, std::future::pending())
            .expect("the server builds");
        let client = Client::at(server.port());
        let handle = server.handle();
        tokio::spawn(server.run());
        Self {
            client,
            uploads,
            handle,
        }
    }

    /// The directory this server stores uploads in.
    pub fn uploads(&self) -> &Path {
        self.uploads.path()
    }
}

impl Deref for TestApp {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
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
