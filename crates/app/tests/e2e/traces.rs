//! Traces over OTLP (C11): the binary with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! sends its spans to a receiver in this process, over `grpc` (the
//! `fake-opentelemetry-collector` crate) and over `http/protobuf` (a small
//! receiver of `POST /v1/traces` here, decoding `ExportTraceServiceRequest`).
//! A request carrying a W3C `traceparent` through PostgreSQL (coalescing
//! under concurrency) and the Redis budget gives a server span in that
//! trace, a store span and a limiter span under it, and batch spans linked
//! to the requests they served; its JSON log line carries the trace id. An
//! exporter that is down costs spans, counted on `/metrics`, never a
//! request's time; without an endpoint, or with `OTEL_SDK_DISABLED=true`,
//! nothing is sent.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_opentelemetry_collector::FakeCollectorServer;
use items_testkit::postgres::{ScratchDatabase, test_database_url};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use crate::helpers::*;

/// The incoming trace: its id, and the caller's span the request continues.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// How long spans may take to arrive (the batch processor sends every
/// 100 ms in these tests).
const ARRIVAL: Duration = Duration::from_secs(15);

/// A span as either receiver got it, in one shape.
#[derive(Debug, Clone)]
struct Received {
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    /// `SPAN_KIND_SERVER`, `SPAN_KIND_CLIENT`, …
    kind: String,
    /// Each attribute's value as text (`200`, `GET`).
    attributes: BTreeMap<String, String>,
    /// Each link's trace id and span id.
    links: Vec<(String, String)>,
    error: bool,
}

impl Received {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// What a receiver got so far, shared with its task.
type Spans = Arc<Mutex<Vec<Received>>>;

/// `OTEL_EXPORTER_OTLP_PROTOCOL`'s two values and a receiver for each.
#[derive(Debug, Clone, Copy)]
enum Protocol {
    Grpc,
    HttpProtobuf,
}

impl Protocol {
    fn name(self) -> &'static str {
        match self {
            Self::Grpc => "grpc",
            Self::HttpProtobuf => "http/protobuf",
        }
    }

    /// Starts a receiver of this protocol: its endpoint and what it got.
    async fn receiver(self) -> (String, Spans) {
        match self {
            Self::Grpc => grpc_receiver().await,
            Self::HttpProtobuf => {
                let (address, spans) = http_receiver().await;
                (format!("http://{address}"), spans)
            }
        }
    }
}

/// The gRPC collector, drained into the shared list by a task of its own
/// (its channel holds 64 spans, and an export waits while it is full).
async fn grpc_receiver() -> (String, Spans) {
    let mut collector = FakeCollectorServer::start().await.unwrap();
    let endpoint = collector.endpoint();
    let spans = Spans::default();
    let kept = Arc::clone(&spans);
    tokio::spawn(async move {
        loop {
            let arrived = collector
                .exported_spans(1, Duration::from_millis(100))
                .await;
            kept.lock().unwrap().extend(arrived.into_iter().map(|span| {
                Received {
                    attributes: span
                        .attributes
                        .iter()
                        .map(|(key, value)| (key.clone(), from_debug(value)))
                        .collect(),
                    links: span
                        .links
                        .iter()
                        .map(|link| (link.trace_id.clone(), link.span_id.clone()))
                        .collect(),
                    error: span
                        .status
                        .as_ref()
                        .is_some_and(|status| status.code == "STATUS_CODE_ERROR"),
                    trace_id: span.trace_id,
                    span_id: span.span_id,
                    parent: span.parent_span_id,
                    name: span.name,
                    kind: span.kind,
                }
            }));
        }
    });
    (endpoint, spans)
}

/// An attribute's value as the fake collector writes it, `Some(AnyValue {
/// value: Some(StringValue("GET")) })`, as text: `GET`.
fn from_debug(debug: &str) -> String {
    let inner = debug
        .rfind("Value(")
        .map_or(debug, |at| &debug[at + "Value(".len()..]);
    let inner = inner.split(')').next().unwrap_or(inner);
    inner.trim_matches('"').to_owned()
}

/// A receiver of `POST /v1/traces` with `http/protobuf` bodies, on
/// keep-alive connections: each request's spans are kept and answered 200
/// with an empty `ExportTraceServiceResponse`.
async fn http_receiver() -> (SocketAddr, Spans) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let spans = Spans::default();
    let kept = Arc::clone(&spans);
    tokio::spawn(async move {
        while let Ok((connection, _)) = listener.accept().await {
            tokio::spawn(serve_exports(connection, Arc::clone(&kept)));
        }
    });
    (address, spans)
}

async fn serve_exports(mut connection: TcpStream, spans: Spans) {
    let mut buffer = Vec::new();
    loop {
        let head_end = loop {
            if let Some(at) = buffer.windows(4).position(|four| four == b"\r\n\r\n") {
                break at + 4;
            }
            if connection.read_buf(&mut buffer).await.unwrap_or(0) == 0 {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        assert!(head.starts_with("POST /v1/traces "), "{head}");
        let length: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().unwrap())
            })
            .unwrap_or(0);
        while buffer.len() < head_end + length {
            if connection.read_buf(&mut buffer).await.unwrap_or(0) == 0 {
                return;
            }
        }
        let request =
            ExportTraceServiceRequest::decode(&buffer[head_end..head_end + length]).unwrap();
        buffer.drain(..head_end + length);
        spans.lock().unwrap().extend(
            request
                .resource_spans
                .into_iter()
                .flat_map(|resource| resource.scope_spans)
                .flat_map(|scope| scope.spans)
                .map(|span| Received {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent: hex(&span.parent_span_id),
                    kind: span.kind().as_str_name().to_owned(),
                    error: span
                        .status
                        .as_ref()
                        .is_some_and(|status| status.code().as_str_name() == "STATUS_CODE_ERROR"),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|pair| (pair.key.clone(), text(pair.value.as_ref())))
                        .collect(),
                    links: span
                        .links
                        .iter()
                        .map(|link| (hex(&link.trace_id), hex(&link.span_id)))
                        .collect(),
                    name: span.name,
                }),
        );
        let answered = connection
            .write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
            )
            .await;
        if answered.is_err() {
            return;
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|value| value.value.as_ref()) {
        Some(AnyValue::StringValue(text)) => text.clone(),
        Some(AnyValue::IntValue(number)) => number.to_string(),
        Some(AnyValue::BoolValue(flag)) => flag.to_string(),
        Some(AnyValue::DoubleValue(number)) => number.to_string(),
        other => format!("{other:?}"),
    }
}

/// Waits until `found` finds what it looks for among the spans received.
async fn eventually<T>(spans: &Spans, what: &str, found: impl Fn(&[Received]) -> Option<T>) -> T {
    let deadline = Instant::now() + ARRIVAL;
    loop {
        if let Some(found) = found(&spans.lock().unwrap()) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} among the spans received: {:#?}",
            spans.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The settings of a service exporting to `endpoint` over `protocol`,
/// every 100 ms.
fn exporting(endpoint: &str, protocol: Protocol) -> Vec<(&str, &str)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.name()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_SERVICE_NAME", "items-service-under-test"),
    ]
}

/// A traced `GET /items/{id}` among many concurrent reads and creates, over
/// PostgreSQL (two connections, so requests queue and batches form) and the
/// Redis budget; what the receiver got, checked.
async fn a_request_is_traced_through_the_store_and_the_limiter(protocol: Protocol) {
    let (endpoint, spans) = protocol.receiver().await;
    let database = ScratchDatabase::create(&test_database_url()).await.unwrap();
    let url = database.url();
    let mut settings = exporting(&endpoint, protocol);
    settings.extend([
        ("DATABASE_URL", url.as_str()),
        ("DATABASE_POOL_SIZE", "2"),
        // A database of its own, so no other test's budgets are touched.
        ("REDIS_URL", "redis://127.0.0.1:6379/13"),
        ("RATE_LIMIT_MAX", "1000000000"),
        ("LOG_FORMAT", "json"),
    ]);
    let service = Service::start_with_the_default_log(&settings).await;
    let client = service.client.clone();
    let first = client.create_item("first").await;
    let id = first["id"].as_i64().unwrap();
    let traced_path = format!("/items/{id}");
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");

    let mut load = Vec::new();
    for n in 0..120 {
        let client = client.clone();
        let path = traced_path.clone();
        load.push(tokio::spawn(async move {
            let status = if n % 3 == 0 {
                client
                    .post_json("/items", &json!({ "name": format!("load {n}") }))
                    .await
                    .status()
            } else {
                client.get(&path).await.status()
            };
            assert!(status.is_success(), "{status}");
        }));
    }
    let traced = client
        .request(Method::GET, &traced_path)
        .header("traceparent", &traceparent)
        .header("tracestate", "vendor=value")
        .header("user-agent", "traces-test/1")
        .send()
        .await
        .unwrap();
    assert_eq!(traced.status(), 200);
    for request in load {
        request.await.unwrap();
    }

    // The server span, in the caller's trace, under the caller's span.
    let server = eventually(&spans, "server span of the traced request", |spans| {
        spans
            .iter()
            .find(|span| span.trace_id == TRACE_ID && span.kind == "SPAN_KIND_SERVER")
            .cloned()
    })
    .await;
    assert_eq!(server.parent, CALLER_SPAN);
    assert_eq!(server.name, "GET /items/{id}");
    assert_eq!(server.attribute("http.request.method"), Some("GET"));
    assert_eq!(server.attribute("http.route"), Some("/items/{id}"));
    assert_eq!(server.attribute("url.path"), Some(traced_path.as_str()));
    assert_eq!(server.attribute("url.scheme"), Some("http"));
    assert_eq!(server.attribute("http.response.status_code"), Some("200"));
    assert_eq!(server.attribute("client.address"), Some("127.0.0.1"));
    assert_eq!(
        server.attribute("user_agent.original"),
        Some("traces-test/1")
    );
    let port = service.listening.address.port().to_string();
    assert_eq!(server.attribute("server.port"), Some(port.as_str()));
    assert!(!server.error);

    // Its store span and its limiter span, children of it.
    let child = |name: &'static str| {
        let server = server.span_id.clone();
        move |spans: &[Received]| {
            spans
                .iter()
                .find(|span| {
                    span.trace_id == TRACE_ID && span.parent == server && span.name == name
                })
                .cloned()
        }
    };
    let store = eventually(&spans, "store span", child("SELECT items")).await;
    assert_eq!(store.kind, "SPAN_KIND_CLIENT");
    assert_eq!(store.attribute("db.system.name"), Some("postgresql"));
    assert_eq!(store.attribute("db.operation.name"), Some("SELECT"));
    assert_eq!(store.attribute("db.collection.name"), Some("items"));
    let limiter = eventually(&spans, "limiter span", child("EVALSHA")).await;
    assert_eq!(limiter.attribute("db.system.name"), Some("redis"));

    // Point reads always go through the coalescing queue: the batch that
    // served the traced read links to its store span, and it back.
    let linked_to = |target: &Received| {
        let target = (target.trace_id.clone(), target.span_id.clone());
        move |spans: &[Received]| {
            spans
                .iter()
                .find(|span| span.name.starts_with("BATCH") && span.links.contains(&target))
                .cloned()
        }
    };
    let read_batch = eventually(&spans, "batch span of the traced read", linked_to(&store)).await;
    assert_eq!(read_batch.name, "BATCH SELECT items");
    assert_eq!(read_batch.attribute("db.system.name"), Some("postgresql"));
    let size = read_batch.attribute("db.operation.batch.size").unwrap();
    assert_eq!(size, read_batch.links.len().to_string());
    assert_eq!(store.attribute("db.batch.size"), Some(size));
    assert!(
        store
            .links
            .contains(&(read_batch.trace_id.clone(), read_batch.span_id.clone())),
        "the store span links to its batch: {store:#?}"
    );
    let limiter_batch = eventually(&spans, "batch span of the limiter", linked_to(&limiter)).await;
    assert_eq!(limiter_batch.name, "BATCH EVALSHA");

    // Under this load, reads were served many to a statement.
    eventually(&spans, "a batch serving several requests", |spans| {
        spans
            .iter()
            .find(|span| span.name == "BATCH SELECT items" && span.links.len() >= 2)
            .cloned()
    })
    .await;

    // The request's JSON log line carries the same trace id, and its span's.
    let expected = format!("\"trace_id\":\"{TRACE_ID}\"");
    let log = service.log_once_it_contains(&expected).await;
    let line: Value = log
        .lines()
        .filter(|line| line.contains(&expected))
        .map(|line| serde_json::from_str(line).unwrap())
        .next()
        .unwrap();
    assert_eq!(line["path"], traced_path.as_str());
    assert_eq!(line["span_id"], server.span_id.as_str());
    drop(service);
    database.drop().await;
}

#[tokio::test]
async fn a_request_is_traced_through_postgres_and_redis_over_grpc_c11() {
    a_request_is_traced_through_the_store_and_the_limiter(Protocol::Grpc).await;
}

#[tokio::test]
async fn a_request_is_traced_through_postgres_and_redis_over_http_protobuf_c11() {
    a_request_is_traced_through_the_store_and_the_limiter(Protocol::HttpProtobuf).await;
}

/// `otel_spans_dropped_total` summed over its reasons, from `/metrics`.
async fn dropped(service: &Service) -> f64 {
    let metrics = service.admin().get("/metrics").await.text().await.unwrap();
    metrics
        .lines()
        .filter(|line| line.starts_with("otel_spans_dropped_total"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Sends `count` requests one after the other; the slowest one's time.
async fn slowest_of(client: &Client, count: usize) -> Duration {
    let mut slowest = Duration::ZERO;
    for _ in 0..count {
        let started = Instant::now();
        assert_eq!(client.get("/").await.status(), 200);
        slowest = slowest.max(started.elapsed());
    }
    slowest
}

/// An exporter that cannot send (`endpoint`): the requests are answered
/// as fast as without traces, and the spans lost are counted.
async fn an_exporter_that_cannot_send_costs_spans_not_requests(endpoint: &str, protocol: Protocol) {
    let mut settings = exporting(endpoint, protocol);
    settings.extend([
        ("ADMIN_PORT", "0"),
        ("RATE_LIMIT_MAX", "0"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "16"),
    ]);
    let traced = Service::start(&settings).await;
    let plain = Service::start(&[("ADMIN_PORT", "0"), ("RATE_LIMIT_MAX", "0")]).await;
    assert_eq!(dropped(&traced).await, 0.0, "shown from the first scrape");
    // Warm both up alike, then compare loosely.
    slowest_of(&plain.client, 20).await;
    slowest_of(&traced.client, 20).await;
    let started = Instant::now();
    let plain_slowest = slowest_of(&plain.client, 300).await;
    let plain_took = started.elapsed();
    let started = Instant::now();
    let traced_slowest = slowest_of(&traced.client, 300).await;
    let traced_took = started.elapsed();
    println!(
        "{} to {endpoint}: 300 requests in {traced_took:?} (slowest {traced_slowest:?}); \
         without traces {plain_took:?} (slowest {plain_slowest:?})",
        protocol.name()
    );
    // The exporter's own timeout is 10 s: a request that waited for it
    // would show here.
    assert!(
        traced_slowest < Duration::from_secs(2),
        "{traced_slowest:?}"
    );
    assert!(
        traced_took < plain_took * 5 + Duration::from_secs(3),
        "{traced_took:?} against {plain_took:?}"
    );
    let deadline = Instant::now() + ARRIVAL;
    while dropped(&traced).await == 0.0 {
        assert!(Instant::now() < deadline, "no span counted as dropped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_collector_that_never_answers_costs_spans_not_request_time_c11() {
    // Accepts connections (the kernel does) and never reads or answers.
    let blackhole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", blackhole.local_addr().unwrap());
    for protocol in [Protocol::HttpProtobuf, Protocol::Grpc] {
        an_exporter_that_cannot_send_costs_spans_not_requests(&endpoint, protocol).await;
    }
    drop(blackhole);
}

/// At exit the last spans get 2 s (`SHUTDOWN_PATIENCE`): a collector that
/// never answers holds the exit that long after the `stopped` line, and
/// no longer, and the log says why.
#[tokio::test]
async fn a_collector_that_never_answers_holds_the_exit_2_s_and_the_log_says_so_c11() {
    let blackhole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", blackhole.local_addr().unwrap());
    let mut settings = exporting(&endpoint, Protocol::HttpProtobuf);
    settings.extend([("ADMIN_PORT", "0"), ("SHUTDOWN_DRAIN_MS", "0")]);
    let mut service = Service::start(&settings).await;
    assert_eq!(service.client.get("/").await.status(), 200);
    // The batch goes out (and hangs) every 100 ms; these wait behind it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(service.client.get("/").await.status(), 200);

    service.terminate();
    let log = service.log_once_it_contains("items_service: stopped").await;
    let stopped = Instant::now();
    let status = service.wait(Duration::from_secs(10)).await;
    let held = stopped.elapsed();

    assert!(status.success(), "{status:?}");
    assert!(held < Duration::from_secs(4), "held the exit {held:?}");
    let log = std::fs::read_to_string(service.log_path()).unwrap_or(log);
    assert!(
        log.contains(
            "the last spans were not sent: the OTLP collector did not take them within 2 s"
        ),
        "{log}"
    );
    drop(blackhole);
}

#[tokio::test]
async fn a_collector_that_is_not_there_costs_spans_not_request_time_c11() {
    // A port that was just free: connections to it are refused.
    let refusing = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", refusing.local_addr().unwrap());
    drop(refusing);
    an_exporter_that_cannot_send_costs_spans_not_requests(&endpoint, Protocol::HttpProtobuf).await;
}

#[tokio::test]
async fn nothing_is_exported_without_an_endpoint_or_with_the_sdk_disabled_c11() {
    let (endpoint, spans) = Protocol::HttpProtobuf.receiver().await;
    let mut disabled = exporting(&endpoint, Protocol::HttpProtobuf);
    disabled.extend([("OTEL_SDK_DISABLED", "true"), ("ADMIN_PORT", "0")]);
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    for settings in [
        disabled,
        vec![("ADMIN_PORT", "0"), ("OTEL_BSP_SCHEDULE_DELAY", "100")],
    ] {
        let service = Service::start_with_the_default_log(&settings).await;
        for _ in 0..20 {
            let answered = service
                .client
                .request(Method::GET, "/items")
                .header("traceparent", &traceparent)
                .send()
                .await
                .unwrap();
            assert_eq!(answered.status(), 200);
        }
        let log = service.log_once_it_contains("path=\"/items\"").await;
        assert!(!log.contains("trace_id"), "{log}");
        let metrics = service.admin().get("/metrics").await.text().await.unwrap();
        assert!(!metrics.contains("otel_spans_dropped_total"), "{metrics}");
    }
    // Ten of the batch processor's periods.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(spans.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_unknown_protocol_stops_the_start_with_one_line_naming_it_c1() {
    let output = binary()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
        .env("PORT", "0")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("items-service: invalid OTEL_EXPORTER_OTLP_PROTOCOL"),
        "{stderr}"
    );
}
