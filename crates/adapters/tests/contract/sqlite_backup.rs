//! The SQLite store's online backup (C12): a copy that opens as a store
//! with the data and the id counter, taken while the source stays open; an
//! existing destination is refused and left as it was.

use items_adapters::sqlite::{BackupError, SqliteSettings, SqliteStore, backup};
use items_domain::{Id, ItemRepository, Name};
use items_testkit::Fixture;

use super::sqlite_file::SqliteFile;

fn name(raw: &str) -> Name {
    Name::parse(raw).expect("a valid name")
}

#[tokio::test]
async fn a_backup_of_an_open_store_opens_as_a_store_with_its_items_and_counter_c12() {
    let file = SqliteFile::create().await;
    let items = file.store.items();
    for raw in ["a", "b", "c"] {
        items.create(name(raw)).await.unwrap();
    }
    assert!(items.delete(Id::new(3)).await.unwrap());
    let copy = file.directory().join("copy.db");

    let bytes = backup(&file.path(), &copy).await.unwrap();

    assert_eq!(bytes, std::fs::metadata(&copy).unwrap().len());
    assert!(!file.directory().join("copy.db.partial").exists());
    let restored = SqliteStore::open(&copy, SqliteSettings::default())
        .await
        .unwrap();
    let copied = restored.items();
    assert_eq!(
        copied.get(Id::new(1)).await.unwrap().unwrap().name,
        name("a")
    );
    assert_eq!(
        copied.get(Id::new(2)).await.unwrap().unwrap().name,
        name("b")
    );
    assert_eq!(copied.get(Id::new(3)).await.unwrap(), None);
    // The counter came along: the deleted id is not handed out again (C2).
    assert_eq!(copied.create(name("d")).await.unwrap().id, Id::new(4));
    restored.close().await;
    file.teardown().await;
}

#[tokio::test]
async fn a_backup_never_overwrites_an_existing_file_c12() {
    let file = SqliteFile::create().await;
    file.store.items().create(name("a")).await.unwrap();
    let existing = file.directory().join("existing.db");
    std::fs::write(&existing, "keep me").unwrap();

    let refused = backup(&file.path(), &existing).await;

    assert!(
        matches!(refused, Err(BackupError::DestinationExists { .. })),
        "{refused:?}"
    );
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");
    file.teardown().await;
}

#[tokio::test]
async fn a_backup_into_a_missing_directory_or_of_no_database_fails_and_leaves_nothing_c12() {
    let file = SqliteFile::create().await;
    let nowhere = file.directory().join("missing").join("copy.db");
    assert!(backup(&file.path(), &nowhere).await.is_err());
    assert!(!nowhere.exists());

    let notes = file.directory().join("notes.txt");
    std::fs::write(&notes, "not a database ".repeat(100)).unwrap();
    let copy = file.directory().join("copy.db");
    let refused = backup(&notes, &copy).await;
    assert!(
        matches!(refused, Err(BackupError::Source { .. })),
        "{refused:?}"
    );
    assert!(!copy.exists());
    assert!(!file.directory().join("copy.db.partial").exists());
    file.teardown().await;
}
