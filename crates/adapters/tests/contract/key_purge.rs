//! Expired idempotency keys leave a few per keyed create, oldest first,
//! through the `created_at` index (C7: "keys expire after 24 h without a
//! full scan"), in the SQLite and PostgreSQL stores: what the kit cannot
//! see through the port.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::scratch_store::ScratchStore;
use items_domain::idempotency::PURGE_BATCH;
use items_domain::{IdempotencyKey, ItemRepository, KEY_LIFETIME, Name};
use items_testkit::Fixture;

use super::sqlite_file::SqliteFile;

const OLD_KEYS: usize = 40;

fn start() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// Creates [`OLD_KEYS`] keyed items at `start()`, then keyed items a day
/// later, one at a time, returning how many keys `count` finds after each.
async fn purge_steps<F: Future<Output = i64>>(
    items: &dyn ItemRepository,
    mut count: impl FnMut() -> F,
) -> Vec<i64> {
    for n in 0..OLD_KEYS {
        let key = IdempotencyKey::parse(format!("old-{n}").as_bytes()).expect("a valid key");
        items
            .create_keyed(Name::parse("old").expect("a valid name"), &key, start())
            .await
            .expect("an old keyed create");
    }
    let mut counts = vec![count().await];
    let later = start() + KEY_LIFETIME + Duration::from_secs(1);
    for n in 0..3 {
        let key = IdempotencyKey::parse(format!("new-{n}").as_bytes()).expect("a valid key");
        items
            .create_keyed(Name::parse("new").expect("a valid name"), &key, later)
            .await
            .expect("a later keyed create");
        counts.push(count().await);
    }
    counts
}

/// 40 old keys; each later create removes 16 of them and adds its own.
fn expected() -> Vec<i64> {
    let batch = PURGE_BATCH as i64;
    let old = OLD_KEYS as i64;
    vec![old, old - batch + 1, old - 2 * batch + 2, 3]
}

#[tokio::test]
async fn expired_keys_leave_a_batch_per_keyed_create_over_sqlite_c7() {
    let file = SqliteFile::create().await;
    let connection = rusqlite::Connection::open(file.path()).unwrap();
    let counts = purge_steps(&file.store.items(), || {
        std::future::ready(
            connection
                .query_row("select count(*) from item_keys", [], |row| row.get(0))
                .unwrap(),
        )
    })
    .await;
    assert_eq!(counts, expected());

    // The purge's oldest-first selection reads the index, not the table.
    let mut explain = connection
        .prepare(
            "explain query plan select key from item_keys where created_at < 1 \
             order by created_at limit 16",
        )
        .unwrap();
    let plan: Vec<String> = explain
        .query_map([], |row| row.get(3))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    drop(explain);
    let plan: Vec<&str> = plan.iter().map(String::as_str).collect();
    assert!(
        plan.iter()
            .any(|step| step.contains("INDEX item_keys_created_at")),
        "{plan:?}"
    );
    assert!(
        !plan.iter().any(|step| step.contains("TEMP B-TREE")),
        "{plan:?}"
    );
    drop(connection);
    file.teardown().await;
}

#[tokio::test]
async fn expired_keys_leave_a_batch_per_keyed_create_over_postgres_c7() {
    let scratch = ScratchStore::create().await;
    let connection = scratch.database.client().await.unwrap();
    let counts = purge_steps(&scratch.store.items(), || async {
        connection
            .query_one("select count(*) from item_keys", &[])
            .await
            .unwrap()
            .get::<_, i64>(0)
    })
    .await;
    assert_eq!(counts, expected());

    // The purge's oldest-first selection can be an index range scan (with
    // 43 rows the planner would rather read the table, so that is ruled
    // out for this question).
    connection
        .batch_execute("set enable_seqscan = off")
        .await
        .unwrap();
    let plan: Vec<String> = connection
        .query(
            "explain select key from item_keys where created_at < 1 order by created_at limit 16",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        plan.iter()
            .any(|line| line.contains("Index Scan using item_keys_created_at")),
        "{plan:?}"
    );
    drop(connection);
    scratch.teardown().await;
}
