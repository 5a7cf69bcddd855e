//! The coalescing queues against a real PostgreSQL: each caller gets its
//! own answer, batches are atomic, abandoned requests are not run, and
//! ids stay unique and ordered (C2). Batches are forced by holding the
//! pool's connections, never by timing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::future::join_all;
use items_domain::{
    Id, IdempotencyKey, ItemQuery, ItemRepository, Keyed, Name, Price, ProductRepository,
};
use items_testkit::postgres::{ScratchDatabase, test_database_url, test_server_address};

use super::coalescer::Coalescer;
use super::limits::{PIPELINE_DEPTH, statement_slots};
use super::operation::Operation;
use crate::postgres::pool::{Lease, lease};
use crate::postgres::{PostgresSettings, PostgresStore, PostgresUrl};

pub(super) async fn scratch() -> ScratchDatabase {
    ScratchDatabase::create(&test_database_url())
        .await
        .expect("a scratch database")
}

pub(super) async fn store(url: PostgresUrl, pool_size: u32) -> PostgresStore {
    let settings = PostgresSettings {
        pool_size,
        ..PostgresSettings::default()
    };
    PostgresStore::connect(&url, settings, Duration::from_secs(5))
        .await
        .expect("connects and migrates")
}

/// The URL of the scratch database `database` through `proxy`.
pub(super) fn through(
    database: &ScratchDatabase,
    proxy: &items_testkit::tcp_proxy::TcpProxy,
) -> PostgresUrl {
    PostgresUrl::parse(&database.url_through(proxy.port())).expect("a valid URL")
}

/// The URL of the scratch database `database`.
pub(super) fn url_of(database: &ScratchDatabase) -> PostgresUrl {
    PostgresUrl::parse(&database.url()).expect("a valid URL")
}

pub(super) fn name(text: &str) -> Name {
    Name::parse(text).expect("a valid name")
}

/// Every connection of `store`'s pool, lent to the test: whatever is asked
/// of the store now queues.
pub(super) async fn hold_all(store: &PostgresStore, pool_size: u32) -> Vec<Lease> {
    let mut held = Vec::new();
    for _ in 0..pool_size {
        held.push(lease(&store.pool).await.expect("a connection"));
    }
    held
}

/// Waits until `count` requests are queued in `coalescer`.
pub(super) async fn until_queued<O: Operation>(coalescer: &Coalescer<O>, count: usize) {
    for _ in 0..10_000 {
        if coalescer.queued() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("{} requests queued, not {count}", coalescer.queued());
}

#[tokio::test]
async fn a_thousand_concurrent_reads_of_distinct_ids_each_get_their_own_row_c2() {
    let database = scratch().await;
    let store = store(url_of(&database), 2).await;
    let items = store.items();
    let created = join_all((1..=500).map(|n| {
        let items = items.clone();
        async move { items.create(name(&format!("item {n}"))).await }
    }))
    .await;
    // Batched, the creates took ids 1..=500 in the order they queued.
    let mut names = std::collections::HashMap::new();
    for item in created {
        let item = item.expect("created");
        names.insert(item.id, item.name);
    }
    assert_eq!(names.len(), 500);

    let held = hold_all(&store, 2).await;
    let reads = (1..=1000).map(|n| {
        let items = items.clone();
        tokio::spawn(async move { (n, items.get(Id::new(n)).await) })
    });
    let reads: Vec<_> = reads.collect();
    until_queued(&store.item_reads, 1000).await;
    drop(held);

    for read in join_all(reads).await {
        let (n, read) = read.expect("the read ran");
        let got = read.expect("answered");
        match names.get(&Id::new(n)) {
            Some(name) => {
                let item = got.expect("a created id is found");
                assert_eq!((item.id, &item.name), (Id::new(n), name), "its own row");
            }
            None => assert_eq!(got, None, "id {n} was never created"),
        }
    }
    assert!((1..=500).all(|n| names.contains_key(&Id::new(n))));
    let stats = store.item_reads.stats();
    assert_eq!(
        stats.largest, 1000,
        "the queued reads went as one statement"
    );
    store.close().await;
    database.drop().await;
}

/// Reads that are ready together share one statement even when the slot
/// and a connection were free as the first of them arrived: the
/// first read is run by the drainer it spawns, and that task runs after the
/// other reads of the same thread have queued. The test's runtime has one
/// thread, as an actix-web worker has; the order is the scheduler's, not a
/// matter of timing. A read alone in its batch runs the single-row
/// statement and finds its row, or its absence.
#[tokio::test]
async fn reads_ready_together_share_one_statement_though_a_connection_was_free() {
    let database = scratch().await;
    let store = store(url_of(&database), 10).await;
    let items = store.items();
    for n in 1..=15 {
        items
            .create(name(&format!("item {n}")))
            .await
            .expect("created");
    }

    let alone = items.get(Id::new(3)).await.expect("answered");
    assert_eq!(alone.map(|item| item.name), Some(name("item 3")));
    assert_eq!(items.get(Id::new(99)).await.expect("answered"), None);
    let before = store.item_reads.stats();
    assert_eq!(
        (before.statements, before.requests),
        (2, 2),
        "each went alone"
    );

    let reads = join_all((1..=20).map(|n| {
        let items = items.clone();
        async move { (n, items.get(Id::new(n)).await) }
    }))
    .await;
    for (n, read) in reads {
        let got = read.expect("answered").map(|item| (item.id, item.name));
        let expected = (n <= 15).then(|| (Id::new(n), name(&format!("item {n}"))));
        assert_eq!(got, expected, "read {n} got its own row or its absence");
    }
    let after = store.item_reads.stats();
    assert_eq!(
        after.statements - before.statements,
        1,
        "twenty reads ready together, one statement"
    );
    assert_eq!(after.largest, 20);
    store.close().await;
    database.drop().await;
}

#[tokio::test]
async fn a_read_issued_after_an_acknowledged_create_sees_it_c7() {
    let database = scratch().await;
    let store = store(url_of(&database), 1).await;
    let items = store.items();
    // Readers keep the one connection busy, so the creates and the reads
    // that follow them are batched; whether a read finds the connection
    // taken is timing, so the round is repeated (up to 5 times) until reads
    // were batched. Every read of every round must see its write.
    for round in 0.. {
        let tasks = (0..200).map(|n| {
            let items = items.clone();
            tokio::spawn(async move {
                let item = items
                    .create(name(&format!("r{round}n{n}")))
                    .await
                    .expect("created");
                let read = items.get(item.id).await.expect("answered");
                assert_eq!(read.as_ref(), Some(&item), "a read after the ack sees it");
            })
        });
        for task in join_all(tasks).await {
            task.expect("the read saw its write");
        }
        if store.item_reads.stats().largest > 1 || round == 4 {
            break;
        }
    }
    assert!(
        store.item_creates.stats().largest > 1,
        "creates were batched"
    );
    assert!(store.item_reads.stats().largest > 1, "reads were batched");
    store.close().await;
    database.drop().await;
}

#[tokio::test]
async fn batched_creates_get_ids_in_arrival_order_and_an_exact_total_c2_c10() {
    let database = scratch().await;
    let store = store(url_of(&database), 1).await;
    let items = store.items();
    let held = hold_all(&store, 1).await;
    let mut creates = Vec::new();
    for n in 0..50 {
        let items = items.clone();
        creates.push(tokio::spawn(async move {
            items.create(name(&format!("n{n}"))).await
        }));
        until_queued(&store.item_creates, n + 1).await;
    }
    drop(held);

    let ids: Vec<i64> = join_all(creates)
        .await
        .into_iter()
        .map(|create| create.expect("ran").expect("created").id.get())
        .collect();
    assert_eq!(ids, (1..=50).collect::<Vec<_>>(), "ids follow arrival");
    for (n, id) in ids.iter().enumerate() {
        let item = items.get(Id::new(*id)).await.expect("answered");
        assert_eq!(item.map(|item| item.name), Some(name(&format!("n{n}"))));
    }
    let page = items.list(&ItemQuery::default()).await.expect("a page");
    assert_eq!(
        page.total, 50,
        "the per-statement tally trigger added 50 once"
    );
    assert_eq!(store.item_creates.stats().largest, 50);
    store.close().await;
    database.drop().await;
}

#[tokio::test]
async fn batched_product_creates_each_get_their_own_product_c2() {
    let database = scratch().await;
    let store = store(url_of(&database), 1).await;
    let products = store.products();
    let held = hold_all(&store, 1).await;
    let creates: Vec<_> = (0..20)
        .map(|n| {
            let products = products.clone();
            let price = Price::new(f64::from(n) + 0.5).expect("a valid price");
            tokio::spawn(async move { products.create(name(&format!("p{n}")), price).await })
        })
        .collect();
    until_queued(&store.product_creates, 20).await;
    drop(held);

    let created: Vec<_> = join_all(creates)
        .await
        .into_iter()
        .map(|create| create.expect("ran").expect("created"))
        .collect();
    let listed = products.list().await.expect("a listing");
    assert_eq!(listed, created, "each caller got the row stored for it");
    assert_eq!(store.product_creates.stats().largest, 20);
    store.close().await;
    database.drop().await;
}

#[tokio::test]
async fn concurrent_creates_on_two_instances_get_distinct_ids_in_arrival_order_per_instance_c2() {
    let database = scratch().await;
    let stores = [
        store(url_of(&database), 1).await,
        store(url_of(&database), 1).await,
    ];
    let mut tasks = Vec::new();
    for n in 0..300 {
        for (instance, store) in stores.iter().enumerate() {
            let items = store.items();
            tasks.push(tokio::spawn(async move {
                let created = items.create(name(&format!("{instance}:{n}"))).await;
                (instance, created.expect("created").id.get())
            }));
        }
    }
    let mut per_instance = [Vec::new(), Vec::new()];
    // Spawned in order on this one-thread runtime, each instance's creates
    // queued in order; with one connection per instance its batches run
    // one after another.
    for task in join_all(tasks).await {
        let (instance, id) = task.expect("ran");
        per_instance[instance].push(id);
    }
    let mut all: Vec<i64> = per_instance.concat();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 600, "no id was handed out twice");
    for ids in &per_instance {
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
    }
    assert!(
        stores
            .iter()
            .any(|store| store.item_creates.stats().largest > 1)
    );
    for store in stores {
        store.close().await;
    }
    database.drop().await;
}

#[tokio::test]
async fn a_create_whose_caller_left_before_its_batch_is_not_inserted() {
    let database = scratch().await;
    let store = store(url_of(&database), 1).await;
    let items = store.items();
    let held = hold_all(&store, 1).await;
    let left = tokio::spawn({
        let items = items.clone();
        async move { items.create(name("left")).await }
    });
    until_queued(&store.item_creates, 1).await;
    let stayed = tokio::spawn({
        let items = items.clone();
        async move { items.create(name("stayed")).await }
    });
    until_queued(&store.item_creates, 2).await;
    left.abort();
    assert!(left.await.is_err_and(|error| error.is_cancelled()));
    drop(held);

    let stayed = stayed.await.expect("ran").expect("created");
    let page = items.list(&ItemQuery::default()).await.expect("a page");
    assert_eq!(page.items, [stayed], "the abandoned create wrote nothing");
    assert_eq!(page.total, 1);
    store.close().await;
    database.drop().await;
}

/// The address of the test server, for a proxy in front of it.
pub(super) async fn server_address() -> SocketAddr {
    test_server_address().await
}

#[test]
fn each_kind_gets_a_statement_slot_per_ten_connections_and_at_least_one() {
    assert_eq!(statement_slots(10), 1);
    assert_eq!(statement_slots(29), 2);
    assert_eq!(statement_slots(30), 3);
    assert_eq!(statement_slots(1), 1);
}

#[tokio::test]
async fn while_a_kinds_slots_are_taken_its_requests_queue_though_connections_are_free() {
    let database = scratch().await;
    // A pool of 3 gives each kind one slot ([`statement_slots`]), reads one
    // slot pipelined [`PIPELINE_DEPTH`] deep: every one of them is taken.
    let store = store(url_of(&database), 3).await;
    let items = store.items();
    items.create(name("only")).await.expect("created");
    let slots = &store.item_reads.inner.slots;
    let slot = Arc::clone(slots)
        .try_acquire_many_owned(PIPELINE_DEPTH as u32)
        .expect("the read slots are free");
    assert_eq!(slots.available_permits(), 0);
    let reads: Vec<_> = (0..5)
        .map(|_| {
            let items = items.clone();
            tokio::spawn(async move { items.get(Id::new(1)).await })
        })
        .collect();
    until_queued(&store.item_reads, 5).await;
    assert_eq!(store.pool.status().available, 1, "a connection was free");
    drop(slot);

    for read in join_all(reads).await {
        let item = read.expect("ran").expect("answered");
        assert_eq!(item.map(|item| item.name), Some(name("only")));
    }
    assert_eq!(
        store.item_reads.stats().largest,
        5,
        "one statement for the five"
    );
    store.close().await;
    database.drop().await;
}

#[tokio::test]
async fn a_keyed_create_never_joins_a_batch_c7() {
    let database = scratch().await;
    // A pool of 3 gives each kind one slot ([`statement_slots`]).
    let store = store(url_of(&database), 3).await;
    let slots = [
        &store.item_creates.inner.slots,
        &store.product_creates.inner.slots,
    ]
    .map(|slot| {
        Arc::clone(slot)
            .try_acquire_owned()
            .expect("the one slot is free")
    });
    let key = IdempotencyKey::parse(b"keyed-1").expect("a valid key");

    // Every create slot is taken: a key-less create would queue until it
    // is free; a keyed one takes keys.rs's path on a free connection.
    let item = store
        .items()
        .create_keyed(name("keyed"), &key, SystemTime::now())
        .await
        .expect("created at once");
    let product = store
        .products()
        .create_keyed(
            name("keyed"),
            Price::new(1.0).expect("a price"),
            &key,
            SystemTime::now(),
        )
        .await
        .expect("created at once");
    assert!(matches!(item, Keyed::Created(_)), "{item:?}");
    assert!(matches!(product, Keyed::Created(_)), "{product:?}");
    for stats in store.coalescing_stats() {
        assert_eq!(stats.statements, 0, "no coalesced statement ran");
    }
    drop(slots);
    store.close().await;
    database.drop().await;
}
