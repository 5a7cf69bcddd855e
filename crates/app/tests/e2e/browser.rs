//! CORS in a real browser (C8, C9): a page served from another origin calls
//! the service with `fetch` — a JSON POST and a PUT with `If-Match`, both of
//! which make the browser send a preflight — and reports what its script could
//! read. Headless Chromium from Debian's `chromium` package runs the page.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::{HttpResponse, HttpServer, web};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::helpers::*;

const CHROMIUM: &str = "/usr/bin/chromium";

/// The page's script: every step's status and the headers a cross-origin
/// script may only read when the service exposes them.
fn page(service: &str, limited: &str) -> String {
    format!(
        r#"<!doctype html><meta charset="utf-8"><title>cors</title><script>
const B = "{service}", L = "{limited}";
const headers = (r, names) => Object.fromEntries(names.map(n => [n, r.headers.get(n)]));
async function run() {{
  const out = {{}};
  let r = await fetch(B + "/items", {{ method: "POST", headers: {{ "Content-Type": "application/json" }},
                                      body: JSON.stringify({{ name: "from the browser" }}) }});
  out.create = {{ status: r.status, body: await r.json(), ...headers(r, ["Location", "RateLimit-Remaining", "RateLimit-Limit"]) }};
  const id = out.create.body.id;
  r = await fetch(B + "/items/" + id);
  out.read = {{ status: r.status, ...headers(r, ["ETag", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy"]) }};
  r = await fetch(B + "/items/" + id, {{ method: "PUT", headers: {{ "Content-Type": "application/json", "If-Match": out.read.ETag }},
                                       body: JSON.stringify({{ name: "renamed" }}) }});
  out.replace = {{ status: r.status, body: await r.json(), ...headers(r, ["RateLimit-Remaining"]) }};
  r = await fetch(B + "/items/" + id, {{ method: "PUT", headers: {{ "Content-Type": "application/json", "If-Match": out.read.ETag }},
                                       body: JSON.stringify({{ name: "stale" }}) }});
  out.stale = {{ status: r.status }};
  r = await fetch(B + "/items?limit=1");
  out.list = {{ status: r.status, ...headers(r, ["X-Total-Count", "Link"]) }};
  r = await fetch(B + "/items/" + id, {{ method: "DELETE" }});
  out.remove = {{ status: r.status }};
  r = await fetch(B + "/items/" + id);
  out.gone = {{ status: r.status, body: await r.text() }};
  await fetch(L + "/");
  r = await fetch(L + "/");
  out.limited = {{ status: r.status, ...headers(r, ["Retry-After", "RateLimit-Remaining"]) }};
  return out;
}}
run().then(out => out, error => ({{ error: String(error) }}))
     .then(out => fetch("/report", {{ method: "POST", body: JSON.stringify(out) }}));
</script>"#
    )
}

/// The page's own origin: `GET /` serves it, `POST /report` passes its
/// report to the test. Stopped on drop.
struct PageServer {
    port: u16,
    reports: mpsc::Receiver<String>,
    handle: ServerHandle,
}

impl PageServer {
    fn start(html: String) -> Self {
        let (sender, reports) = mpsc::channel(1);
        let server = HttpServer::new(move || {
            let html = html.clone();
            let sender = sender.clone();
            actix_web::App::new()
                .route(
                    "/",
                    web::get().to(move || {
                        let page = HttpResponse::Ok()
                            .content_type("text/html; charset=utf-8")
                            .body(html.clone());
                        async move { page }
                    }),
                )
                .route(
                    "/report",
                    web::post().to(move |report: String| {
                        let sender = sender.clone();
                        async move {
                            let _ = sender.send(report).await;
                            HttpResponse::Ok().finish()
                        }
                    }),
                )
        })
        .workers(1)
        .bind(("127.0.0.1", 0))
        .unwrap();
        let port = server.addrs()[0].port();
        let server = server.run();
        let handle = server.handle();
        tokio::spawn(server);
        Self {
            port,
            reports,
            handle,
        }
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        // The stop command is sent at once; nothing needs to wait for it.
        drop(self.handle.stop(false));
    }
}

/// Headless Chromium on `url`, killed on drop.
struct Browser(Child);

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn open(url: &str, profile: &Path) -> Browser {
    let child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Browser(child)
}

/// The browser must be there: a test that cannot run fails, it never
/// returns early and counts as a pass (`.ci/run` installs chromium).
fn assert_chromium_installed() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install it (apt-get install chromium) to run the browser test"
    );
}

#[tokio::test]
async fn a_page_on_another_origin_can_call_the_service_and_read_its_headers_c8_c9() {
    assert_chromium_installed();
    let service = App::start(&[("RATE_LIMIT_MAX", "1000")]).await;
    let limited = App::start(&[("RATE_LIMIT_MAX", "1"), ("RATE_LIMIT_WINDOW_MS", "60000")]).await;
    let mut page_server = PageServer::start(page(&service.client.address, &limited.client.address));
    let profile = tempfile::tempdir().unwrap();

    let _browser = open(
        &format!("http://127.0.0.1:{}/", page_server.port),
        profile.path(),
    );
    let report = tokio::time::timeout(Duration::from_secs(60), page_server.reports.recv())
        .await
        .expect("the page reported in time")
        .unwrap();
    let report: Value = serde_json::from_str(&report).unwrap();

    assert!(report.get("error").is_none(), "the page failed: {report}");
    let create = &report["create"];
    assert_eq!(create["status"], 201, "{report}");
    assert_eq!(
        create["Location"],
        format!("/items/{}", create["body"]["id"])
    );
    assert_eq!(create["RateLimit-Limit"], "1000");
    let remaining = |step: &Value| {
        step["RateLimit-Remaining"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let read = &report["read"];
    assert_eq!(read["status"], 200);
    assert!(
        read["ETag"]
            .as_str()
            .is_some_and(|tag| tag.starts_with('"')),
        "{report}"
    );
    assert_eq!(remaining(read), remaining(create) - 1);
    assert_eq!(read["RateLimit-Policy"], "1000;w=900");
    assert!(
        read["RateLimit-Reset"]
            .as_str()
            .is_some_and(|reset| reset.parse::<u64>().is_ok())
    );
    assert_eq!(report["replace"]["status"], 200);
    assert_eq!(report["replace"]["body"]["name"], "renamed");
    // The PUT needed a preflight; only the PUT itself was counted (C8).
    assert_eq!(remaining(&report["replace"]), remaining(read) - 1);
    assert_eq!(report["stale"]["status"], 412);
    assert_eq!(report["list"]["status"], 200);
    assert_eq!(report["list"]["X-Total-Count"], "1");
    assert_eq!(report["remove"]["status"], 204);
    assert_eq!(report["gone"]["status"], 404);
    assert_eq!(report["gone"]["body"], "Item not found");
    assert_eq!(report["limited"]["status"], 429, "{report}");
    assert!(
        report["limited"]["Retry-After"]
            .as_str()
            .is_some_and(|secs| secs.parse::<u64>().unwrap() >= 1)
    );
    assert_eq!(report["limited"]["RateLimit-Remaining"], "0");

    // The service saw the same story.
    let listed: Value = reqwest::get(service.url("/items"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed, serde_json::json!([]));
}
