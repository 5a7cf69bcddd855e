//! CORS in a real browser (C8, C9): a page served from another origin calls
//! the service with `fetch` — a JSON POST and a PUT with `If-Match`, both of
//! which make the browser send a preflight — and reports what its script could
//! read. Headless Chromium from Debian's `chromium` package runs the page.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
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

/// Serves the page on its own origin and passes the report back.
async fn serve_page(html: String) -> (u16, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (reports, received) = mpsc::channel(1);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let html = html.clone();
            let reports = reports.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 8192];
                // Read the head, then as much body as Content-Length says.
                let (head_end, length) = loop {
                    let Ok(read) = stream.read(&mut buffer).await else {
                        return;
                    };
                    if read == 0 {
                        return;
                    }
                    request.extend_from_slice(&buffer[..read]);
                    if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&request[..end]).to_lowercase();
                        let length = head
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length:"))
                            .and_then(|value| value.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (end + 4, length);
                    }
                };
                while request.len() < head_end + length {
                    let Ok(read) = stream.read(&mut buffer).await else {
                        return;
                    };
                    if read == 0 {
                        break;
                    }
                    request.extend_from_slice(&buffer[..read]);
                }
                let is_report = request.starts_with(b"POST /report");
                let body = if is_report {
                    let _ = reports
                        .send(String::from_utf8_lossy(&request[head_end..]).into_owned())
                        .await;
                    String::new()
                } else {
                    html
                };
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, received)
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
    let (page_port, mut reports) =
        serve_page(page(&service.client.address, &limited.client.address)).await;
    let profile = tempfile::tempdir().unwrap();

    let _browser = open(&format!("http://127.0.0.1:{page_port}/"), profile.path());
    let report = tokio::time::timeout(Duration::from_secs(60), reports.recv())
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
