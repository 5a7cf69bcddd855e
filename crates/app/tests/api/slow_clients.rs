//! What a client costs the store (C12: "a client never holds the store",
//! "`HEAD` costs only the headers"): a `HEAD` of the full listing reads no
//! row of it; a client that stops reading the full listing holds no store
//! connection, reader or snapshot, and its spool leaves no file behind.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use futures_util::StreamExt;
use items_adapters::http::{HttpSettings, SpoolSettings};
use items_adapters::memory::{
    InMemoryItemRepository, InMemoryProductRepository, InMemoryUserRepository,
};
use items_adapters::postgres::{PostgresSettings, PostgresStore};
use items_adapters::sqlite::{SqliteSettings, SqliteStore};
use items_domain::{
    Id, IdempotencyKey, Item, ItemListing, ItemPage, ItemQuery, ItemRepository, Keyed, ListingHead,
    Name, Replaced, RepositoryError,
};
use items_testkit::Fixture;
use items_testkit::Repositories;
use reqwest::Method;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::*;

/// In-memory items that count what their full listings cost: listings
/// opened, listings still held (not yet dropped) and batches handed out.
#[derive(Clone, Default)]
struct Counted {
    items: Arc<InMemoryItemRepository>,
    listings: Arc<AtomicUsize>,
    held: Arc<AtomicUsize>,
    batches: Arc<AtomicUsize>,
}

/// Counts a listing as held until its stream is dropped.
struct Held(Arc<AtomicUsize>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Counted {
    async fn with(count: usize) -> Self {
        let counted = Self::default();
        for n in 1..=count {
            counted
                .items
                .create(Name::parse(&format!("item-{n}")).unwrap())
                .await
                .unwrap();
        }
        counted
    }

    fn spent(&self) -> (usize, usize) {
        (
            self.listings.load(Ordering::SeqCst),
            self.batches.load(Ordering::SeqCst),
        )
    }

    async fn serve(&self) -> TestApp {
        TestApp::spawn(self.services()).await
    }

    fn services(&self) -> TestServices {
        TestServices::over(Repositories::new(
            self.clone(),
            InMemoryProductRepository::new(),
            InMemoryUserRepository::seeded(),
        ))
    }
}

#[async_trait]
impl ItemRepository for Counted {
    async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        self.items.list(query).await
    }

    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        self.listings.fetch_add(1, Ordering::SeqCst);
        let listing = self.items.list_all().await?;
        let batches = Arc::clone(&self.batches);
        self.held.fetch_add(1, Ordering::SeqCst);
        let held = Held(Arc::clone(&self.held));
        Ok(ItemListing {
            batches: listing
                .batches
                .inspect(move |_| {
                    let _held = &held;
                    batches.fetch_add(1, Ordering::SeqCst);
                })
                .boxed(),
            ..listing
        })
    }

    async fn listing_head(&self) -> Result<ListingHead, RepositoryError> {
        self.items.listing_head().await
    }

    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        self.items.get(id).await
    }

    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        self.items.create(name).await
    }

    async fn create_keyed(
        &self,
        name: Name,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Item>, RepositoryError> {
        self.items.create_keyed(name, key, at).await
    }

    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        self.items.replace(item, expected).await
    }

    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        self.items.delete(id).await
    }
}

/// Lets the server finish with the connection: actix-web reads a `HEAD`'s
/// body (to throw it away) after the client already has the headers.
async fn settled(app: &TestApp) {
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(app.get("/").await.status(), 200);
}

#[tokio::test]
async fn head_of_the_full_listing_reads_none_of_its_rows_and_sends_gets_headers_c7_c12() {
    let counted = Counted::with(1500).await;
    let app = counted.serve().await;

    for coding in ["identity", "zstd"] {
        let head = app
            .request(Method::HEAD, "/items")
            .header("accept-encoding", coding)
            .send()
            .await
            .unwrap();
        settled(&app).await;
        assert_eq!(
            counted.spent(),
            (0, 0),
            "HEAD /items ({coding}) opened no listing and read no batch"
        );
        let get = app
            .request(Method::GET, "/items")
            .header("accept-encoding", coding)
            .send()
            .await
            .unwrap();
        for name in [
            "etag",
            "content-type",
            "content-encoding",
            "vary",
            "x-total-count",
            "transfer-encoding",
            "content-length",
        ] {
            assert_eq!(header(&head, name), header(&get, name), "{coding}: {name}");
        }
        assert_eq!(header(&head, "x-total-count"), "1500");
        assert!(head.bytes().await.unwrap().is_empty());
        assert!(get.bytes().await.unwrap().len() > 1024);
        settled(&app).await;
        assert_eq!(counted.spent(), (1, 2), "GET /items read its two batches");
        counted.listings.store(0, Ordering::SeqCst);
        counted.batches.store(0, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_get_whose_if_none_match_names_the_listings_tag_reads_none_of_its_rows_c7_c12() {
    let counted = Counted::with(1500).await;
    let app = counted.serve().await;
    let tag = header(
        &app.request(Method::HEAD, "/items").send().await.unwrap(),
        "etag",
    );

    let cached = app
        .request(Method::GET, "/items")
        .header("if-none-match", tag.as_str())
        .send()
        .await
        .unwrap();

    assert_eq!(cached.status(), 304);
    assert_eq!(header(&cached, "etag"), tag);
    settled(&app).await;
    assert_eq!(counted.spent(), (0, 0), "a 304 needs no row");
}

#[tokio::test]
async fn head_of_a_listing_too_short_to_know_its_size_reads_its_few_rows_only_c7_c12() {
    // 51 items may be under 1 KiB or over it (long names): the rows decide
    // whether GET compresses, so HEAD reads them, one batch, and no more.
    let counted = Counted::with(51).await;
    let app = counted.serve().await;

    let head = app
        .request(Method::HEAD, "/items")
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    settled(&app).await;
    let get = app
        .request(Method::GET, "/items")
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();

    for name in ["etag", "content-encoding", "vary", "x-total-count"] {
        assert_eq!(header(&head, name), header(&get, name), "{name}");
    }
    assert_eq!(header(&get, "content-encoding"), "gzip");
    assert!(counted.spent().1 <= 2, "one batch for HEAD, one for GET");
}

/// A server over `services` whose spools go to a directory of the test's
/// own, so the test can see their files (and nobody else's).
async fn spooling_in(directory: &Path, services: TestServices) -> TestApp {
    let settings = HttpSettings {
        spool: SpoolSettings {
            directory: directory.to_owned(),
            ..SpoolSettings::default()
        },
        ..test_settings()
    };
    TestApp::spawn_with(settings, services).await
}

/// The files this process holds open in `directory`: a spool's file has
/// no name, but `/proc` still shows where it was made. The server runs in
/// the test's process.
fn spool_files_in(directory: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.starts_with(directory))
        .count()
}

/// Waits up to `patience` for `holds` to hold.
async fn eventually(patience: Duration, what: &str, mut holds: impl FnMut() -> bool) {
    let deadline = Instant::now() + patience;
    while !holds() {
        assert!(Instant::now() < deadline, "after {patience:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits a while for a stalled listing to spill to its file: then the
/// store has been read. Not an assertion: what is checked is what every
/// other request gets meanwhile.
async fn spilled(directory: &Path) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while spool_files_in(directory) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client that asks for a resource (the full listing by default), reads
/// its head and then stops: with a receive buffer of 4 KiB, the server
/// soon has nothing it can send, and would wait for it for ever.
struct StalledClient {
    stream: TcpStream,
    /// The response's `Content-Length`; `None` when it is chunked.
    length: Option<usize>,
    /// What came after the head, so far.
    body: Vec<u8>,
}

impl StalledClient {
    async fn ask(port: u16) -> Self {
        Self::ask_for(port, "/items").await
    }

    async fn ask_for(port: u16, path: &str) -> Self {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut read = Vec::new();
        let head_end = loop {
            let mut buffer = [0; 1024];
            let n = stream.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the server closed before the head");
            read.extend_from_slice(&buffer[..n]);
            if let Some(at) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        let head = String::from_utf8_lossy(&read[..head_end]).to_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length: "))
            .map(|length| length.trim().parse().unwrap());
        assert!(
            length.is_some() || head.contains("transfer-encoding: chunked"),
            "{head}"
        );
        Self {
            stream,
            length,
            body: read[head_end..].to_vec(),
        }
    }

    /// Reads on to the end: the body (dechunked), or an error when the
    /// server cut it (a reset, or a close before its end).
    async fn read_the_rest(mut self) -> std::io::Result<Vec<u8>> {
        self.stream.read_to_end(&mut self.body).await?;
        let whole = match self.length {
            Some(length) => (self.body.len() == length).then_some(self.body),
            None => dechunked(&self.body),
        };
        whole.ok_or_else(|| std::io::Error::other("the body ended before its end"))
    }
}

/// A chunked body's bytes, if it ends with its last chunk.
fn dechunked(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = raw.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..line]).ok()?, 16).ok()?;
        raw = &raw[line + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(raw.get(..size)?);
        raw = raw.get(size + 2..)?;
    }
}

#[tokio::test]
async fn a_client_that_stops_reading_the_full_listing_holds_no_listing_and_later_gets_it_whole_c7_c10_c12()
 {
    let spool = TempDir::new().unwrap();
    // ~8.6 MB of JSON: more than the sockets' buffers hold.
    let counted = Counted::with(300_000).await;
    let app = spooling_in(spool.path(), counted.services()).await;
    let whole = app.get("/items").await.bytes().await.unwrap();
    eventually(Duration::from_secs(5), "the first listing let go", || {
        counted.held.load(Ordering::SeqCst) == 0
    })
    .await;
    counted.batches.store(0, Ordering::SeqCst);

    let stalled = StalledClient::ask(app.port).await;

    eventually(
        Duration::from_secs(10),
        "the listing is read to its end and let go while its client reads nothing",
        || counted.held.load(Ordering::SeqCst) == 0,
    )
    .await;
    assert_eq!(counted.batches.load(Ordering::SeqCst), 300);
    assert_eq!(
        spool_files_in(spool.path()),
        1,
        "what the client has not read waits in a file"
    );
    app.create_item("written meanwhile").await;

    let body = stalled.read_the_rest().await.unwrap();
    assert!(body == whole, "the same bytes as the listing read at once");
    eventually(Duration::from_secs(2), "the spool's file is gone", || {
        spool_files_in(spool.path()) == 0
    })
    .await;
}

#[tokio::test]
async fn a_client_that_goes_away_mid_listing_leaves_no_spool_file_c12() {
    let spool = TempDir::new().unwrap();
    let counted = Counted::with(300_000).await;
    let app = spooling_in(spool.path(), counted.services()).await;

    let stalled = StalledClient::ask(app.port).await;
    eventually(
        Duration::from_secs(10),
        "the listing spilled to a file",
        || spool_files_in(spool.path()) == 1,
    )
    .await;
    drop(stalled);

    eventually(Duration::from_secs(2), "the spool's file is gone", || {
        spool_files_in(spool.path()) == 0
    })
    .await;
    eventually(Duration::from_secs(2), "the listing is let go", || {
        counted.held.load(Ordering::SeqCst) == 0
    })
    .await;
}

/// A server over `counted` whose spools go to `directory` and whose
/// clients may read nothing for at most `send_timeout`.
async fn with_send_timeout(directory: &Path, counted: &Counted, send_timeout: Duration) -> TestApp {
    let settings = HttpSettings {
        spool: SpoolSettings {
            directory: directory.to_owned(),
            ..SpoolSettings::default()
        },
        send_timeout,
        ..test_settings()
    };
    TestApp::spawn_with(settings, counted.services()).await
}

#[tokio::test]
async fn a_client_that_reads_nothing_for_the_send_timeout_is_disconnected_c12() {
    let spool = TempDir::new().unwrap();
    let counted = Counted::with(300_000).await;
    let app = with_send_timeout(spool.path(), &counted, Duration::from_millis(500)).await;

    let stalled = StalledClient::ask(app.port).await;
    eventually(
        Duration::from_secs(10),
        "the listing spilled to a file",
        || spool_files_in(spool.path()) == 1,
    )
    .await;
    let stalled_at = Instant::now();

    eventually(
        Duration::from_secs(5),
        "the connection is cut and its response dropped, the spool's file with it",
        || spool_files_in(spool.path()) == 0,
    )
    .await;
    assert!(
        stalled_at.elapsed() < Duration::from_secs(5),
        "cut {:?} after the client stopped",
        stalled_at.elapsed()
    );
    assert!(
        stalled.read_the_rest().await.is_err(),
        "the client finds its response cut short"
    );
    // Every other client is served as before.
    assert_eq!(app.get("/items/1").await.status(), 200);
}

#[tokio::test]
async fn a_client_that_reads_slowly_but_steadily_is_not_disconnected_c12() {
    let spool = TempDir::new().unwrap();
    // ~850 KB: many reads of 64 KiB.
    let counted = Counted::with(30_000).await;
    let app = with_send_timeout(spool.path(), &counted, Duration::from_secs(1)).await;
    let whole = app.get("/items").await.bytes().await.unwrap();

    let mut slow = TcpStream::connect(("127.0.0.1", app.port)).await.unwrap();
    slow.write_all(b"GET /items HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut raw = Vec::new();
    loop {
        let mut block = vec![0; 64 * 1024];
        let n = slow.read(&mut block).await.unwrap();
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&block[..n]);
        // A tenth of the timeout between reads: slow, never silent.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let body = dechunked(&raw[head_end..]).expect("the listing ends with its last chunk");
    assert!(body == whole, "the whole listing, read slowly");
}

#[tokio::test]
async fn a_client_that_reads_nothing_of_any_response_is_disconnected_c12() {
    // A page of 1,000 items of 1 KiB names: a 1 MB body with a length,
    // written whole into the kernel, where it waits on the client.
    let items = InMemoryItemRepository::new();
    let long = "\u{1F600}".repeat(256);
    for _ in 0..1000 {
        items.create(Name::parse(&long).unwrap()).await.unwrap();
    }
    let settings = HttpSettings {
        send_timeout: Duration::from_millis(500),
        ..test_settings()
    };
    let services = TestServices::over(Repositories::new(
        items,
        InMemoryProductRepository::new(),
        InMemoryUserRepository::seeded(),
    ));
    let app = TestApp::spawn_with(settings, services).await;

    let stalled = StalledClient::ask_for(app.port, "/items?limit=1000").await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    assert!(
        stalled.read_the_rest().await.is_err(),
        "the page was cut, not kept waiting for the client"
    );
}

/// Every other kind of request, each answered 2xx at once: reads by id, a
/// page, a create, a replace, and a full listing read by a client that
/// reads.
async fn every_other_request_is_served(app: &TestApp) {
    let started = Instant::now();
    assert_eq!(app.get("/items/1").await.status(), 200);
    assert_eq!(app.get("/items?limit=10").await.status(), 200);
    let created = app
        .post_json("/items", &json!({ "name": "meanwhile" }))
        .await;
    assert_eq!(created.status(), 201);
    let replaced = app
        .put_json("/items/2", &json!({ "name": "renamed" }))
        .await;
    assert_eq!(replaced.status(), 200);
    assert_eq!(
        app.request(Method::HEAD, "/items")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let listed = app.get("/items").await;
    assert_eq!(listed.status(), 200);
    assert!(listed.bytes().await.is_ok(), "a listing read to its end");
    // A store connection held by the stalled listing would answer these
    // 503 after the budget (3 s); the statuses above are the check. The
    // bound only stops a request that waits for ever, and is wide because
    // the listing of ~13 MB is read in a debug build on a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "served in {:?}: some request waited for ever",
        started.elapsed()
    );
}

/// Names of 250 bytes: 50,000 of them make a listing of ~13 MB.
fn long_name(n: usize) -> String {
    format!("{n:0>250}")
}

#[tokio::test]
async fn a_client_that_stops_reading_the_listing_gives_its_connection_back_over_postgres_c12() {
    let scratch = ScratchStore::create().await;
    let client = scratch.database.client().await.unwrap();
    client
        .batch_execute(
            "insert into items (name) \
             select convert_to(lpad(g::text, 250, '0'), 'UTF8') from generate_series(1, 50000) g",
        )
        .await
        .unwrap();
    // One connection: a listing that kept it would answer every other
    // request 503 after the budget.
    let settings = PostgresSettings {
        pool_size: 1,
        statement_timeout: Duration::from_secs(3),
        ..PostgresSettings::default()
    };
    let store = PostgresStore::connect(&scratch.url(), settings, Duration::from_secs(5))
        .await
        .unwrap();
    let spool = TempDir::new().unwrap();
    let app = spooling_in(spool.path(), TestServices::postgres(&store)).await;

    let stalled = StalledClient::ask(app.port).await;
    spilled(spool.path()).await;
    every_other_request_is_served(&app).await;

    let body = stalled.read_the_rest().await.unwrap();
    let listed: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 50_000, "its own snapshot");
    assert_eq!(listed[1]["name"], long_name(2), "as it was when it began");
    drop(app);
    store.close().await;
    scratch.teardown().await;
}

/// What one commit may add past the write-ahead log's limit before the
/// writer truncates it (as in the adapters' WAL test).
const ONE_COMMIT: u64 = 64 * 1024;

#[tokio::test]
async fn a_client_that_stops_reading_the_listing_gives_its_reader_and_snapshot_back_over_sqlite_c12()
 {
    let directory = TempDir::new().unwrap();
    let path = directory.path().join("items.db");
    // One reader, a small log: a listing that kept its reader would
    // answer pages 503, and its snapshot would pin the log past its bound.
    let limit = 256 * 1024;
    let settings = SqliteSettings {
        readers: 1,
        busy_timeout: Duration::from_secs(3),
        wal_limit: limit,
        ..SqliteSettings::default()
    };
    let store = SqliteStore::open(&path, settings).await.unwrap();
    let mut connection = rusqlite::Connection::open(&path).unwrap();
    let transaction = connection.transaction().unwrap();
    for n in 1..=50_000 {
        transaction
            .execute(
                "insert into items (name) values (cast(?1 as blob))",
                [long_name(n)],
            )
            .unwrap();
    }
    transaction.commit().unwrap();
    connection
        .query_row("pragma wal_checkpoint(truncate)", [], |_| Ok(()))
        .unwrap();
    let spool = TempDir::new().unwrap();
    let app = spooling_in(spool.path(), TestServices::sqlite(&store)).await;

    let stalled = StalledClient::ask(app.port).await;
    spilled(spool.path()).await;
    every_other_request_is_served(&app).await;
    let mut largest = 0;
    for n in 0..300 {
        let created = app
            .post_json("/items", &json!({ "name": long_name(n) }))
            .await;
        assert_eq!(created.status(), 201);
        largest = largest.max(store.wal_bytes());
    }
    assert!(
        largest <= limit + ONE_COMMIT,
        "the log stays within its bound while the client reads nothing: {largest} bytes"
    );

    let body = stalled.read_the_rest().await.unwrap();
    let listed: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 50_000, "its own snapshot");
    drop(app);
    store.close().await;
}
