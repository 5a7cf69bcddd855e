//! The SQLite store's reader pool, which serves every read but the one by
//! id: a read waits for a free connection at most the budget (C12), and a
//! full listing dropped half-read gives its connection and its snapshot
//! back at once (C10), and listings take turns for a quarter of the
//! readers (C12).

use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use items_adapters::sqlite::SqliteSettings;
use items_domain::{Item, ItemQuery, ItemRepository, Name, PageLimit, RepositoryError};
use items_testkit::Fixture;

use super::sqlite_file::SqliteFile;

/// The budget of these tests: long enough that a reader given back
/// promptly is told apart from one waited for until the budget.
const BUDGET: Duration = Duration::from_secs(3);

/// A store with one reader and `count` items, written by a connection of
/// the test's own in one transaction.
async fn one_reader_and_items(count: usize) -> SqliteFile {
    readers_and_items(1, count).await
}

/// A store with `readers` readers and `count` items.
async fn readers_and_items(readers: u32, count: usize) -> SqliteFile {
    let file = SqliteFile::create_with(SqliteSettings {
        readers,
        busy_timeout: BUDGET,
        ..SqliteSettings::default()
    })
    .await;
    let mut connection = rusqlite::Connection::open(file.path()).expect("the file opens");
    let transaction = connection.transaction().expect("a transaction begins");
    for n in 0..count {
        transaction
            .execute(
                "insert into items (name) values (cast(?1 as blob))",
                [format!("n{n}")],
            )
            .expect("an item is stored");
    }
    transaction.commit().expect("the items are committed");
    file
}

fn first_page() -> ItemQuery {
    ItemQuery {
        limit: Some(PageLimit::new(10).expect("a valid limit")),
        ..ItemQuery::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_dropped_half_read_gives_its_reader_back_at_once_c10() {
    let file = one_reader_and_items(3500).await;
    let items = file.store.items();
    let mut listing = items.list_all().await.expect("the listing opens");
    let first = listing
        .batches
        .try_next()
        .await
        .expect("the first batch is read")
        .expect("a first batch");
    assert_eq!(first.len(), 1000);

    drop(listing);
    let started = Instant::now();
    let page = items
        .list(&first_page())
        .await
        .expect("the one reader is free");

    assert!(
        started.elapsed() < BUDGET / 2,
        "the page waited {:?} for the reader",
        started.elapsed()
    );
    assert_eq!(page.total, 3500);
    // The listing's snapshot was released with it: a write and a read
    // after it see the present.
    let created = items
        .create(Name::parse("after").expect("a valid name"))
        .await
        .expect("a create");
    let listing = items.list_all().await.expect("a second listing");
    assert_eq!(listing.total, 3501);
    let all: Vec<Vec<Item>> = listing.batches.try_collect().await.expect("read");
    assert_eq!(all.concat().last(), Some(&created));
    file.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_waits_for_a_reader_at_most_the_budget_then_is_unavailable_c12() {
    let file = one_reader_and_items(3500).await;
    let items = file.store.items();
    // Holds the only reader while it is not read.
    let listing = items.list_all().await.expect("the listing opens");

    let started = Instant::now();
    let refused = items.list(&first_page()).await;

    let waited = started.elapsed();
    let Err(RepositoryError::Unavailable(cause)) = refused else {
        panic!("a read past its budget must be refused: {refused:?}");
    };
    assert!(
        cause.to_string().contains("DATABASE_STATEMENT_TIMEOUT_MS"),
        "{cause}"
    );
    assert!(
        waited >= BUDGET && waited < BUDGET * 2,
        "refused after {waited:?}"
    );
    drop(listing);
    assert!(items.list(&first_page()).await.is_ok());
    file.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_take_turns_for_a_quarter_of_the_readers_and_pages_keep_the_rest_c12() {
    let file = readers_and_items(4, 3500).await;
    let items = file.store.items();
    // The one turn of four readers, held while the listing is not read.
    let listing = items.list_all().await.expect("the listing opens");
    let second = tokio::spawn({
        let items = items.clone();
        async move { items.list_all().await.map(|listing| listing.total) }
    });

    // The second listing waits for its turn holding no reader: the three
    // others serve pages at once, however many.
    for _ in 0..3 {
        let started = Instant::now();
        let query = first_page();
        let pages = futures_util::future::join_all((0..3).map(|_| items.list(&query))).await;
        assert!(pages.iter().all(Result::is_ok), "{pages:?}");
        assert!(started.elapsed() < BUDGET / 2, "{:?}", started.elapsed());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !second.is_finished(),
        "one listing at a time on four readers"
    );

    drop(listing);
    let total = tokio::time::timeout(BUDGET, second)
        .await
        .expect("the second listing's turn comes once the first is dropped")
        .expect("the task ends")
        .expect("the second listing opens");
    assert_eq!(total, 3500);
    file.teardown().await;
}

#[tokio::test]
async fn a_read_after_the_store_is_closed_is_unavailable_not_a_panic() {
    let file = one_reader_and_items(3).await;
    let items = file.store.items();
    file.store.close().await;

    assert!(matches!(
        items.list(&first_page()).await,
        Err(RepositoryError::Unavailable(_))
    ));
    assert!(matches!(
        items.list_all().await,
        Err(RepositoryError::Unavailable(_))
    ));
}
