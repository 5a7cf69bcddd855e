//! Hostile clients at the HTTP edge (C5, C6): slow heads and bodies, long
//! URLs and headers, deeply nested JSON, chunked bodies over the limit and
//! request-smuggling shapes. Each gets a clear 4xx or a closed connection —
//! never a 500, a panic, a hang or memory that grows with what it sends —
//! and the server keeps serving everyone else. `docs/security.md` holds the
//! table these tests prove.

use std::time::Duration;

use items_adapters::http::{BodyLimits, HttpSettings, UploadLimits};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// Slow connections opened at once by the slowloris tests.
const SLOW_CLIENTS: usize = 500;

/// What came back on one raw connection.
struct Exchange {
    bytes: Vec<u8>,
    /// The server closed the connection (rather than the read timing out).
    closed: bool,
}

impl Exchange {
    /// The status of the first response, if one arrived.
    fn status(&self) -> Option<u16> {
        let text = String::from_utf8_lossy(&self.bytes);
        let line = text.lines().next()?;
        line.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
    }

    /// How many responses the server wrote.
    fn responses(&self) -> usize {
        String::from_utf8_lossy(&self.bytes)
            .matches("HTTP/1.1 ")
            .count()
    }
}

/// Reads from `stream` until the server closes it or `limit` passes.
async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> Exchange {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 8192];
    let closed = tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(read) => bytes.extend_from_slice(&buffer[..read]),
            }
        }
    })
    .await
    .is_ok();
    Exchange { bytes, closed }
}

/// Sends `request` on a fresh connection and reads what comes back within `limit`.
async fn exchange(app: &TestApp, request: &[u8], limit: Duration) -> Exchange {
    let mut stream = TcpStream::connect(("127.0.0.1", app.port)).await.unwrap();
    // The server may refuse and close before reading all of it.
    let _ = stream.write_all(request).await;
    read_until_closed(&mut stream, limit).await
}

/// A refused request: a 4xx that is not a 5xx, or a connection closed
/// without an answer. Never a hang: the caller's limit stops the read.
fn assert_refused(exchange: &Exchange, what: &str) {
    match exchange.status() {
        Some(status) => assert!(
            (400..500).contains(&status),
            "{what}: status {status}, expected a 4xx"
        ),
        None => assert!(exchange.closed, "{what}: no answer and still open"),
    }
}

/// The server still answers an ordinary client, quickly. A new client on a
/// new connection: a pooled one may just have been closed by the server's
/// keep-alive timer, which would say nothing about the server.
async fn assert_still_serving(app: &TestApp) {
    let fresh = reqwest::Client::new();
    let response = tokio::time::timeout(Duration::from_secs(5), fresh.get(app.url("/")).send())
        .await
        .expect("an ordinary client is served within 5 s")
        .expect("an ordinary client is answered");
    assert_eq!(response.status(), 200);
}

/// Short body timers, so the slow-body test ends in seconds.
async fn app_with_short_body_timers() -> TestApp {
    let defaults = test_settings();
    let settings = HttpSettings {
        body_limits: BodyLimits {
            read_timeout: Duration::from_secs(2),
            ..defaults.body_limits
        },
        upload_limits: UploadLimits {
            idle_timeout: Duration::from_secs(2),
            ..defaults.upload_limits
        },
        ..defaults
    };
    TestApp::spawn_with(settings, TestServices::in_memory()).await
}

/// Opens `count` connections, each having sent `start` and nothing more.
async fn open_slow_connections(app: &TestApp, count: usize, start: &[u8]) -> Vec<TcpStream> {
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = TcpStream::connect(("127.0.0.1", app.port)).await.unwrap();
        stream.write_all(start).await.unwrap();
        streams.push(stream);
    }
    streams
}

/// Every slow connection is answered (408) or closed by the server within `limit`.
async fn assert_all_dropped_by_the_server(streams: Vec<TcpStream>, limit: Duration) {
    let reads = streams
        .into_iter()
        .map(|mut stream| tokio::spawn(async move { read_until_closed(&mut stream, limit).await }));
    for read in futures_util::future::join_all(reads).await {
        let exchange = read.unwrap();
        assert!(exchange.closed, "a slow connection was still open");
        assert_refused(&exchange, "a slow connection");
    }
}

#[tokio::test]
async fn five_hundred_slow_heads_do_not_stop_a_normal_client_being_served() {
    let app = TestApp::in_memory().await;
    let slow = open_slow_connections(&app, SLOW_CLIENTS, b"GET / HTTP/1.1\r\nHost: slow\r\n").await;

    assert_still_serving(&app).await;
    // The head timer (5 s) ends each of them; none stays open for good.
    assert_all_dropped_by_the_server(slow, Duration::from_secs(15)).await;
    assert_still_serving(&app).await;
}

#[tokio::test]
async fn five_hundred_slow_bodies_do_not_stop_a_normal_client_being_served() {
    let app = app_with_short_body_timers().await;
    let json = b"POST /items HTTP/1.1\r\nHost: slow\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"name\":";
    let upload = b"POST /profile HTTP/1.1\r\nHost: slow\r\nContent-Type: multipart/form-data; boundary=XYZ\r\nContent-Length: 100000\r\n\r\n--XYZ\r\nContent-Disposition: form-data; name=\"avatar\"; filename=\"a.png\"\r\n\r\nsome";
    let mut slow = open_slow_connections(&app, SLOW_CLIENTS / 2, json).await;
    slow.extend(open_slow_connections(&app, SLOW_CLIENTS / 2, upload).await);

    assert_still_serving(&app).await;
    assert_all_dropped_by_the_server(slow, Duration::from_secs(15)).await;
    assert_still_serving(&app).await;
    // The stalled uploads had started files: none is left.
    assert_eq!(std::fs::read_dir(app.uploads()).unwrap().count(), 0);
}

#[tokio::test]
async fn very_long_urls_and_headers_are_refused_with_a_4xx_or_a_closed_connection() {
    let app = TestApp::in_memory().await;
    let long = "a".repeat(200_000);
    let many_headers: String = (0..200).map(|n| format!("X-H{n}: v\r\n")).collect();
    let cases = [
        (
            "a 200 kB URL",
            format!("GET /{long} HTTP/1.1\r\nHost: x\r\n\r\n"),
        ),
        (
            "a 200 kB query",
            format!("GET /hello?person={long} HTTP/1.1\r\nHost: x\r\n\r\n"),
        ),
        (
            "a 200 kB header",
            format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {long}\r\n\r\n"),
        ),
        (
            "200 headers",
            format!("GET / HTTP/1.1\r\nHost: x\r\n{many_headers}\r\n"),
        ),
    ];
    for (what, request) in cases {
        let answer = exchange(&app, request.as_bytes(), Duration::from_secs(10)).await;
        assert_refused(&answer, what);
        assert!(answer.closed, "{what}: the connection stayed open");
    }
    assert_still_serving(&app).await;
}

#[tokio::test]
async fn deeply_nested_json_is_a_400_not_a_stack_overflow_c3() {
    let app = TestApp::in_memory().await;
    // 50,000 levels, inside MAX_JSON_BYTES: serde_json stops at 128.
    let depth = 50_000;
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let objects = format!("{}{}", "{\"a\":".repeat(depth / 5), "}".repeat(depth / 5));
    for (path, body) in [
        ("/api/users", format!("{{\"a\":{nested}}}")),
        ("/items", format!("{{\"name\":{nested}}}")),
        (
            "/products",
            format!("{{\"name\":\"p\",\"price\":{nested}}}"),
        ),
        ("/api/users", nested.clone()),
        ("/api/users", objects),
    ] {
        let response = app.post_raw(path, "application/json", body).await;
        assert_problem(response, 400).await;
    }
    assert_still_serving(&app).await;
}

/// A chunked request (no `Content-Length`) with this body, in 1 KiB chunks.
fn chunked(path: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for chunk in body.chunks(1024) {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    request
}

#[tokio::test]
async fn chunked_bodies_without_a_length_over_max_json_bytes_are_413_c3() {
    let app = TestApp::in_memory().await;
    let over = 102_400 + 1;
    let json = format!("{{\"name\":\"{}\"}}", "n".repeat(over));
    let form = format!("username={}", "u".repeat(over));
    for (path, content_type, body) in [
        ("/items", "application/json", json.as_bytes()),
        ("/api/users", "application/json", json.as_bytes()),
        ("/products", "application/json", json.as_bytes()),
        (
            "/login",
            "application/x-www-form-urlencoded",
            form.as_bytes(),
        ),
    ] {
        let answer = exchange(
            &app,
            &chunked(path, content_type, body),
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(answer.status(), Some(413), "chunked POST {path}");
    }
    // Within the limit, chunked is an ordinary body.
    let answer = exchange(
        &app,
        &chunked("/items", "application/json", br#"{"name":"pen"}"#),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(answer.status(), Some(201));
}

/// A request that a proxy reading `Content-Length` and this server reading
/// `Transfer-Encoding` would split differently: the "body" hides a second
/// request that creates an item named `smuggled`.
const SMUGGLED: &str = "POST /items HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 19\r\n\r\n{\"name\":\"smuggled\"}";

async fn assert_nothing_smuggled(app: &TestApp) {
    let items: Value = app.get("/items").await.json().await.unwrap();
    assert_eq!(items, serde_json::json!([]), "a smuggled request ran");
}

#[tokio::test]
async fn content_length_with_transfer_encoding_is_refused_and_the_connection_closed() {
    let app = TestApp::in_memory().await;
    for (what, head) in [
        (
            "CL then TE",
            "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        ),
        (
            "TE then CL",
            "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        ),
    ] {
        let request = format!(
            "POST /items HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{head}\r\n0\r\n\r\n{SMUGGLED}"
        );
        let answer = exchange(&app, request.as_bytes(), Duration::from_secs(10)).await;

        assert_eq!(answer.status(), Some(400), "{what}");
        assert_eq!(answer.responses(), 1, "{what}: a second request was read");
        assert!(answer.closed, "{what}: the connection stayed open");
    }
    assert_nothing_smuggled(&app).await;
}

#[tokio::test]
async fn two_content_lengths_are_refused_and_the_connection_closed() {
    let app = TestApp::in_memory().await;
    for (what, lengths) in [
        ("differing", "Content-Length: 14\r\nContent-Length: 0\r\n"),
        ("equal", "Content-Length: 14\r\nContent-Length: 14\r\n"),
        ("in one header", "Content-Length: 14, 0\r\n"),
    ] {
        let request = format!(
            "POST /items HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{lengths}\r\n{{\"name\":\"ab\"}}{SMUGGLED}"
        );
        let answer = exchange(&app, request.as_bytes(), Duration::from_secs(10)).await;

        assert_refused(&answer, what);
        assert_eq!(
            answer.responses(),
            answer.status().map_or(0, |_| 1),
            "{what}"
        );
        assert!(answer.closed, "{what}: the connection stayed open");
    }
    assert_nothing_smuggled(&app).await;
}
