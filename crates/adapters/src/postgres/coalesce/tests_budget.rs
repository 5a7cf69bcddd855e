//! Coalesced requests under the statement budget (C12): a request late
//! before its batch starts is never run, and a batch runs under the
//! earliest deadline of its requests, answering 503 to each and writing
//! nothing when that passes. Batches are forced by holding a kind's slot.

use std::sync::Arc;
use std::time::Duration;

use items_domain::{ItemQuery, ItemRepository};
use items_testkit::postgres::ScratchDatabase;
use items_testkit::tcp_proxy::TcpProxy;
use tokio::time::Instant;

use super::tests::{name, scratch, server_address, through, until_queued};
use crate::postgres::{PostgresSettings, PostgresStore};

/// A store with one slot per kind (a pool of 3) and `budget`, through a
/// proxy the test can freeze.
async fn store(budget: Duration) -> (PostgresStore, TcpProxy, ScratchDatabase) {
    let database = scratch().await;
    let proxy = TcpProxy::start(server_address().await).await;
    let url = through(&database, &proxy);
    let settings = PostgresSettings {
        pool_size: 3,
        statement_timeout: budget,
        ..PostgresSettings::default()
    };
    let store = PostgresStore::connect(&url, settings, Duration::from_secs(5))
        .await
        .expect("connects and migrates");
    (store, proxy, database)
}

/// The cause of a 503 names the budget (`budget.rs`).
fn over_budget(error: &items_domain::RepositoryError, budget: Duration) -> bool {
    std::error::Error::source(error).is_some_and(|cause| {
        cause
            .to_string()
            .contains(&format!("{} ms", budget.as_millis()))
    })
}

#[tokio::test]
async fn a_create_whose_budget_passed_before_its_batch_started_is_never_inserted_c12() {
    let budget = Duration::from_millis(300);
    let (store, _proxy, database) = store(budget).await;
    let items = store.items();
    let slot = Arc::clone(&store.item_creates.inner.slots)
        .try_acquire_owned()
        .expect("the one slot is free");

    let late = items.create(name("late")).await.expect_err("over budget");
    assert!(over_budget(&late, budget), "{late:?}");
    let kept = tokio::spawn({
        let items = items.clone();
        async move { items.create(name("kept")).await }
    });
    until_queued(&store.item_creates, 1).await;
    drop(slot);

    let kept = kept.await.expect("ran").expect("created");
    let page = items.list(&ItemQuery::default()).await.expect("a page");
    assert_eq!(page.items, [kept], "the late create wrote nothing");
    assert_eq!(store.item_creates.stats().largest, 1, "run without it");
    store.close().await;
    database.drop().await;
}

#[tokio::test]
async fn a_batch_runs_under_its_earliest_deadline_and_past_it_answers_503_to_each_and_writes_nothing_c12()
 {
    let budget = Duration::from_millis(1500);
    let (store, proxy, database) = store(budget).await;
    let items = store.items();
    let before = items.create(name("before")).await.expect("created");
    let slot = Arc::clone(&store.item_creates.inner.slots)
        .try_acquire_owned()
        .expect("the one slot is free");

    let first = tokio::spawn({
        let items = items.clone();
        async move { items.create(name("first")).await }
    });
    until_queued(&store.item_creates, 1).await;
    // The first request has a third of its budget left when the batch
    // starts; the second all of it.
    tokio::time::sleep(budget * 2 / 3).await;
    let second_deadline = Instant::now() + budget;
    let second = tokio::spawn({
        let items = items.clone();
        async move {
            let created = items.create(name("second")).await;
            (created, Instant::now())
        }
    });
    until_queued(&store.item_creates, 2).await;
    proxy.freeze();
    drop(slot);

    let first = first.await.expect("ran").expect_err("over budget");
    let (second, answered) = second.await.expect("ran");
    let second = second.expect_err("over budget");
    assert!(over_budget(&first, budget), "{first:?}");
    assert!(over_budget(&second, budget), "{second:?}");
    assert!(
        answered < second_deadline,
        "the second was answered at the first's deadline, not its own"
    );
    assert_eq!(store.item_creates.stats().largest, 2, "one batch for both");

    proxy.thaw();
    let page = items.list(&ItemQuery::default()).await.expect("a page");
    assert_eq!(page.items, [before], "the cut batch wrote nothing");
    store.close().await;
    database.drop().await;
}
