//! The PostgreSQL store's full listings take turns (C12): at most a
//! quarter of the pool serves listings at once, a listing waiting for its
//! turn holds no connection, and the other connections serve every other
//! request meanwhile.

use std::time::Duration;

use futures_util::TryStreamExt;
use items_adapters::postgres::PostgresSettings;
use items_domain::{Item, ItemQuery, ItemRepository, Name, PageLimit};
use items_testkit::Fixture;

use crate::scratch_store::{ScratchStore, scratch_url};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_take_turns_for_a_quarter_of_the_pool_and_the_rest_serves_others_c12() {
    let settings = PostgresSettings {
        pool_size: 4,
        statement_timeout: Duration::from_secs(3),
        ..PostgresSettings::default()
    };
    let scratch = ScratchStore::connect_with_settings(scratch_url, settings).await;
    let items = scratch.store.items();
    for n in 0..1500 {
        items
            .create(Name::parse(&format!("n{n}")).expect("a valid name"))
            .await
            .expect("created");
    }
    // The one turn of a pool of four, held while the listing is not read.
    let mut listing = items.list_all().await.expect("the listing opens");
    let first = listing
        .batches
        .try_next()
        .await
        .expect("a batch")
        .expect("a first batch");
    assert_eq!(first.len(), 1000);
    let second = tokio::spawn({
        let items = items.clone();
        async move { items.list_all().await.map(|listing| listing.total) }
    });

    // Waiting for its turn, the second listing holds no connection: the
    // three others serve reads and writes at once.
    let page = ItemQuery {
        limit: Some(PageLimit::new(10).expect("a valid limit")),
        ..ItemQuery::default()
    };
    for round in 0..3 {
        let (pages, created) = tokio::join!(
            futures_util::future::join_all((0..3).map(|_| items.list(&page))),
            items.create(Name::parse(&format!("during {round}")).expect("a valid name")),
        );
        assert!(pages.iter().all(Result::is_ok), "{pages:?}");
        assert!(created.is_ok(), "{created:?}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !second.is_finished(),
        "one listing at a time on a pool of four"
    );

    let rest: Vec<Vec<Item>> = listing.batches.try_collect().await.expect("read");
    assert_eq!(rest.concat().len(), 500, "the first listing ends whole");
    let total = tokio::time::timeout(Duration::from_secs(3), second)
        .await
        .expect("the second listing's turn comes once the first ends")
        .expect("the task ends")
        .expect("the second listing opens");
    assert_eq!(total, 1503);
    scratch.teardown().await;
}
