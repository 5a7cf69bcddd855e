//! Backup and restore as `docs/operations.md` "Back up and restore" writes
//! them (C12), the documented commands run as an operator runs them:
//! PostgreSQL by `pg_dump` and `pg_restore` into a new database, the
//! uploads directory by `tar`, SQLite by moving an `items-service backup`
//! into place after a killed service. Each time a service started on the
//! restore lists the same bytes as the original did.

use std::path::Path;
use std::process::Command;

use crate::support::header;
use items_testkit::postgres::{ScratchDatabase, test_database_url};
use reqwest::multipart::{Form, Part};
use serde_json::Value;

use crate::helpers::*;

/// Fills a service: 12 items, names to come back byte for byte, the last
/// two deleted so that its id counter (12) is above the largest id left,
/// and two products.
async fn fill(service: &Client) {
    let names = ["pen", "crème brûlée", "🦀", "nul\u{0}byte", " spaced "];
    for index in 0..12 {
        service.create_item(names[index % names.len()]).await;
    }
    for id in [11, 12] {
        assert_eq!(service.delete(&format!("/items/{id}")).await.status(), 204);
    }
    for (name, price) in [("ink", 0.25), ("paper", 12.0)] {
        let body = serde_json::json!({ "name": name, "price": price });
        assert_eq!(service.post_json("/products", &body).await.status(), 201);
    }
}

/// What a restore must serve again: the raw bodies of `GET /items` and
/// `GET /products` (exact bytes, held as text so a failure reads), and
/// `X-Total-Count` of the items.
async fn served_state(service: &Client) -> (String, String, String) {
    let mut bodies = Vec::new();
    for path in ["/items", "/products"] {
        let response = service.get(path).await;
        assert_eq!(response.status(), 200, "{path}");
        let bytes = response.bytes().await.unwrap().to_vec();
        bodies.push(String::from_utf8(bytes).unwrap());
    }
    let total = header(&service.get("/items?limit=1").await, "x-total-count");
    let products = bodies.pop().unwrap();
    (bodies.pop().unwrap(), products, total)
}

/// Runs one documented command and asserts it succeeded.
fn run(program: &str, args: &[&str]) {
    let output = Command::new(program).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Uploads one avatar and returns its stored name.
async fn upload(service: &Client, bytes: &'static [u8]) -> String {
    let form = Form::new().part("avatar", Part::bytes(bytes).file_name("a.png"));
    let response = service.post_form("/profile", form).await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    body["file"]["filename"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn pg_dump_and_pg_restore_into_a_new_database_serve_the_same_bytes_and_counter_c12() {
    let files = tempfile::tempdir().unwrap();
    let uploads = files.path().join("uploads");
    let source = ScratchDatabase::create(&test_database_url()).await.unwrap();
    let source_url = source.url();
    let service = Service::start(&[
        ("DATABASE_URL", source_url.as_str()),
        ("UPLOADS_DIR", uploads.to_str().unwrap()),
    ])
    .await;
    fill(&service.client).await;
    let stored = upload(&service.client, b"\x89PNG not really").await;
    let original = served_state(&service.client).await;

    // The documented backup, taken while the service runs: the store first,
    // then the uploads directory.
    let dump = files.path().join("items.dump");
    let archive = files.path().join("uploads.tar.gz");
    run(
        "pg_dump",
        &[
            "--format=custom",
            "--no-owner",
            "--file",
            dump.to_str().unwrap(),
            &source_url,
        ],
    );
    run(
        "tar",
        &[
            "-C",
            uploads.to_str().unwrap(),
            "-czf",
            archive.to_str().unwrap(),
            ".",
        ],
    );

    // The documented restore: a new, empty database (`createdb`), then
    // pg_restore into it, then the uploads unpacked into a new directory.
    let target = ScratchDatabase::create(&test_database_url()).await.unwrap();
    let target_url = target.url();
    run(
        "pg_restore",
        &[
            "--no-owner",
            "--exit-on-error",
            "--single-transaction",
            "-d",
            &target_url,
            dump.to_str().unwrap(),
        ],
    );
    let restored_uploads = files.path().join("restored-uploads");
    std::fs::create_dir(&restored_uploads).unwrap();
    run(
        "tar",
        &[
            "-C",
            restored_uploads.to_str().unwrap(),
            "-xzf",
            archive.to_str().unwrap(),
        ],
    );
    let restored = Service::start(&[
        ("DATABASE_URL", target_url.as_str()),
        ("UPLOADS_DIR", restored_uploads.to_str().unwrap()),
    ])
    .await;

    assert_eq!(
        served_state(&restored.client).await,
        original,
        "the same items and products, byte for byte, and the same X-Total-Count"
    );
    assert_eq!(original.2, "10");
    // The identity sequence came back with the rows: ids 11 and 12 were
    // handed out and deleted at the source, so they are not handed out again.
    assert_eq!(restored.client.create_item("after").await["id"], 13);
    assert_eq!(
        std::fs::read(restored_uploads.join(&stored)).unwrap(),
        b"\x89PNG not really"
    );
    drop(restored);
    drop(service);
    target.drop().await;
    source.drop().await;
}

/// `sqlite://` URL of a file.
fn sqlite_url(file: &Path) -> String {
    format!("sqlite://{}", file.display())
}

#[tokio::test]
async fn a_sqlite_backup_moved_into_place_after_a_killed_service_serves_the_backed_up_state_c12() {
    let directory = tempfile::tempdir().unwrap();
    let store = directory.path().join("items.db");
    let copy = directory.path().join("items-backup.db");
    let url = sqlite_url(&store);
    let service = Service::start(&[("DATABASE_URL", url.as_str())]).await;
    fill(&service.client).await;
    let backed_up = served_state(&service.client).await;
    let (status, _, stderr) = run_to_exit(
        &[("DATABASE_URL", url.as_str())],
        &["backup", copy.to_str().unwrap()],
    );
    assert_eq!(status.code(), Some(0), "{stderr}");
    // Writes after the backup, which the restore gives up; then the service
    // is killed, so its write-ahead log stays beside the file.
    service.client.create_item("after the backup").await;
    assert_eq!(service.client.delete("/items/1").await.status(), 204);
    drop(service);
    let wal = directory.path().join("items.db-wal");
    let shm = directory.path().join("items.db-shm");
    assert!(wal.exists(), "a killed service leaves its -wal behind");

    // The documented restore: the backup moved into place as the file, the
    // stale -wal and -shm removed, the service started.
    run("mv", &[copy.to_str().unwrap(), store.to_str().unwrap()]);
    run("rm", &["-f", wal.to_str().unwrap(), shm.to_str().unwrap()]);
    let restored = Service::start(&[("DATABASE_URL", url.as_str())]).await;

    assert_eq!(served_state(&restored.client).await, backed_up);
    assert_eq!(restored.client.create_item("restored").await["id"], 13);
    drop(restored);
}
