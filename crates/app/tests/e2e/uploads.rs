//! Uploads through the binary (C5, C11, C12): a request whose client resets
//! the connection still writes its request line, `UPLOADS_MAX_BYTES` holds
//! over files stored before the start, with its gauges on `/metrics`, and
//! instances sharing `UPLOADS_DIR` never remove each other's uploads in
//! progress.

use std::time::{Duration, Instant};

use items_adapters::http::CLIENT_CLOSED;
use items_testkit::files::listing;
use reqwest::multipart::{Form, Part};

use crate::helpers::*;

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "not in 10 s: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_upload_cut_by_a_reset_is_logged_and_leaves_nothing_c5() {
    let service = Service::start_with_the_default_log(&[]).await;
    let uploads = service.uploads_dir();
    let stream = service.client.start_a_raw_avatar_upload(100_000).await;
    until("the upload is being written", || {
        !listing(&uploads).is_empty()
    })
    .await;

    stream.set_zero_linger().unwrap();
    drop(stream);

    let line = format!("status={CLIENT_CLOSED}");
    let log = service.log_once_it_contains(&line).await;
    let logged = log.lines().find(|l| l.contains(&line)).unwrap();
    assert!(
        logged.contains("method=POST") && logged.contains("path=\"/profile\""),
        "{logged}"
    );
    until("the temporary file is gone", || {
        listing(&uploads).is_empty()
    })
    .await;
}

#[tokio::test]
async fn an_upload_in_progress_survives_a_restart_of_another_instance_on_its_directory_c12() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let directory = tempfile::tempdir().unwrap();
    let uploads = directory.path().to_str().unwrap();
    let settings = [("UPLOADS_DIR", uploads), ("RATE_LIMIT_MAX", "0")];
    let receiving = Service::start(&settings).await;
    let mut other = Service::start(&settings).await;
    let sent = 100_000;
    let mut stream = receiving.client.start_a_raw_avatar_upload(sent).await;
    until("the upload is being written", || {
        !listing(directory.path()).is_empty()
    })
    .await;

    // A rolling restart of the other instance: its start sweeps the
    // directory.
    other.terminate();
    other.wait(Duration::from_secs(10)).await;
    let restarted = Service::start(&settings).await;
    assert_eq!(
        listing(directory.path()).len(),
        1,
        "the upload in progress is still there"
    );

    // The rest of the announced million bytes, and the closing boundary.
    let end = b"\r\n--XYZ--\r\n";
    stream
        .write_all(&vec![9u8; 1_000_000 - sent - end.len()])
        .await
        .unwrap();
    stream.write_all(end).await.unwrap();
    let mut answer = vec![0; 1024];
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    let head = String::from_utf8_lossy(&answer[..read]);
    assert!(head.starts_with("HTTP/1.1 201"), "{head}");
    let stored = listing(directory.path());
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(
        stored[0].len(),
        32,
        "stored under its final name: {stored:?}"
    );
    drop(restarted);
}

fn avatar(bytes: usize) -> Form {
    Form::new().part("avatar", Part::bytes(vec![3u8; bytes]).file_name("a.png"))
}

/// The value of an unlabelled sample in a Prometheus text page.
fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn the_bound_counts_files_stored_before_the_start_and_metrics_show_it_c5_c11() {
    let directory = tempfile::tempdir().unwrap();
    std::fs::write(
        directory.path().join("0123456789abcdef0123456789abcdef"),
        vec![0u8; 1_234],
    )
    .unwrap();
    let uploads_dir = directory.path().to_str().unwrap();
    let service = Service::start(&[
        ("UPLOADS_DIR", uploads_dir),
        ("UPLOADS_MAX_BYTES", "5000"),
        ("ADMIN_PORT", "0"),
        ("RATE_LIMIT_MAX", "0"),
    ])
    .await;
    let gauges = || async {
        let page = service.admin().get("/metrics").await.text().await.unwrap();
        (
            sample(&page, "uploads_stored_bytes"),
            sample(&page, "uploads_max_bytes"),
        )
    };
    assert_eq!(gauges().await, (Some(1_234.0), Some(5_000.0)));

    let stored = service.client.post_form("/profile", avatar(3_000)).await;
    assert_eq!(stored.status(), 201);
    assert_eq!(gauges().await, (Some(4_234.0), Some(5_000.0)));

    let refused = service.client.post_form("/profile", avatar(1_000)).await;
    assert_eq!(refused.status(), 507);
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    assert_eq!(gauges().await, (Some(4_234.0), Some(5_000.0)));
    assert_eq!(listing(directory.path()).len(), 2);
}
