//! The service's own PostgreSQL store over a scratch database: the fixture
//! of the adapters' tests over PostgreSQL, and of the application's (which
//! include this file, so there is one copy). It lives with the tests, not
//! in `items-testkit`, because it builds a `PostgresStore`: the kit depends
//! on the domain alone.

use std::sync::Arc;
use std::time::Duration;

use items_adapters::postgres::{PostgresSettings, PostgresStore, PostgresUrl};

use items_domain::{ChangeFeed, ItemRepository};
use items_testkit::postgres::{ScratchDatabase, test_database_url};
use items_testkit::{ChangeFeedFixture, Fixture, Repositories, RepositoryFixture};

/// A migrated [`PostgresStore`] on a [`ScratchDatabase`] of the server
/// of [`test_database_url`]; [`Fixture::teardown`] closes the pool and
/// drops the database.
#[derive(Debug)]
pub struct ScratchStore {
    pub store: PostgresStore,
    pub database: ScratchDatabase,
}

impl ScratchStore {
    /// Connects straight to a fresh scratch database.
    ///
    /// # Panics
    /// When the server does not answer: a test never skips for want
    /// of its database.
    pub async fn create() -> Self {
        Self::connect_with(scratch_url).await
    }

    /// Connects to a fresh scratch database with the URL `connect`
    /// makes of it (through a `TcpProxy`, with
    /// [`ScratchDatabase::url_through`], say).
    ///
    /// # Panics
    /// As [`ScratchStore::create`].
    pub async fn connect_with(connect: impl FnOnce(&ScratchDatabase) -> PostgresUrl) -> Self {
        Self::connect_with_settings(connect, PostgresSettings::default()).await
    }

    /// [`ScratchStore::connect_with`] with the store's `settings` (a
    /// short statement budget, say).
    ///
    /// # Panics
    /// As [`ScratchStore::create`].
    pub async fn connect_with_settings(
        connect: impl FnOnce(&ScratchDatabase) -> PostgresUrl,
        settings: PostgresSettings,
    ) -> Self {
        let database = ScratchDatabase::create(&test_database_url())
            .await
            .expect("a scratch database on the test server");
        let store = PostgresStore::connect(&connect(&database), settings, Duration::from_secs(5))
            .await
            .expect("connects and migrates");
        Self { store, database }
    }
}

impl ScratchStore {
    /// The scratch database's URL, as the store (and its snapshot and
    /// sink) read it.
    #[allow(dead_code)] // not every test binary that includes this file uses it
    pub fn url(&self) -> PostgresUrl {
        scratch_url(&self.database)
    }

    /// Connects to a fresh scratch database through a URL listing two
    /// hosts, `target_session_attrs=read-write`: first a loopback port
    /// nobody listens on, which refuses, then the test server. Every
    /// connection the store opens tries the refusing host only while it
    /// has not yet settled on the live one.
    ///
    /// # Panics
    /// As [`ScratchStore::create`].
    #[allow(dead_code)] // used by the contract tests only
    pub async fn behind_a_refusing_host() -> Self {
        let database = ScratchDatabase::create(&test_database_url())
            .await
            .expect("a scratch database on the test server");
        let url = with_a_refusing_host_first(&database.url(), refusing_port());
        let url = PostgresUrl::parse(&url).expect("a URL of two hosts");
        let store =
            PostgresStore::connect(&url, PostgresSettings::default(), Duration::from_secs(5))
                .await
                .expect("connects through the second host and migrates");
        Self { store, database }
    }
}

/// The URL of `database` as the store reads it.
///
/// # Panics
/// When the scratch database's URL does not parse: a test fixture.
pub fn scratch_url(database: &ScratchDatabase) -> PostgresUrl {
    PostgresUrl::parse(&database.url()).expect("the scratch database's URL")
}

/// A loopback port nobody listens on: bound by the system, then let go.
#[allow(dead_code)] // used by the contract tests only
fn refusing_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// `url` with `127.0.0.1:PORT` listed before its host and
/// `target_session_attrs=read-write` among its parameters.
#[allow(dead_code)] // used by the contract tests only
fn with_a_refusing_host_first(url: &str, port: u16) -> String {
    let authority = url.find("://").map_or(0, |at| at + 3);
    let host = url[authority..]
        .find('@')
        .map_or(authority, |at| authority + at + 1);
    let separator = if url.contains('?') { '&' } else { '?' };
    format!(
        "{}127.0.0.1:{port},{}{separator}target_session_attrs=read-write",
        &url[..host],
        &url[host..]
    )
}

impl Fixture for ScratchStore {
    async fn teardown(self) {
        self.store.close().await;
        self.database.drop().await;
    }
}

impl RepositoryFixture for ScratchStore {
    fn repositories(&self) -> Repositories {
        self.store.repositories()
    }
}

impl ChangeFeedFixture for ScratchStore {
    fn items(&self) -> Arc<dyn ItemRepository> {
        Arc::new(self.store.items())
    }

    fn changes(&self) -> Arc<dyn ChangeFeed> {
        self.store.changes()
    }

    /// What the store's pruning does once the retention passed (its own
    /// test runs it for real): every change gone, the floor at the last
    /// position given.
    async fn expire_changes(&self) {
        let client = self
            .database
            .client()
            .await
            .expect("the scratch database answers");
        client
            .batch_execute(
                "begin;
                 delete from changes;
                 update change_log set pruned_through = coalesce(pg_sequence_last_value(
                     pg_get_serial_sequence('changes', 'position')::regclass), 0);
                 commit;",
            )
            .await
            .expect("the changes are pruned");
    }
}

impl items_testkit::ConsistentReadsFixture for ScratchStore {
    fn reads(&self) -> std::sync::Arc<dyn items_domain::ConsistentReads> {
        std::sync::Arc::new(self.store.clone())
    }
}
