//! Both stores as either end of a copy (C12): the domain's `copy_store`
//! over the SQLite and PostgreSQL sources and sinks, checked through the
//! stores' own repositories: the same items and products byte for byte, the
//! next id above the source's counter (ids deleted at the source included),
//! a refused non-empty destination, and a destination that refuses a row
//! mid-copy left exactly as it was.

use std::path::Path;

use crate::scratch_store::ScratchStore;
use futures_util::TryStreamExt;
use items_adapters::postgres::{PostgresSink, PostgresSnapshot};
use items_adapters::sqlite::{SqliteSink, SqliteSnapshot};
use items_domain::transfer::{
    Copied, CopyError, Counters, Counts, SnapshotSource, StoreSink, copy_store,
};
use items_domain::{Item, Name, Price, Product, Repositories};
use items_testkit::Fixture;

use super::sqlite_file::SqliteFile;

/// Rows per batch: small, so a few dozen rows travel in several batches.
const BATCH: usize = 7;

/// Names that must come back byte for byte: accents, an emoji, U+0000,
/// the longest name.
fn names() -> Vec<String> {
    let mut names: Vec<String> = [
        "pen",
        "crème brûlée",
        "🦀 crab",
        "nul\u{0}byte",
        "  spaced  ",
    ]
    .iter()
    .map(|name| (*name).to_owned())
    .collect();
    names.push("é".repeat(256));
    names
}

/// Copies `source` into `sink` in batches of [`BATCH`], then closes both
/// ends: what `items-service copy` does, without its progress lines.
async fn copy(
    mut source: impl SnapshotSource,
    mut sink: impl StoreSink,
) -> Result<Copied, CopyError> {
    copy_store(&mut source, &mut sink, BATCH, &mut |_| {}).await
}

/// Fills a store: 40 items (the last three and two others deleted, so the
/// counter is above the largest id left) and 3 products.
async fn fill(repositories: &Repositories) {
    let names = names();
    let mut ids = Vec::new();
    for index in 0..40 {
        let name = Name::parse(&names[index % names.len()]).expect("a valid value");
        ids.push(
            repositories
                .items
                .create(name)
                .await
                .expect("the store answers")
                .id,
        );
    }
    for id in [ids[4], ids[10], ids[37], ids[38], ids[39]] {
        assert!(
            repositories
                .items
                .delete(id)
                .await
                .expect("the store answers")
        );
    }
    for (name, price) in [("pen", 1.5), ("ink", 0.0), ("paper", 1e300)] {
        repositories
            .products
            .create(
                Name::parse(name).expect("a valid value"),
                Price::new(price).expect("a valid price"),
            )
            .await
            .expect("the store answers");
    }
}

/// Every item and product of a store, in id order.
async fn contents(repositories: &Repositories) -> (Vec<Item>, Vec<Product>) {
    let listing = repositories
        .items
        .list_all()
        .await
        .expect("the store answers");
    let batches: Vec<Vec<Item>> = listing
        .batches
        .try_collect()
        .await
        .expect("the store answers");
    let products = repositories
        .products
        .list()
        .await
        .expect("the store answers");
    (batches.concat(), products)
}

/// The id the next item gets, by creating it.
async fn next_item_id(repositories: &Repositories) -> i64 {
    repositories
        .items
        .create(Name::parse("next").expect("a valid value"))
        .await
        .expect("the store answers")
        .id
        .get()
}

/// A fresh SQLite store file's path in `directory` (not created).
fn sqlite_path(directory: &Path) -> std::path::PathBuf {
    directory.join("copy.db")
}

/// The SQLite store at `path`, opened as the service opens it.
async fn open_sqlite(path: &Path) -> items_adapters::sqlite::SqliteStore {
    items_adapters::sqlite::SqliteStore::open(path, Default::default())
        .await
        .expect("the SQLite file opens")
}

#[tokio::test]
async fn sqlite_to_postgres_keeps_every_id_name_and_counter_c12() {
    let source = SqliteFile::create().await;
    fill(&source.store.repositories()).await;
    let expected = contents(&source.store.repositories()).await;
    let destination = ScratchStore::create().await;

    let copied = copy(
        SqliteSnapshot::open(&source.path()).await.unwrap(),
        PostgresSink::open(&destination.url()).await.unwrap(),
    )
    .await
    .unwrap();

    assert_eq!(
        copied,
        Copied {
            counts: Counts {
                items: 35,
                products: 3
            },
            counters: Counters {
                items: 40,
                products: 3
            },
        }
    );
    let repositories = destination.store.repositories();
    assert_eq!(contents(&repositories).await, expected);
    assert_eq!(
        next_item_id(&repositories).await,
        41,
        "the counter travels, not max(id)"
    );
    destination.teardown().await;
    source.teardown().await;
}

#[tokio::test]
async fn postgres_to_sqlite_keeps_every_id_name_and_counter_c12() {
    let source = ScratchStore::create().await;
    fill(&source.store.repositories()).await;
    let expected = contents(&source.store.repositories()).await;
    let directory = tempfile::tempdir().unwrap();
    let path = sqlite_path(directory.path());

    let copied = copy(
        PostgresSnapshot::open(&source.url()).await.unwrap(),
        SqliteSink::open(&path).await.unwrap(),
    )
    .await
    .unwrap();

    assert_eq!(copied.counts.items, 35);
    assert_eq!(copied.counters.items, 40);
    let destination = open_sqlite(&path).await;
    let repositories = destination.repositories();
    assert_eq!(contents(&repositories).await, expected);
    assert_eq!(
        repositories
            .items
            .list(&Default::default())
            .await
            .unwrap()
            .total,
        35,
        "the tally the triggers keep counts the rows copied"
    );
    assert_eq!(next_item_id(&repositories).await, 41);
    destination.close().await;
    source.teardown().await;
}

#[tokio::test]
async fn postgres_to_postgres_and_sqlite_to_sqlite_work_alike_c12() {
    let source = SqliteFile::create().await;
    fill(&source.store.repositories()).await;
    let expected = contents(&source.store.repositories()).await;
    let directory = tempfile::tempdir().unwrap();
    let path = sqlite_path(directory.path());
    copy(
        SqliteSnapshot::open(&source.path()).await.unwrap(),
        SqliteSink::open(&path).await.unwrap(),
    )
    .await
    .unwrap();
    let middle = ScratchStore::create().await;
    let destination = ScratchStore::create().await;
    copy(
        SqliteSnapshot::open(&path).await.unwrap(),
        PostgresSink::open(&middle.url()).await.unwrap(),
    )
    .await
    .unwrap();
    copy(
        PostgresSnapshot::open(&middle.url()).await.unwrap(),
        PostgresSink::open(&destination.url()).await.unwrap(),
    )
    .await
    .unwrap();

    let repositories = destination.store.repositories();
    assert_eq!(contents(&repositories).await, expected);
    assert_eq!(next_item_id(&repositories).await, 41);
    for store in [middle, destination] {
        store.teardown().await;
    }
    source.teardown().await;
}

#[tokio::test]
async fn the_source_is_read_at_one_snapshot_writes_after_it_are_not_copied_c12() {
    let source = SqliteFile::create().await;
    let repositories = source.store.repositories();
    fill(&repositories).await;
    let expected = contents(&repositories).await;
    let destination = ScratchStore::create().await;

    let mut snapshot = SqliteSnapshot::open(&source.path()).await.unwrap();
    repositories
        .items
        .create(Name::parse("too late").unwrap())
        .await
        .unwrap();
    let mut sink = PostgresSink::open(&destination.url()).await.unwrap();
    copy_store(&mut snapshot, &mut sink, BATCH, &mut |_| {})
        .await
        .unwrap();

    assert_eq!(contents(&destination.store.repositories()).await, expected);
    destination.teardown().await;
    source.teardown().await;
}

#[tokio::test]
async fn a_destination_holding_a_product_is_refused_and_left_as_it_was_c12() {
    let source = SqliteFile::create().await;
    fill(&source.store.repositories()).await;
    let destination = ScratchStore::create().await;
    let repositories = destination.store.repositories();
    repositories
        .products
        .create(Name::parse("mine").unwrap(), Price::new(2.0).unwrap())
        .await
        .unwrap();
    let before = contents(&repositories).await;

    let error = copy(
        SqliteSnapshot::open(&source.path()).await.unwrap(),
        PostgresSink::open(&destination.url()).await.unwrap(),
    )
    .await
    .unwrap_err();

    assert!(
        matches!(
            error,
            CopyError::NotEmpty(Counts {
                items: 0,
                products: 1
            })
        ),
        "{error:?}"
    );
    assert_eq!(contents(&repositories).await, before);
    assert_eq!(next_item_id(&repositories).await, 1);
    destination.teardown().await;
    source.teardown().await;
}

#[tokio::test]
async fn a_postgres_destination_refusing_a_row_mid_copy_is_left_empty_with_its_counter_c12() {
    let source = SqliteFile::create().await;
    fill(&source.store.repositories()).await;
    let destination = ScratchStore::create().await;
    // The destination refuses item 20, in the third batch: two batches are
    // written by then, in the transaction that must be undone.
    let admin = destination.database.client().await.unwrap();
    admin
        .batch_execute(
            "create function refuse_item_20() returns trigger language plpgsql as $$ \
             begin if new.id = 20 then raise exception 'item 20 refused'; end if; \
             return new; end $$; \
             create trigger refuse_item_20 before insert on items \
             for each row execute function refuse_item_20();",
        )
        .await
        .unwrap();

    let mut snapshot = SqliteSnapshot::open(&source.path()).await.unwrap();
    let mut sink = PostgresSink::open(&destination.url()).await.unwrap();
    let mut written = Counts::default();
    let error = copy_store(&mut snapshot, &mut sink, BATCH, &mut |counts| {
        written = counts;
    })
    .await
    .unwrap_err();

    assert!(matches!(error, CopyError::Destination(_)), "{error:?}");
    assert!(written.items >= BATCH as u64, "batches were written first");
    admin
        .batch_execute("drop trigger refuse_item_20 on items")
        .await
        .unwrap();
    drop(admin);
    let repositories = destination.store.repositories();
    assert_eq!(contents(&repositories).await, (vec![], vec![]));
    assert_eq!(
        repositories
            .items
            .list(&Default::default())
            .await
            .unwrap()
            .total,
        0
    );
    assert_eq!(
        next_item_id(&repositories).await,
        1,
        "the identity was not moved"
    );
    destination.teardown().await;
    source.teardown().await;
}

#[tokio::test]
async fn a_sqlite_destination_refusing_a_row_mid_copy_is_left_empty_with_its_counter_c12() {
    let source = ScratchStore::create().await;
    fill(&source.store.repositories()).await;
    let directory = tempfile::tempdir().unwrap();
    let path = sqlite_path(directory.path());
    let store = open_sqlite(&path).await;
    store.close().await;
    let admin = rusqlite::Connection::open(&path).unwrap();
    admin
        .execute_batch(
            "create trigger refuse_item_20 before insert on items when new.id = 20 \
             begin select raise(abort, 'item 20 refused'); end;",
        )
        .unwrap();

    let error = copy(
        PostgresSnapshot::open(&source.url()).await.unwrap(),
        SqliteSink::open(&path).await.unwrap(),
    )
    .await
    .unwrap_err();

    assert!(matches!(error, CopyError::Destination(_)), "{error:?}");
    admin.execute_batch("drop trigger refuse_item_20").unwrap();
    admin.close().map_err(|(_, error)| error).unwrap();
    let destination = open_sqlite(&path).await;
    let repositories = destination.repositories();
    assert_eq!(contents(&repositories).await, (vec![], vec![]));
    assert_eq!(
        repositories
            .items
            .list(&Default::default())
            .await
            .unwrap()
            .total,
        0
    );
    assert_eq!(next_item_id(&repositories).await, 1);
    destination.close().await;
    source.teardown().await;
}

#[tokio::test]
async fn a_missing_sqlite_source_is_an_error_and_no_file_is_created_c12() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("missing.db");

    assert!(SqliteSnapshot::open(&path).await.is_err());
    assert!(!path.exists());
}
