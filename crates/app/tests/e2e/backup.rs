//! `items-service backup DEST` (C12), the built binary: a copy taken while
//! a service on the same file is under write load is a store that passes
//! `integrity_check` and serves a state that existed; every refusal is
//! exit 2 and one line, with nothing written.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::header;

use crate::helpers::*;

/// What one writer did to one of its items, in order: each name it sent,
/// when it sent it and when (if) the service acknowledged it.
#[derive(Debug, Clone)]
struct Write {
    name: String,
    sent: Instant,
    acknowledged: Instant,
}

/// Creates and renames items of its own, one request at a time, until
/// `stop`; returns each item's history by id. Every write is awaited, so
/// each one sent is acknowledged (or the test fails).
async fn writer(client: Client, writer: usize, stop: Arc<AtomicBool>) -> HashMap<i64, Vec<Write>> {
    let mut items: HashMap<i64, Vec<Write>> = HashMap::new();
    let mut ids = Vec::new();
    for step in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let name = format!("w{writer}-s{step}");
        let sent = Instant::now();
        if step % 3 == 0 || ids.is_empty() {
            let response = client.post_json("/items", &json!({ "name": name })).await;
            assert_eq!(response.status(), 201, "creating {name}");
            let created: Value = response.json().await.unwrap();
            let id = created["id"].as_i64().unwrap();
            ids.push(id);
            items.entry(id).or_default().push(Write {
                name,
                sent,
                acknowledged: Instant::now(),
            });
        } else {
            let id = ids[step % ids.len()];
            let response = client
                .put_json(&format!("/items/{id}"), &json!({ "name": name }))
                .await;
            assert_eq!(response.status(), 200, "renaming {id} to {name}");
            items.entry(id).or_default().push(Write {
                name,
                sent,
                acknowledged: Instant::now(),
            });
        }
    }
    items
}

async fn integrity_check(file: &Path) -> String {
    let connection =
        rusqlite::Connection::open_with_flags(file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let verdict: String = connection
        .query_row("pragma integrity_check", [], |row| row.get(0))
        .unwrap();
    connection.close().map_err(|(_, error)| error).unwrap();
    verdict
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_write_load_is_a_store_holding_a_state_that_existed_c12() {
    let directory = tempfile::tempdir().unwrap();
    let source = directory.path().join("items.db");
    let copy = directory.path().join("backup.db");
    let url = format!("sqlite://{}", source.display());
    let service = Service::start(&[("DATABASE_URL", url.as_str()), ("RATE_LIMIT_MAX", "0")]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..8)
        .map(|n| tokio::spawn(writer(service.client.clone(), n, Arc::clone(&stop))))
        .collect();

    tokio::time::sleep(Duration::from_millis(800)).await;
    let started = Instant::now();
    let backup = tokio::task::spawn_blocking({
        let url = url.clone();
        let copy = copy.clone();
        move || {
            run_to_exit(
                &[("DATABASE_URL", &url)],
                &["backup", copy.to_str().unwrap()],
            )
        }
    })
    .await
    .unwrap();
    let ended = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let mut history: HashMap<i64, Vec<Write>> = HashMap::new();
    for writer in writers {
        history.extend(writer.await.unwrap());
    }

    let (status, stdout, stderr) = backup;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stdout.starts_with("backed up "), "{stdout}");
    assert_eq!(integrity_check(&copy).await, "ok");
    let acknowledged_during = history
        .values()
        .flatten()
        .filter(|write| write.acknowledged > started && write.acknowledged < ended)
        .count();
    eprintln!(
        "backup took {:?}; {acknowledged_during} writes acknowledged meanwhile",
        ended - started
    );

    let restored_url = format!("sqlite://{}", copy.display());
    let restored = Service::start(&[("DATABASE_URL", restored_url.as_str())]).await;
    let listed: Vec<Value> = restored.client.get("/items").await.json().await.unwrap();
    let page = restored.client.get("/items?limit=1").await;
    let total: usize = header(&page, "x-total-count").parse().unwrap();
    assert_eq!(total, listed.len(), "X-Total-Count matches the listing");

    let in_copy: HashMap<i64, String> = listed
        .iter()
        .map(|item| {
            (
                item["id"].as_i64().unwrap(),
                item["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // Nothing in the copy that was not sent before the backup ended, and
    // each name one that could have been current during the backup.
    for (id, name) in &in_copy {
        let writes = history
            .get(id)
            .unwrap_or_else(|| panic!("item {id} in the copy was never created"));
        let settled = writes
            .iter()
            .rposition(|write| write.acknowledged < started)
            .unwrap_or(0);
        let possible = &writes[settled..];
        assert!(
            possible
                .iter()
                .any(|write| &write.name == name && write.sent < ended),
            "item {id} is {name:?} in the copy, which was never current during the backup: {writes:?}"
        );
    }
    // Everything acknowledged before the backup started is in it.
    let mut settled_before = 0;
    for (id, writes) in &history {
        if writes[0].acknowledged < started {
            settled_before += 1;
            assert!(
                in_copy.contains_key(id),
                "item {id}, created before the backup, is missing"
            );
        }
    }
    assert!(settled_before > 0, "the writers wrote before the backup");
    drop(service);
}

#[test]
fn every_refused_backup_exits_2_with_one_line_and_writes_nothing_c12() {
    let directory = tempfile::tempdir().unwrap();
    let store = directory.path().join("items.db");
    std::fs::write(&store, "").unwrap();
    let sqlite = format!("sqlite://{}", store.display());
    let existing = directory.path().join("existing.db");
    std::fs::write(&existing, "keep").unwrap();
    let fresh = directory.path().join("fresh.db");
    let missing_directory = directory.path().join("missing").join("copy.db");
    let no_store = format!("sqlite://{}", directory.path().join("none.db").display());
    for (url, destination, says) in [
        (Some(sqlite.as_str()), &existing, "exists already"),
        (Some(sqlite.as_str()), &missing_directory, "does not exist"),
        (
            Some("postgres://postgres@127.0.0.1:5432/postgres"),
            &fresh,
            "pg_dump",
        ),
        (None, &fresh, "DATABASE_URL"),
        (Some(no_store.as_str()), &fresh, "no SQLite database"),
    ] {
        let settings: Vec<(&str, &str)> =
            url.map(|url| ("DATABASE_URL", url)).into_iter().collect();

        let (status, _, stderr) =
            run_to_exit(&settings, &["backup", destination.to_str().unwrap()]);

        assert_eq!(status.code(), Some(2), "{url:?} {destination:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
        assert!(stderr.starts_with("items-service: "), "{stderr:?}");
        assert!(stderr.contains(says), "{stderr:?} says {says:?}");
    }
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep");
    assert!(!fresh.exists() && !missing_directory.exists());
}
