//! A batch whose connection breaks: every request in it is answered 503
//! and none of it is stored, whether the connection broke before the
//! batch's transaction was opened or inside it.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use items_domain::{Id, Item, ItemQuery, ItemRepository, RepositoryError};
use items_testkit::postgres::ScratchDatabase;
use items_testkit::tcp_proxy::TcpProxy;
use tokio::task::JoinHandle;

use super::tests::{hold_all, name, scratch, server_address, store, through, until_queued};
use crate::postgres::PostgresStore;

/// A store of `pool_size` connections reaching `database` through a proxy
/// the test can cut, holding one item.
async fn behind_a_proxy(database: &ScratchDatabase, pool_size: u32) -> (PostgresStore, TcpProxy) {
    let proxy = TcpProxy::start(server_address().await).await;
    let url = through(database, &proxy);
    let store = store(url, pool_size).await;
    store.items().create(name("before")).await.expect("created");
    (store, proxy)
}

/// Once the proxy is mended, the store holds the item made before the cut
/// and nothing else.
async fn only_the_item_before_the_cut_is_stored(store: &PostgresStore, proxy: &TcpProxy) {
    proxy.set_cut(false);
    let items = store.items();
    let mut page = items.list(&ItemQuery::default()).await;
    for _ in 0..20 {
        if page.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        page = items.list(&ItemQuery::default()).await;
    }
    let page = page.expect("the store recovers");
    assert_eq!(
        page.items.len(),
        1,
        "nothing of the failed batch was stored"
    );
    assert_eq!(page.total, 1);
}

/// Waits until a session of `database` has a transaction open and idle:
/// a create drainer that began its batch's transaction and waits for its
/// slot.
async fn until_a_transaction_waits(database: &ScratchDatabase) {
    let observer = database.client().await.expect("an observing connection");
    for _ in 0..10_000 {
        let waiting: i64 = observer
            .query_one(
                "select count(*) from pg_stat_activity \
                 where datname = current_database() and state = 'idle in transaction'",
                &[],
            )
            .await
            .expect("pg_stat_activity")
            .get(0);
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("no transaction was opened for the batch");
}

/// Ten creates of items the test expects to be lost, each on its own task.
fn ten_creates(store: &PostgresStore) -> Vec<JoinHandle<Result<Item, RepositoryError>>> {
    (0..10)
        .map(|n| {
            let items = store.items();
            tokio::spawn(async move { items.create(name(&format!("lost {n}"))).await })
        })
        .collect()
}

/// Every request of a broken batch was answered unavailable (503).
async fn each_answered_unavailable<T: std::fmt::Debug>(
    requests: Vec<JoinHandle<Result<T, RepositoryError>>>,
    what: &str,
) {
    for answer in join_all(requests).await {
        let answer = answer.expect("ran");
        assert!(
            answer.is_err(),
            "{what} of the broken batch is 503: {answer:?}"
        );
    }
}

#[tokio::test]
async fn a_batch_whose_connection_breaks_before_it_starts_answers_unavailable_to_each_and_stores_nothing()
 {
    let database = scratch().await;
    let (store, proxy) = behind_a_proxy(&database, 1).await;
    let items = store.items();
    let held = hold_all(&store, 1).await;
    let creates = ten_creates(&store);
    let reads: Vec<_> = (0..10)
        .map(|_| {
            let items = items.clone();
            tokio::spawn(async move { items.get(Id::new(1)).await })
        })
        .collect();
    until_queued(&store.item_creates, 10).await;
    until_queued(&store.item_reads, 10).await;

    // The held connection is settled, so the pool lends it again as it is:
    // the batches start on a connection the proxy has dropped.
    proxy.set_cut(true);
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(held);
    each_answered_unavailable(creates, "a create").await;
    each_answered_unavailable(reads, "a read").await;
    assert_eq!(
        store.item_creates.stats().requests,
        1,
        "no statement ran for the broken batch's creates"
    );
    only_the_item_before_the_cut_is_stored(&store, &proxy).await;
    store.close().await;
    database.drop().await;
}

#[tokio::test]
async fn a_batch_whose_connection_breaks_inside_its_transaction_answers_unavailable_to_each_and_stores_nothing()
 {
    let database = scratch().await;
    let (store, proxy) = behind_a_proxy(&database, 2).await;
    let slot = Arc::clone(&store.item_creates.inner.slots)
        .try_acquire_owned()
        .expect("the one slot is free");
    let creates = ten_creates(&store);
    until_queued(&store.item_creates, 10).await;
    until_a_transaction_waits(&database).await;

    proxy.set_cut(true);
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(slot);
    each_answered_unavailable(creates, "a create").await;
    assert_eq!(
        store.item_creates.stats().largest,
        10,
        "the creates were one batch, its statement sent on the broken connection"
    );
    only_the_item_before_the_cut_is_stored(&store, &proxy).await;
    store.close().await;
    database.drop().await;
}
