//! `items-service copy --from URL --to URL` (C12), the built binary as an
//! operator runs it: both directions between SQLite and PostgreSQL, checked
//! by serving source and destination over HTTP (the same bytes listed, the
//! next id above the source's counter); a non-empty destination refused with
//! exit 1 and left as it was; a destination that fails mid-copy left empty;
//! invalid arguments refused with exit 2 and one line.

use std::path::{Path, PathBuf};

use crate::support::ScratchStore;
use crate::support::{TestApp, TestServices};
use items_adapters::sqlite::{SqliteSettings, SqliteStore};
use items_testkit::Fixture;

use crate::helpers::*;

/// Fills a service: 30 items with names that must come back byte for byte
/// (the last two and one other deleted, so the counter is above the
/// largest id left) and two products.
async fn fill(service: &Client) {
    let names = ["pen", "crème brûlée", "🦀", "nul\u{0}byte", " spaced "];
    for index in 0..30 {
        service.create_item(names[index % names.len()]).await;
    }
    for id in [7, 29, 30] {
        assert_eq!(service.delete(&format!("/items/{id}")).await.status(), 204);
    }
    for (name, price) in [("ink", 0.25), ("paper", 12.0)] {
        let body = serde_json::json!({ "name": name, "price": price });
        assert_eq!(service.post_json("/products", &body).await.status(), 201);
    }
}

/// The raw bodies of the item and product listings.
async fn listings(service: &Client) -> (Vec<u8>, Vec<u8>) {
    let mut bodies = Vec::new();
    for path in ["/items", "/products"] {
        let response = service.get(path).await;
        assert_eq!(response.status(), 200, "{path}");
        bodies.push(response.bytes().await.unwrap().to_vec());
    }
    let products = bodies.pop().unwrap();
    (bodies.pop().unwrap(), products)
}

/// A destination filled by [`fill`]'s copy lists the source's `expected`
/// bytes, and its next item id follows the source's counter (30), not the
/// largest id copied.
async fn assert_serves_the_copy(served: &Client, expected: &(Vec<u8>, Vec<u8>)) {
    assert_eq!(
        &listings(served).await,
        expected,
        "the same bytes are listed"
    );
    assert_eq!(served.create_item("after").await["id"], 31);
}

fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// Runs `items-service copy` with these arguments.
fn copy(from: &str, to: &str) -> (std::process::ExitStatus, String, String) {
    run_to_exit(&[], &["copy", "--from", from, "--to", to])
}

async fn sqlite_store(path: &Path) -> SqliteStore {
    SqliteStore::open(path, SqliteSettings::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn sqlite_to_postgres_serves_the_same_bytes_and_the_next_id_follows_the_counter_c12() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("source.db");
    let source = sqlite_store(&path).await;
    // The source is served while it is copied: the copy reads a snapshot.
    let served_source = TestApp::spawn(TestServices::sqlite(&source)).await;
    fill(&served_source).await;
    let expected = listings(&served_source).await;
    let destination = ScratchStore::create().await;

    let (status, stdout, stderr) = copy(&sqlite_url(&path), &destination.database.url());

    assert!(status.success(), "{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [stdout.trim_end()],
        "one final line"
    );
    assert!(
        stdout.starts_with("items-service: copied 27 items and 2 products in "),
        "{stdout}"
    );
    assert!(
        stdout.trim_end().ends_with("next ids: item 31, product 3"),
        "{stdout}"
    );
    let served = TestApp::spawn(TestServices::postgres(&destination.store)).await;
    assert_serves_the_copy(&served, &expected).await;
    drop((served, served_source));
    destination.teardown().await;
    source.close().await;
}

#[tokio::test]
async fn postgres_to_a_new_sqlite_file_serves_the_same_bytes_and_the_next_id_follows_c12() {
    let source = ScratchStore::create().await;
    let served_source = TestApp::spawn(TestServices::postgres(&source.store)).await;
    fill(&served_source).await;
    let expected = listings(&served_source).await;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("new.db");

    let (status, stdout, stderr) = copy(&source.database.url(), &sqlite_url(&path));

    assert!(status.success(), "{stderr}");
    assert!(
        stdout.contains("copied 27 items and 2 products"),
        "{stdout}"
    );
    let destination = sqlite_store(&path).await;
    let served = TestApp::spawn(TestServices::sqlite(&destination)).await;
    assert_serves_the_copy(&served, &expected).await;
    drop((served, served_source));
    destination.close().await;
    source.teardown().await;
}

#[tokio::test]
async fn a_destination_holding_an_item_is_refused_with_exit_1_and_left_as_it_was_c12() {
    let source = ScratchStore::create().await;
    let served_source = TestApp::spawn(TestServices::postgres(&source.store)).await;
    fill(&served_source).await;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("taken.db");
    let destination = sqlite_store(&path).await;
    let served = TestApp::spawn(TestServices::sqlite(&destination)).await;
    served.create_item("mine").await;
    drop(served);
    destination.close().await;

    let (status, stdout, stderr) = copy(&source.database.url(), &sqlite_url(&path));

    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "items-service: copy failed: the destination is not empty: it holds 1 items and 0 \
         products\n"
    );
    let destination = sqlite_store(&path).await;
    let served = TestApp::spawn(TestServices::sqlite(&destination)).await;
    let items: serde_json::Value = served.get("/items").await.json().await.unwrap();
    assert_eq!(items, serde_json::json!([{ "id": 1, "name": "mine" }]));
    assert_eq!(served.create_item("next").await["id"], 2);
    drop((served, served_source));
    destination.close().await;
    source.teardown().await;
}

#[tokio::test]
async fn a_destination_failing_mid_copy_is_left_empty_with_exit_1_c12() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("source.db");
    let source = sqlite_store(&path).await;
    let served_source = TestApp::spawn(TestServices::sqlite(&source)).await;
    fill(&served_source).await;
    let destination = ScratchStore::create().await;
    // The destination refuses the last item: every other row is written
    // by then, in the transaction that must be undone.
    let admin = destination.database.client().await.unwrap();
    admin
        .batch_execute(
            "create function refuse_item_28() returns trigger language plpgsql as $$ \
             begin if new.id = 28 then raise exception 'item 28 refused'; end if; \
             return new; end $$; \
             create trigger refuse_item_28 before insert on items \
             for each row execute function refuse_item_28();",
        )
        .await
        .unwrap();

    let (status, stdout, stderr) = copy(&sqlite_url(&path), &destination.database.url());

    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("items-service: copy failed: writing the destination failed"),
        "{stderr}"
    );
    assert!(stderr.contains("item 28 refused"), "{stderr}");
    admin
        .batch_execute("drop trigger refuse_item_28 on items")
        .await
        .unwrap();
    drop(admin);
    let served = TestApp::spawn(TestServices::postgres(&destination.store)).await;
    assert_eq!(listings(&served).await, (b"[]".to_vec(), b"[]".to_vec()));
    assert_eq!(served.create_item("first").await["id"], 1);
    drop((served, served_source));
    destination.teardown().await;
    source.close().await;
}

#[test]
fn a_source_that_cannot_be_read_leaves_no_destination_file_behind_c12() {
    let directory = tempfile::tempdir().unwrap();
    let destination: PathBuf = directory.path().join("new.db");

    let (status, _, stderr) = copy(
        &sqlite_url(&directory.path().join("missing.db")),
        &sqlite_url(&destination),
    );

    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("items-service: cannot read the source: "),
        "{stderr}"
    );
    assert!(!destination.exists());
}

#[test]
fn invalid_arguments_exit_2_with_one_line_c1_c12() {
    for (args, expected) in [
        (
            &["copy", "--from", "sqlite:a.db"][..],
            "items-service: missing --to <TO>",
        ),
        (
            &["copy", "--to", "sqlite:a.db"][..],
            "items-service: missing --from <FROM>",
        ),
        (
            &["copy", "--from", "memory", "--to", "sqlite:a.db"][..],
            "must be a postgres://, postgresql://, sqlite://PATH or sqlite:PATH URL",
        ),
        (
            &["copy", "--from", "mysql://h/db", "--to", "sqlite:a.db"][..],
            "must be a postgres://, postgresql://, sqlite://PATH or sqlite:PATH URL",
        ),
        (
            &["copy", "--from", "sqlite:a.db", "--to", "sqlite://./a.db"][..],
            "items-service: --from and --to name the same store",
        ),
        (
            &[
                "copy",
                "--from",
                "postgres://h/db",
                "--to",
                "postgres://h/db",
            ][..],
            "items-service: --from and --to name the same store",
        ),
    ] {
        let directory = tempfile::tempdir().unwrap();
        let output = binary()
            .current_dir(directory.path())
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);

        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!directory.path().join("a.db").exists(), "nothing created");
    }
}
