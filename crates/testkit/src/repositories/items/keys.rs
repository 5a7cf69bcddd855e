//! The checks of [`ItemRepository::create_keyed`] (C7): a repeat replays the
//! item as first created and creates nothing, another name is a mismatch,
//! keys expire after 24 hours, and concurrent creates under one key create
//! one item. Times are the caller's (`at`), so expiry is checked by
//! passing later times, without waiting.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use items_domain::{
    Id, IdempotencyKey, Item, ItemQuery, ItemRepository, KEY_LIFETIME, Keyed, RepositoryError,
};

use super::name;
use crate::answer::Answer;

/// A fixed moment for the first create: the stores compare only the times
/// they are given.
pub(crate) fn start() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

pub(crate) fn key(raw: &str) -> IdempotencyKey {
    IdempotencyKey::parse(raw.as_bytes()).answer(format_args!("the kit's key {raw:?}"))
}

async fn create(
    items: &dyn ItemRepository,
    raw: &str,
    k: &str,
    at: SystemTime,
) -> Result<Keyed<Item>, RepositoryError> {
    items.create_keyed(name(raw), &key(k), at).await
}

async fn total(items: &dyn ItemRepository) -> u64 {
    items
        .list(&ItemQuery::default())
        .await
        .answer("list the items")
        .total
}

fn item(id: i64, raw: &str) -> Item {
    Item {
        id: Id::new(id),
        name: name(raw),
    }
}

pub async fn a_repeated_key_replays_the_item_as_first_created_and_creates_nothing_c7(
    items: Arc<dyn ItemRepository>,
) {
    let first = create(&*items, "pen", "k-1", start())
        .await
        .answer("create pen under k-1");
    assert_eq!(
        first,
        Keyed::Created(item(1, "pen")),
        "C7: a new key creates the item"
    );
    let again = create(&*items, "pen", "k-1", start() + Duration::from_secs(3600))
        .await
        .answer("create pen under k-1 again an hour later");
    assert_eq!(
        again,
        Keyed::Replayed(item(1, "pen")),
        "C7: a repeat with the same key and name replays the first item"
    );
    assert_eq!(total(&*items).await, 1, "C7: a replay creates nothing");

    // The replay answers the first response, whatever became of the item.
    let renamed = items
        .replace(&item(1, "ink"), None)
        .await
        .answer("rename item 1");
    assert_eq!(renamed, items_domain::Replaced::Yes);
    let after_rename = create(&*items, "pen", "k-1", start() + Duration::from_secs(7200))
        .await
        .answer("create pen under k-1 after the item was renamed");
    assert_eq!(
        after_rename,
        Keyed::Replayed(item(1, "pen")),
        "C7: a replay answers the item as first created, not as renamed since"
    );
    items.delete(Id::new(1)).await.answer("delete item 1");
    let after_delete = create(&*items, "pen", "k-1", start() + Duration::from_secs(7200))
        .await
        .answer("create pen under k-1 after the item was deleted");
    assert_eq!(
        after_delete,
        Keyed::Replayed(item(1, "pen")),
        "C7: a replay answers the item as first created, also once it is deleted"
    );
    assert_eq!(
        total(&*items).await,
        0,
        "C7: a replay never re-creates the item"
    );

    let other = create(&*items, "pen", "k-2", start())
        .await
        .answer("create pen under k-2");
    assert_eq!(
        other,
        Keyed::Created(item(2, "pen")),
        "C7: another key is another create, with the next id (C2)"
    );
}

pub async fn a_key_repeated_with_another_name_is_a_mismatch_and_creates_nothing_c7(
    items: Arc<dyn ItemRepository>,
) {
    create(&*items, "pen", "k-1", start())
        .await
        .answer("create pen under k-1");
    let other = create(&*items, "ink", "k-1", start() + Duration::from_secs(1))
        .await
        .answer("create ink under k-1");
    assert_eq!(
        other,
        Keyed::Mismatch,
        "C7: the same key with another name is refused"
    );
    assert_eq!(total(&*items).await, 1, "C7: a mismatch creates nothing");
    let names_differ_by_case = create(&*items, "Pen", "k-1", start())
        .await
        .answer("create Pen");
    assert_eq!(
        names_differ_by_case,
        Keyed::Mismatch,
        "C3, C7: names compare exactly"
    );
    let plain = items
        .create(name("cap"))
        .await
        .answer("create cap without a key");
    assert_eq!(
        plain.id,
        Id::new(2),
        "C2: keyed and plain creates share the counter"
    );
}

pub async fn keys_expire_after_24_hours_and_may_then_be_reused_c7(items: Arc<dyn ItemRepository>) {
    create(&*items, "pen", "k-1", start())
        .await
        .answer("create pen under k-1");
    let just_live = start() + KEY_LIFETIME - Duration::from_millis(1);
    let replay = create(&*items, "pen", "k-1", just_live)
        .await
        .answer("repeat within 24 h");
    assert_eq!(
        replay,
        Keyed::Replayed(item(1, "pen")),
        "C7: a key holds for 24 hours"
    );
    let expired = start() + KEY_LIFETIME + Duration::from_millis(1);
    let reused = create(&*items, "ink", "k-1", expired)
        .await
        .answer("reuse after 24 h");
    assert_eq!(
        reused,
        Keyed::Created(item(2, "ink")),
        "C7: after 24 hours the key is free: another name creates a new item"
    );
    let replay = create(&*items, "ink", "k-1", expired + Duration::from_secs(60))
        .await
        .answer("repeat the reused key");
    assert_eq!(
        replay,
        Keyed::Replayed(item(2, "ink")),
        "C7: a reused key replays its new item"
    );
    // Many expired keys are purged a few per create; none gets in the way.
    for index in 0..40 {
        create(&*items, "old", &format!("old-{index}"), start())
            .await
            .answer("create old");
    }
    let later = expired + KEY_LIFETIME;
    for index in 0..40 {
        let fresh = create(&*items, "new", &format!("old-{index}"), later)
            .await
            .answer("reuse an expired key");
        assert!(
            matches!(fresh, Keyed::Created(_)),
            "C7: an expired key is free: {fresh:?}"
        );
    }
}

pub async fn concurrent_creates_under_one_key_create_one_item_c7(items: Arc<dyn ItemRepository>) {
    let creates = (0..8).map(|_| create(&*items, "pen", "k-1", start()));
    let answers: Vec<Keyed<Item>> = join_all(creates)
        .await
        .into_iter()
        .map(|answer| answer.answer("create pen under k-1 concurrently"))
        .collect();
    let created = answers
        .iter()
        .filter(|a| matches!(a, Keyed::Created(_)))
        .count();
    assert_eq!(
        created, 1,
        "C7: one of 8 concurrent creates under one key creates: {answers:?}"
    );
    assert!(
        answers
            .iter()
            .all(|a| *a == Keyed::Created(item(1, "pen")) || *a == Keyed::Replayed(item(1, "pen"))),
        "C7: the others replay that item: {answers:?}"
    );
    assert_eq!(total(&*items).await, 1, "C7: one item for one key");
}
