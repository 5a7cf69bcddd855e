//! What the SQLite store's change feed promises beyond the kit's checks
//! (C14): a failed batch records no change, every process on the file sees
//! every change, old changes are pruned by the writer without holding up
//! writes, and a copy or a backup starts a history of its own.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use items_adapters::sqlite::{SqliteSettings, SqliteSink, SqliteSnapshot, SqliteStore, backup};
use items_domain::transfer::copy_store;
use items_domain::{Change, ChangeStream, ItemChange, ItemRepository, Name, RepositoryError};
use items_testkit::Fixture;
use rusqlite::Connection;

use super::sqlite_file::SqliteFile;

fn name(raw: &str) -> Name {
    Name::parse(raw).expect("a valid name")
}

async fn next(changes: &mut ChangeStream) -> Change {
    tokio::time::timeout(Duration::from_secs(5), changes.next())
        .await
        .expect("a change within 5 s")
        .expect("the stream goes on")
        .expect("a change, not an error")
}

fn count(path: &std::path::Path, sql: &str) -> i64 {
    Connection::open(path)
        .expect("the file opens")
        .query_row(sql, [], |row| row.get(0))
        .expect("the count is read")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_fails_records_no_change_and_the_feed_goes_on_c12_c14() {
    let file = SqliteFile::create().await;
    let admin = Connection::open(file.path()).unwrap();
    admin
        .execute_batch(
            "create trigger refuse_poison before insert on items \
             when new.name = cast('poison' as blob) \
             begin select raise(abort, 'injected failure'); end",
        )
        .unwrap();
    let mut subscription = file.store.changes().subscribe(None).await.unwrap();
    admin.execute_batch("BEGIN IMMEDIATE").unwrap();
    let items = file.store.items();
    let queued: Vec<_> = ["good", "poison"]
        .into_iter()
        .map(|raw| {
            let items = file.store.items();
            tokio::spawn(async move { items.create(name(raw)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    admin.execute_batch("COMMIT").unwrap();
    for create in queued {
        // Whichever batch each landed in, the poisoned one failed whole.
        let _ = create.await.unwrap();
    }
    let kept = items.create(name("kept")).await.unwrap();

    let mut seen = Vec::new();
    loop {
        let change = next(&mut subscription.changes).await;
        let done = change.change == ItemChange::Created(kept.clone());
        seen.push(change.change);
        if done {
            break;
        }
    }
    assert!(
        !seen.iter().any(
            |change| matches!(change, ItemChange::Created(item) if item.name.as_str() == "poison")
        ),
        "C14: a write whose batch failed never appears: {seen:?}"
    );
    let changes = count(&file.path(), "select count(*) from changes");
    let items_stored = count(&file.path(), "select count(*) from items");
    assert_eq!(
        changes, items_stored,
        "one change per item stored, none for the failed batch"
    );
    file.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_written_by_another_process_on_the_file_reaches_a_subscriber_within_a_second_c14()
{
    let file = SqliteFile::create().await;
    // A second store on the same file: another process, as far as the
    // file is concerned (its own writer, readers and feed).
    let other = SqliteStore::open(file.path(), SqliteSettings::default())
        .await
        .unwrap();
    let mut subscription = file.store.changes().subscribe(None).await.unwrap();
    let written = Instant::now();
    let item = other.items().create(name("from elsewhere")).await.unwrap();
    let change = next(&mut subscription.changes).await;
    assert_eq!(change.change, ItemChange::Created(item));
    assert!(
        written.elapsed() < Duration::from_secs(1),
        "C14: within 1 s"
    );
    // And the other way, with cursors of one store resuming on the other.
    let mut theirs = other
        .changes()
        .subscribe(Some(change.cursor))
        .await
        .unwrap();
    assert!(!theirs.reset, "C14: both processes read one history");
    let mine = file.store.items().create(name("from here")).await.unwrap();
    assert_eq!(
        next(&mut theirs.changes).await.change,
        ItemChange::Created(mine)
    );
    other.close().await;
    file.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_past_the_retention_are_pruned_by_the_writer_and_their_cursors_reset_c14() {
    let file = SqliteFile::create_with(SqliteSettings {
        changes_retention: Duration::from_secs(1),
        ..SqliteSettings::default()
    })
    .await;
    let items = file.store.items();
    let mut subscription = file.store.changes().subscribe(None).await.unwrap();
    for n in 0..3 {
        items.create(name(&format!("old{n}"))).await.unwrap();
    }
    let oldest = next(&mut subscription.changes).await.cursor;
    drop(subscription);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let started = Instant::now();
    for n in 0..20 {
        items.create(name(&format!("new{n}"))).await.unwrap();
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "pruning holds up no write"
    );
    assert_eq!(
        count(
            &file.path(),
            "select count(*) from changes where item_id <= 3"
        ),
        0,
        "the changes past the retention are gone"
    );
    assert_eq!(
        count(&file.path(), "select pruned_through from change_log"),
        3
    );
    let resumed = file.store.changes().subscribe(Some(oldest)).await.unwrap();
    assert!(
        resumed.reset,
        "C14: a cursor past the retention gets a reset"
    );
    file.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_starts_an_empty_feed_and_a_backup_a_history_of_its_own_c12_c14() {
    let source = SqliteFile::create().await;
    let mut subscription = source.store.changes().subscribe(None).await.unwrap();
    source.store.items().create(name("a")).await.unwrap();
    let cursor = next(&mut subscription.changes).await.cursor;

    let copy_path = source.directory().join("copy.db");
    copy_store(
        &mut SqliteSnapshot::open(&source.path()).await.unwrap(),
        &mut SqliteSink::open(&copy_path).await.unwrap(),
        10,
        &mut |_| {},
    )
    .await
    .unwrap();
    let backup_path = source.directory().join("backup.db");
    backup(&source.path(), &backup_path).await.unwrap();

    assert_eq!(
        count(&copy_path, "select count(*) from changes"),
        0,
        "C12: the copy's feed starts empty"
    );
    assert_eq!(
        count(&backup_path, "select count(*) from changes"),
        1,
        "the backup keeps its history"
    );
    for path in [&copy_path, &backup_path] {
        let store = SqliteStore::open(path, SqliteSettings::default())
            .await
            .unwrap();
        let resumed = store
            .changes()
            .subscribe(Some(cursor.clone()))
            .await
            .unwrap();
        assert!(
            resumed.reset,
            "C14: a cursor of the source is unknown to {}",
            path.display()
        );
        let created = store.items().create(name("b")).await.unwrap();
        let mut changes: ChangeStream = resumed.changes;
        assert_eq!(next(&mut changes).await.change.id(), created.id);
        assert_eq!(created.id.get(), 2, "C12: the counter travels");
        store.close().await;
    }
    source.teardown().await;
}

#[tokio::test]
async fn a_subscription_to_a_closed_store_is_refused_503_c14() {
    let file = SqliteFile::create_with(SqliteSettings {
        busy_timeout: Duration::from_millis(500),
        ..SqliteSettings::default()
    })
    .await;
    file.store.close().await;
    let refused = file.store.changes().subscribe(None).await;
    assert!(matches!(refused, Err(RepositoryError::Unavailable(_))));
}
