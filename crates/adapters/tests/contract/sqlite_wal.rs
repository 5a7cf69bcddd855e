//! The SQLite store's write-ahead log stays bounded (C12): under sustained
//! writes the writer truncates the `-wal` file whenever it passes its limit
//! and no reader pins it; a reader holding a snapshot (the full listing)
//! keeps what is written meanwhile, and the file is back under the limit
//! soon after that reader ends.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use items_adapters::sqlite::{SqliteSettings, SqliteStore};
use items_domain::{ItemRepository, Name};

/// A small limit, so the test writes megabytes, not gigabytes.
const LIMIT: u64 = 256 * 1024;
/// What one commit may add past the limit before the writer truncates.
const ONE_COMMIT: u64 = 64 * 1024;

async fn create(items: &dyn ItemRepository, count: usize, store: &SqliteStore) -> u64 {
    let mut largest = 0;
    for i in 0..count {
        let name =
            Name::parse(&format!("an item with a longish name {i:06}")).expect("a valid name");
        items.create(name).await.expect("created");
        largest = largest.max(store.wal_bytes());
    }
    largest
}

#[tokio::test]
async fn the_wal_stays_bounded_and_shrinks_once_a_long_listing_ends_c12() {
    let directory = tempfile::tempdir().unwrap();
    let settings = SqliteSettings {
        wal_limit: LIMIT,
        ..SqliteSettings::default()
    };
    let store = SqliteStore::open(directory.path().join("items.db"), settings)
        .await
        .unwrap();
    let items = store.items();

    let largest = create(&items, 1_500, &store).await;
    assert!(
        largest <= LIMIT + ONE_COMMIT,
        "with no long reader the log stays near its limit: {largest} bytes"
    );

    // A full listing read one batch in: its snapshot is held.
    let mut listing = items.list_all().await.unwrap();
    let first = listing.batches.next().await.unwrap().unwrap();
    assert!(!first.is_empty());
    let during = create(&items, 800, &store).await;
    assert!(
        during > LIMIT,
        "a long reader pins what is written meanwhile: {during} bytes"
    );

    drop(listing);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Each commit gives the writer its chance to truncate.
        create(&items, 1, &store).await;
        if store.wal_bytes() <= LIMIT {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {} bytes 10 s after the listing ended",
            store.wal_bytes()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    store.close().await;
}
