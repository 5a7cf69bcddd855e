//! The built binary over a SQLite file (C1, C11, C12): the start-up line
//! names the file, the data and the id counter outlive a graceful stop,
//! readiness and metrics cover the store, a path that cannot be used is
//! one line and the exit status C1 gives, a file or directory that cannot
//! be written stops the start, and a file deleted or replaced under the
//! running service stops its writes and its readiness.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::*;

#[tokio::test]
async fn items_and_the_id_counter_survive_a_restart_on_a_sqlite_file_c2_c12() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("items.db");
    let url = format!("sqlite://{}", file.display());
    let settings = [("DATABASE_URL", url.as_str()), ("RATE_LIMIT_MAX", "0")];

    let mut first = Service::start(&settings).await;
    let kept = first.client.create_item("kept").await;
    let gone = first.client.create_item("gone").await;
    let renamed = first
        .client
        .put_json("/items/1", &json!({"name": "kept, renamed"}))
        .await;
    assert_eq!(renamed.status(), 200);
    assert_eq!(
        first
            .client
            .delete(&format!("/items/{}", gone["id"]))
            .await
            .status(),
        204
    );
    first.terminate();
    assert!(first.wait(Duration::from_secs(35)).await.success());
    // Closed after the drain, the writer last: the WAL was checkpointed
    // into the file and removed, so the stopped store is one file.
    assert!(!directory.path().join("items.db-wal").exists());
    assert!(!directory.path().join("items.db-shm").exists());

    let second = Service::start(&settings).await;
    let listed: Vec<Value> = second.client.get("/items").await.json().await.unwrap();
    assert_eq!(listed, [json!({"id": kept["id"], "name": "kept, renamed"})]);
    // The counter went on past the deleted item's id: never reused (C2).
    let next = second.client.create_item("next").await;
    assert_eq!(next["id"], 3, "{next}");
}

#[tokio::test]
async fn the_start_up_line_names_the_sqlite_file_and_the_admin_port_reports_on_it_c1_c11() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("items.db");
    let url = format!("sqlite:{}", file.display());
    let service = Service::start(&[
        ("DATABASE_URL", url.as_str()),
        ("ADMIN_PORT", "0"),
        ("RATE_LIMIT_MAX", "0"),
    ])
    .await;

    let log = service.log_once_it_contains("listening").await;
    let line = log.lines().find(|line| line.contains("listening")).unwrap();
    assert!(
        line.ends_with(&format!("store=sqlite path={}", file.display())),
        "{line}"
    );
    assert!(file.is_file(), "the file is created when missing");

    let ready = service.admin().get("/readyz").await;
    assert_eq!(ready.status(), 200);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["checks"]["database"], "ok", "{ready}");

    let creates: Vec<_> = (0..20)
        .map(|n| {
            let client = service.client.clone();
            tokio::spawn(async move { client.create_item(&format!("n{n}")).await })
        })
        .collect();
    for create in creates {
        create.await.unwrap();
    }
    let metrics = service.admin().get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("\nsqlite_writer_queue_depth 0\n"),
        "{metrics}"
    );
    assert!(metrics.contains("\nservice_ready 1\n"), "{metrics}");
    let wal_bytes = metrics
        .lines()
        .find_map(|line| line.strip_prefix("sqlite_wal_bytes "))
        .and_then(|value| value.parse::<f64>().ok());
    assert!(
        wal_bytes.is_some_and(|bytes| bytes > 0.0),
        "the write-ahead log's size (C11, C12): {metrics}"
    );
    assert!(
        metrics.contains("sqlite_writes_per_commit_bucket{le=\"1\"}"),
        "{metrics}"
    );
    // Every write was counted in some commit: the histogram's sum is 20.
    assert!(
        metrics.contains("\nsqlite_writes_per_commit_sum 20\n"),
        "{metrics}"
    );
}

#[test]
fn a_sqlite_path_in_a_missing_directory_exits_2_with_one_line_c1() {
    let directory = tempfile::tempdir().unwrap();
    let missing = directory.path().join("no-such-directory").join("items.db");
    for url in [
        format!("sqlite://{}", missing.display()),
        format!("sqlite:{}", missing.display()),
        format!("sqlite://{}", directory.path().display()),
    ] {
        let (status, _, stderr) = run_to_exit(&[("DATABASE_URL", &url), ("PORT", "0")], &[]);

        assert_eq!(status.code(), Some(2), "{url}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
        assert!(
            stderr.starts_with("items-service: invalid DATABASE_URL"),
            "{stderr:?}"
        );
    }
    assert!(!missing.exists());
}

#[test]
fn a_sqlite_file_that_is_no_database_exits_1_with_one_line_c1() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("notes.txt");
    std::fs::write(
        &file,
        "these are notes, not a database, and long enough to tell".repeat(20),
    )
    .unwrap();
    let url = format!("sqlite://{}", file.display());

    let (status, _, stderr) = run_to_exit(&[("DATABASE_URL", &url), ("PORT", "0")], &[]);

    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains(&file.display().to_string()), "{stderr:?}");
}

#[test]
fn sqlite_memory_is_refused_with_one_line_pointing_to_the_default_c1() {
    let (status, _, stderr) = run_to_exit(&[("DATABASE_URL", "sqlite::memory:")], &[]);

    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains("DATABASE_URL"), "{stderr:?}");
    assert!(
        stderr.contains("in-memory store is the default"),
        "{stderr:?}"
    );
}

#[test]
fn a_file_and_directory_the_service_cannot_write_exit_1_at_start_with_one_line_c12() {
    use std::os::unix::fs::PermissionsExt as _;

    // Made by this user, readable by all, writable by none other: the
    // binary runs unprivileged, as the shipped unit runs it.
    let directory = tempfile::tempdir().unwrap();
    std::fs::set_permissions(directory.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = directory.path().join("items.db");
    let url = format!("sqlite://{}", file.display());
    let (status, _, _) = run_to_exit(&[("DATABASE_URL", url.as_str())], &["migrate"]);
    assert!(status.success(), "the file is made and migrated");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let uploads = tempfile::tempdir().unwrap();
    std::fs::set_permissions(uploads.path(), std::fs::Permissions::from_mode(0o777)).unwrap();

    let (status, stdout, stderr) = run_command_to_exit(
        binary_unprivileged(),
        &[
            ("DATABASE_URL", url.as_str()),
            ("UPLOADS_DIR", uploads.path().to_str().unwrap()),
            ("PORT", "0"),
            ("HOST", "127.0.0.1"),
        ],
        &[],
    );

    assert_eq!(status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains("items.db"), "names the file: {stderr:?}");
}

/// A service on a fresh SQLite file in `directory`, with an admin listener.
async fn on_a_file(directory: &tempfile::TempDir) -> Service {
    let url = format!("sqlite://{}", directory.path().join("items.db").display());
    Service::start(&[
        ("DATABASE_URL", url.as_str()),
        ("ADMIN_PORT", "0"),
        ("RATE_LIMIT_MAX", "0"),
    ])
    .await
}

/// Writes are refused (503) and readiness is 503 naming the file, which
/// the log names in an error too.
async fn assert_file_lost(service: &Service, what: &str) {
    let refused = service
        .client
        .post_json("/items", &json!({"name": "after"}))
        .await;
    assert_eq!(refused.status(), 503, "a write into a {what} file");
    let ready = service.admin().get("/readyz").await;
    assert_eq!(ready.status(), 503);
    let body = ready.text().await.unwrap();
    assert!(body.contains("items.db") && body.contains(what), "{body}");
    let metrics = service.admin().get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains("\nservice_ready 0\n"), "{metrics}");
    let log = service.log_once_it_contains(what).await;
    assert!(
        log.lines()
            .any(|line| line.contains("ERROR") && line.contains(what)),
        "{log}"
    );
}

#[tokio::test]
async fn a_file_deleted_under_the_running_service_refuses_writes_and_readiness_c12() {
    let directory = tempfile::tempdir().unwrap();
    let service = on_a_file(&directory).await;
    service.client.create_item("before").await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(directory.path().join(format!("items.db{suffix}")));
    }

    assert_file_lost(&service, "deleted").await;
}

#[tokio::test]
async fn a_file_replaced_under_the_running_service_refuses_writes_and_readiness_c12() {
    let directory = tempfile::tempdir().unwrap();
    let service = on_a_file(&directory).await;
    service.client.create_item("before").await;
    let elsewhere = directory.path().join("other.db");
    std::fs::copy(directory.path().join("items.db"), &elsewhere).unwrap();
    std::fs::rename(&elsewhere, directory.path().join("items.db")).unwrap();

    assert_file_lost(&service, "replaced").await;
}
