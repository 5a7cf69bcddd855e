//! The admin listener (C11): the probes, the metrics text, and that none of
//! it is reachable on the public port.

use std::net::TcpListener;
use std::sync::{Arc, OnceLock};

use actix_web::dev::ServerHandle;
use items_adapters::http::admin::Detail;
use items_adapters::http::metrics::{REQUEST_DURATION, REQUEST_DURATION_BUCKETS, describe};
use items_adapters::http::{AdminServer, ApiDocs, Readiness, RenderMetrics};
use items_domain::{DependencyDown, HealthCheck, ports::MockHealthCheck};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde_json::Value;

use crate::support::*;

/// The process-wide recorder, installed once for every test of this binary,
/// as the binary installs it (`crates/app/src/metrics.rs`).
fn recorder() -> &'static PrometheusHandle {
    static RECORDER: OnceLock<PrometheusHandle> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full(REQUEST_DURATION.to_owned()),
                REQUEST_DURATION_BUCKETS,
            )
            .unwrap()
            .install_recorder()
            .unwrap();
        describe();
        handle
    })
}

/// A running admin server; stopped on drop.
struct TestAdmin {
    address: String,
    readiness: Arc<Readiness>,
    client: reqwest::Client,
    handle: ServerHandle,
}

impl Drop for TestAdmin {
    fn drop(&mut self) {
        let handle = self.handle.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { handle.stop(false).await });
        }
    }
}

impl TestAdmin {
    async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .unwrap()
    }

    async fn metrics_text(&self) -> String {
        let response = self.get("/metrics").await;
        assert_eq!(response.status(), 200);
        assert!(header(&response, "content-type").starts_with("text/plain; version=0.0.4"));
        response.text().await.unwrap()
    }
}

async fn spawn_admin(checks: Vec<Arc<dyn HealthCheck>>) -> TestAdmin {
    spawn_admin_with(checks, Vec::new()).await
}

async fn spawn_admin_with(
    needed: Vec<Arc<dyn HealthCheck>>,
    degradable: Vec<Arc<dyn HealthCheck>>,
) -> TestAdmin {
    spawn_ready_with(Readiness::new(needed, degradable)).await
}

async fn spawn_ready_with(readiness: Arc<Readiness>) -> TestAdmin {
    let recorder = recorder().clone();
    let render: RenderMetrics = Arc::new(move || recorder.render());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = AdminServer::bind(
        listener,
        Arc::clone(&readiness),
        render,
        &ApiDocs::for_public_port(0),
    )
    .unwrap();
    let address = format!("http://127.0.0.1:{}", server.port());
    let handle = server.handle();
    tokio::spawn(server.run());
    TestAdmin {
        address,
        readiness,
        client: reqwest::Client::new(),
        handle,
    }
}

fn dependency(name: &'static str, answers: bool) -> Arc<dyn HealthCheck> {
    let mut check = MockHealthCheck::new();
    check.expect_name().return_const(name);
    check.expect_ping().returning(move || {
        if answers {
            Ok(())
        } else {
            Err(DependencyDown::new("connection refused"))
        }
    });
    Arc::new(check)
}

#[actix_web::test]
async fn livez_answers_200_without_asking_any_dependency_c11() {
    let mut never_asked = MockHealthCheck::new();
    never_asked.expect_name().return_const("database");
    never_asked.expect_ping().never();
    let admin = spawn_admin(vec![Arc::new(never_asked)]).await;

    let response = admin.get("/livez").await;
    assert_eq!(response.status(), 200);
}

#[actix_web::test]
async fn readyz_answers_200_when_every_dependency_answers_c11() {
    let admin = spawn_admin(vec![
        dependency("database", true),
        dependency("redis", true),
    ])
    .await;

    let response = admin.get("/readyz").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "ready");
    assert_eq!(body["checks"]["database"], "ok");
    assert_eq!(body["checks"]["redis"], "ok");
}

#[actix_web::test]
async fn readyz_adds_a_dependencys_detail_to_its_ok_and_only_there_c11() {
    let detail: Detail = Arc::new(|| Some("writing to db2:5433".to_owned()));
    let answering = spawn_ready_with(Readiness::with_details(
        vec![dependency("database", true), dependency("redis", true)],
        Vec::new(),
        vec![("database", Arc::clone(&detail))],
    ))
    .await;
    let failing = spawn_ready_with(Readiness::with_details(
        vec![dependency("database", false)],
        Vec::new(),
        vec![("database", detail)],
    ))
    .await;

    let answered: Value = answering.get("/readyz").await.json().await.unwrap();
    let failed = failing.get("/readyz").await;

    assert_eq!(answered["checks"]["database"], "ok: writing to db2:5433");
    assert_eq!(answered["checks"]["redis"], "ok");
    assert_eq!(failed.status(), 503);
    let failed: Value = failed.json().await.unwrap();
    let why = failed["checks"]["database"].as_str().unwrap();
    assert!(
        why.contains("connection refused") && !why.contains("db2"),
        "{why}"
    );
}

#[actix_web::test]
async fn readyz_answers_503_naming_the_dependency_that_failed_c11() {
    let admin = spawn_admin(vec![
        dependency("database", false),
        dependency("redis", true),
    ])
    .await;

    let response = admin.get("/readyz").await;
    assert_eq!(response.status(), 503);
    assert!(header(&response, "content-type").starts_with("application/json"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "not ready");
    let failure = body["checks"]["database"].as_str().unwrap();
    assert!(failure.contains("connection refused"), "{failure}");
    assert_eq!(body["checks"]["redis"], "ok");
}

#[actix_web::test]
async fn a_degradable_dependency_that_fails_is_named_but_keeps_the_instance_ready_c9_c11() {
    let admin = spawn_admin_with(
        vec![dependency("database", true)],
        vec![dependency("redis", false)],
    )
    .await;

    let response = admin.get("/readyz").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "degraded");
    assert_eq!(body["checks"]["database"], "ok");
    assert!(
        body["checks"]["redis"]
            .as_str()
            .unwrap()
            .contains("connection refused")
    );
}

#[actix_web::test]
async fn readyz_answers_503_from_the_moment_a_shutdown_begins_c11() {
    let admin = spawn_admin(vec![dependency("database", true)]).await;
    assert_eq!(admin.get("/readyz").await.status(), 200);

    admin.readiness.begin_shutdown();

    let response = admin.get("/readyz").await;
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "shutting down");
    assert_eq!(admin.get("/livez").await.status(), 200, "still alive");
}

#[actix_web::test]
async fn the_admin_listener_serves_nothing_else_c11() {
    let admin = spawn_admin(Vec::new()).await;

    assert_problem(admin.get("/items").await, 404).await;
    let post = admin
        .client
        .post(format!("{}/readyz", admin.address))
        .send()
        .await
        .unwrap();
    assert_ne!(post.status(), 200);
}

#[actix_web::test]
async fn the_public_port_keeps_exactly_the_spec_routes_c11() {
    let app = TestApp::in_memory().await;

    for path in ["/livez", "/readyz", "/metrics"] {
        assert_problem(app.get(path).await, 404).await;
    }
}

#[actix_web::test]
async fn request_durations_are_labelled_by_route_template_never_raw_path_c11() {
    let admin = spawn_admin(Vec::new()).await;
    let app = TestApp::in_memory().await;
    let item = app.create_item("metered").await;
    let path = format!("/items/{}", item["id"]);
    assert_eq!(app.get(&path).await.status(), 200);
    assert_eq!(app.get("/no/such/route/4711").await.status(), 404);

    let text = admin.metrics_text().await;
    assert!(text.contains("# TYPE http_server_request_duration_seconds histogram"));
    assert!(text.contains(
        r#"http_server_request_duration_seconds_count{method="GET",route="/items/{id}",status="200"}"#
    ), "{text}");
    assert!(text.contains(
        r#"http_server_request_duration_seconds_bucket{method="POST",route="/items",status="201",le="0.005"}"#
    ), "{text}");
    assert!(text.contains(r#"route="unmatched",status="404""#), "{text}");
    assert!(!text.contains(&path), "a raw path became a label: {text}");
    assert!(!text.contains("4711"), "a raw path became a label: {text}");
    assert!(text.contains("# TYPE http_server_active_requests gauge"));
}

#[actix_web::test]
async fn uploaded_bytes_are_counted_c11() {
    let admin = spawn_admin(Vec::new()).await;
    let app = TestApp::in_memory().await;
    let before = counter(&admin.metrics_text().await, "uploaded_bytes_total");
    let file = vec![b'x'; 1234];
    let form = reqwest::multipart::Form::new().part(
        "avatar",
        reqwest::multipart::Part::bytes(file).file_name("a.png"),
    );
    let response = app.post_form("/profile", form).await;
    assert_eq!(response.status(), 201);

    let after = counter(&admin.metrics_text().await, "uploaded_bytes_total");
    // Other tests of this binary upload at the same time: at least ours.
    assert!(after >= before + 1234, "{before} → {after}");
}

#[actix_web::test]
async fn the_change_feed_reports_its_streams_events_cuts_and_lag_c11_c14() {
    let admin = spawn_admin(Vec::new()).await;
    let app = TestApp::in_memory().await;
    let before = counter(&admin.metrics_text().await, "changes_events_sent_total");
    let (mut stream, _, _) = EventStream::subscribe(&app, None).await;
    app.create_item("metered").await;
    stream.event().await;

    let text = admin.metrics_text().await;
    // Other tests of this binary stream at the same time: at least ours.
    let after = counter(&text, "changes_events_sent_total");
    assert!(after > before, "{before} → {after}");
    assert!(text.contains("# TYPE changes_streams_open gauge"), "{text}");
    assert!(text.contains("changes_feed_lag_seconds"), "{text}");
    assert!(
        text.contains(r#"changes_disconnects_total{reason="slow"}"#),
        "{text}"
    );
    assert!(text.contains("changes_streams_refused_total"), "{text}");
}

/// The value of an unlabelled counter in Prometheus text.
fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn the_admin_listener_serves_the_openapi_document_as_the_binary_prints_it_c11() {
    let admin = spawn_admin(Vec::new()).await;

    let response = admin.get("/openapi.json").await;

    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), "application/json");
    let printed = std::process::Command::new(env!("CARGO_BIN_EXE_items-service"))
        .arg("openapi")
        .output()
        .unwrap();
    assert!(printed.status.success());
    let served = response.bytes().await.unwrap();
    assert!(
        served.ends_with(b"}\n"),
        "ends in a newline, as the CLI prints it"
    );
    assert!(
        served[..] == printed.stdout[..],
        "the same bytes as `items-service openapi`"
    );
}

#[tokio::test]
async fn the_admin_listener_serves_an_interactive_page_from_files_built_in_c11() {
    let admin = spawn_admin(Vec::new()).await;

    let page = admin.get("/docs").await;
    assert_eq!(page.status(), 200);
    assert!(header(&page, "content-type").starts_with("text/html"));
    let html = page.text().await.unwrap();
    assert!(
        html.contains("SwaggerUIBundle") && html.contains("/openapi.json"),
        "{html}"
    );
    for file in ["/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css"] {
        let asset = admin.get(file).await;
        assert_eq!(asset.status(), 200, "{file}");
        assert!(asset.bytes().await.unwrap().len() > 1000, "{file}");
    }
    assert_eq!(admin.get("/docs/no-such-file.js").await.status(), 404);
}

#[tokio::test]
async fn the_public_port_serves_neither_the_document_nor_the_page_c11() {
    let app = TestApp::in_memory().await;

    for path in ["/openapi.json", "/docs"] {
        assert_problem(app.get(path).await, 404).await;
    }
}
