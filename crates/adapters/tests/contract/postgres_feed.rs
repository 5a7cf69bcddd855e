//! What the PostgreSQL store's change feed promises beyond the kit's
//! checks (C14): a transaction that took a lower position and commits
//! later is neither missed nor overtaken; a write that failed records no
//! change; every instance sees every change; old changes are pruned
//! without holding up writes; a copy starts with an empty feed.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use items_adapters::postgres::{PostgresSettings, PostgresSink, PostgresSnapshot, PostgresStore};
use items_domain::transfer::copy_store;
use items_domain::{Change, ChangeStream, ItemChange, ItemRepository, Name};
use items_testkit::Fixture;

use crate::scratch_store::{ScratchStore, scratch_url};

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

/// Asserts nothing arrives for `quiet`.
async fn assert_quiet(changes: &mut ChangeStream, quiet: Duration, why: &str) {
    if let Ok(next) = tokio::time::timeout(quiet, changes.next()).await {
        panic!("C14: {why}, yet {next:?} arrived");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_that_took_a_lower_position_and_commits_later_is_neither_missed_nor_overtaken_c14()
 {
    let scratch = ScratchStore::create().await;
    let mut subscription = scratch.store.changes().subscribe(None).await.unwrap();
    let slow = scratch.database.client().await.unwrap();
    // A writer of its own takes the next position and holds its commit.
    slow.batch_execute("begin; insert into items (name) values ('\\x736c6f77')")
        .await
        .unwrap();
    let fast = scratch.store.items().create(name("fast")).await.unwrap();
    assert_quiet(
        &mut subscription.changes,
        Duration::from_millis(700),
        "a change that took a higher position than a transaction still running is not final",
    )
    .await;
    slow.batch_execute("commit").await.unwrap();
    let first = next(&mut subscription.changes).await;
    let second = next(&mut subscription.changes).await;
    assert!(
        matches!(&first.change, ItemChange::Created(item) if item.name.as_str() == "slow"),
        "C14: the lower position first: {first:?}"
    );
    assert_eq!(second.change, ItemChange::Created(fast));
    scratch.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_fails_records_no_change_c12_c14() {
    let scratch = ScratchStore::create().await;
    let admin = scratch.database.client().await.unwrap();
    admin
        .batch_execute(
            "create function refuse_poison() returns trigger language plpgsql as $$ \
             begin if new.name = '\\x706f69736f6e'::bytea then raise 'injected failure'; end if; \
             return new; end $$; \
             create trigger refuse_poison before insert on items \
             for each row execute function refuse_poison();",
        )
        .await
        .unwrap();
    let mut subscription = scratch.store.changes().subscribe(None).await.unwrap();
    let items = scratch.store.items();
    assert!(items.create(name("poison")).await.is_err());
    let kept = items.create(name("kept")).await.unwrap();
    assert_eq!(
        next(&mut subscription.changes).await.change,
        ItemChange::Created(kept)
    );
    let rows: i64 = admin
        .query_one("select count(*) from changes", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "C14: nothing of the failed write was recorded");
    scratch.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_through_another_instance_arrives_within_a_second_c14() {
    let scratch = ScratchStore::create().await;
    let other = PostgresStore::connect(
        &scratch_url(&scratch.database),
        PostgresSettings::default(),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let mut subscription = scratch.store.changes().subscribe(None).await.unwrap();
    for round in 0..3 {
        let written = Instant::now();
        let item = other
            .items()
            .create(name(&format!("r{round}")))
            .await
            .unwrap();
        let change = next(&mut subscription.changes).await;
        assert_eq!(change.change, ItemChange::Created(item));
        assert!(
            written.elapsed() < Duration::from_secs(1),
            "C14: within 1 s of its commit, from another instance: {:?}",
            written.elapsed()
        );
    }
    other.close().await;
    scratch.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_past_the_retention_are_pruned_without_holding_up_writes_c14() {
    let scratch = ScratchStore::connect_with_settings(
        scratch_url,
        PostgresSettings {
            changes_retention: Duration::from_secs(1),
            changes_prune_every: Duration::from_millis(200),
            ..PostgresSettings::default()
        },
    )
    .await;
    let items = scratch.store.items();
    let mut subscription = scratch.store.changes().subscribe(None).await.unwrap();
    for n in 0..3 {
        items.create(name(&format!("old{n}"))).await.unwrap();
    }
    let oldest = next(&mut subscription.changes).await.cursor;
    drop(subscription);
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let admin = scratch.database.client().await.unwrap();
    let count = |sql: &'static str| {
        let admin = &admin;
        async move { admin.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(
        count("select count(*) from changes").await,
        0,
        "the old changes are gone"
    );
    assert_eq!(count("select pruned_through from change_log").await, 3);
    let started = Instant::now();
    for n in 0..20 {
        items.create(name(&format!("new{n}"))).await.unwrap();
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "pruning holds up no write"
    );
    let resumed = scratch
        .store
        .changes()
        .subscribe(Some(oldest))
        .await
        .unwrap();
    assert!(
        resumed.reset,
        "C14: a cursor past the retention gets a reset"
    );
    scratch.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_starts_an_empty_feed_c12_c14() {
    let source = ScratchStore::create().await;
    let mut subscription = source.store.changes().subscribe(None).await.unwrap();
    source.store.items().create(name("a")).await.unwrap();
    let cursor = next(&mut subscription.changes).await.cursor;
    let destination = ScratchStore::create().await;
    copy_store(
        &mut PostgresSnapshot::open(&source.url()).await.unwrap(),
        &mut PostgresSink::open(&destination.url()).await.unwrap(),
        10,
        &mut |_| {},
    )
    .await
    .unwrap();
    let admin = destination.database.client().await.unwrap();
    let rows: i64 = admin
        .query_one("select count(*) from changes", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "C12: the copy's feed starts empty");
    let resumed = destination
        .store
        .changes()
        .subscribe(Some(cursor))
        .await
        .unwrap();
    assert!(
        resumed.reset,
        "C14: a cursor of the source is unknown to the copy"
    );
    let mut changes = resumed.changes;
    let created = destination.store.items().create(name("b")).await.unwrap();
    assert_eq!(
        next(&mut changes).await.change,
        ItemChange::Created(created)
    );
    destination.teardown().await;
    source.teardown().await;
}
