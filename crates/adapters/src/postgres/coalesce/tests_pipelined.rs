//! Pipelined reads: a read batch is sent on the connection the batch
//! before it is in flight on, without waiting for that batch's reply.

use std::time::Duration;

use items_domain::{Id, ItemRepository};
use items_testkit::tcp_proxy::TcpProxy;

use super::limits::PIPELINE_DEPTH;
use super::tests::{name, scratch, server_address, store, through};

/// Waits until the reads have sent `count` statements in all.
async fn until_sent(store: &crate::postgres::PostgresStore, count: u64) -> bool {
    for _ in 0..2_000 {
        if store.item_reads.stats().statements >= count {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    false
}

#[tokio::test]
async fn a_read_batch_is_sent_while_the_one_before_it_waits_for_its_reply_on_the_same_connection() {
    let database = scratch().await;
    let proxy = TcpProxy::start(server_address().await).await;
    // A pool of 3: one read slot, pipelined two deep.
    let store = store(through(&database, &proxy), 3).await;
    let items = store.items();
    items.create(name("only")).await.expect("created");
    items.get(Id::new(1)).await.expect("read");
    let before = store.item_reads.stats().statements;
    let open = store.pool.status().size;

    // Nothing comes back while the proxy is frozen: the first batch's
    // reply is held, and the second must not wait for it.
    proxy.freeze();
    let first = tokio::spawn({
        let items = items.clone();
        async move { items.get(Id::new(1)).await }
    });
    assert!(until_sent(&store, before + 1).await, "the first batch went");
    let second = tokio::spawn({
        let items = items.clone();
        async move { items.get(Id::new(2)).await }
    });
    let sent = until_sent(&store, before + 2).await;
    let connections = store.pool.status().size;
    proxy.thaw();

    assert!(
        sent,
        "the second batch was sent while the first was in flight"
    );
    assert_eq!(PIPELINE_DEPTH, 2);
    assert_eq!(
        connections, open,
        "both went on the connection already open"
    );
    let first = first.await.expect("ran").expect("answered");
    assert_eq!(first.map(|item| item.name), Some(name("only")));
    assert_eq!(second.await.expect("ran").expect("answered"), None);
    store.close().await;
    database.drop().await;
}
