//! The change-feed contract (C14): one check per MUST of
//! [`ChangeFeed`], each on a fresh store whose items and feed a
//! [`ChangeFeedFixture`] hands out.
//!
//! A check writes through the store's [`ItemRepository`] and reads what its
//! [`ChangeFeed`] tells subscribers: every committed change once, in commit
//! order, with a cursor that resumes right after it; nothing from a write
//! that wrote nothing; a reset for a cursor the store does not know; a
//! subscriber that does not read never delays a writer. Run them all with
//! [`contract_tests!`](crate::contract_tests)`(changes …)`.
//!
//! A write that fails is a store's own affair (the kit cannot make one
//! fail): a store's own tests check that a failed write leaves no change.

mod subscriber;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use items_domain::{
    ChangeFeed, Cursor, FeedError, Id, Item, ItemChange, ItemQuery, ItemRepository, Name, Replaced,
};

use self::subscriber::{PATIENCE, Subscriber, created, deleted, item, replaced, what};
use crate::Fixture;
use crate::answer::Answer;

/// A store under test with a change feed: what `contract_tests!(changes …)`
/// builds once per check.
pub trait ChangeFeedFixture: Fixture {
    /// The store's items, empty when the check starts.
    fn items(&self) -> Arc<dyn ItemRepository>;

    /// The changes of those items; every call shares the same store.
    fn changes(&self) -> Arc<dyn ChangeFeed>;

    /// Makes every change committed so far fall out of the store's
    /// retention, as time (or, for a store that keeps the last N changes,
    /// N later writes) would: a cursor of one of them is then unknown.
    fn expire_changes(&self) -> impl Future<Output = ()>;
}

fn name(raw: &str) -> Name {
    item(1, raw).name
}

/// C14: a subscriber gets every committed change once, in commit order,
/// with its kind and the item as written (`deleted`: its id), each within
/// a second of its commit.
pub async fn every_committed_change_reaches_a_subscriber_once_in_order_c14(
    store: &impl ChangeFeedFixture,
) {
    let items = store.items();
    let mut subscriber = Subscriber::after(&*store.changes(), None, "subscribed, then wrote").await;
    let started = Instant::now();
    items.create(name("pen")).await.answer("create pen");
    let pen = Item {
        id: Id::new(1),
        name: name("quill"),
    };
    items.replace(&pen, None).await.answer("rename 1 to quill");
    items.create(name("ink")).await.answer("create ink");
    items.delete(Id::new(1)).await.answer("delete 1");
    let wrote = started.elapsed();

    let changes = subscriber.take(4).await;
    let latest = started.elapsed();

    assert_eq!(
        what(&changes),
        [
            created(1, "pen"),
            replaced(1, "quill"),
            created(2, "ink"),
            deleted(1)
        ],
        "C14: every committed change once, in commit order: created pen, renamed it quill, \
         created ink, deleted pen"
    );
    let mut cursors: Vec<&str> = changes
        .iter()
        .map(|change| change.cursor.as_str())
        .collect();
    cursors.dedup();
    assert_eq!(
        cursors.len(),
        4,
        "C14: each change has a cursor of its own: {cursors:?}"
    );
    assert!(
        latest < wrote + Duration::from_secs(1),
        "C14: a change arrives within 1 s of its commit: the four writes took {wrote:?}, the \
         last change arrived {latest:?} after the first write"
    );
    subscriber
        .assert_quiet("four changes were committed and four delivered")
        .await;
}

/// C14: a subscription without a cursor starts at the present: nothing
/// committed before it, everything committed after it returned.
pub async fn a_subscription_starts_at_the_present_c14(store: &impl ChangeFeedFixture) {
    let items = store.items();
    items.create(name("before")).await.answer("create before");
    let mut subscriber =
        Subscriber::after(&*store.changes(), None, "created 1, subscribed, created 2").await;
    assert!(
        !subscriber.subscription.reset,
        "C14: a subscription without a cursor is no reset"
    );
    items.create(name("after")).await.answer("create after");

    let first = subscriber.next().await;

    assert_eq!(
        first.change,
        created(2, "after"),
        "C14: without a cursor the stream starts at the present: item 1 was created before the \
         subscription, item 2 after it"
    );
}

/// C14: resuming after a change's cursor gives exactly the changes after
/// it (none missed, none repeated), then the later ones; resuming from a
/// subscription's `start` gives what that subscription gave.
pub async fn resuming_after_a_cursor_misses_and_repeats_nothing_c14(
    store: &impl ChangeFeedFixture,
) {
    let items = store.items();
    let feed = store.changes();
    let mut first = Subscriber::after(&*feed, None, "the first subscription").await;
    let start = first.subscription.start.clone();
    for n in 1..=5 {
        items
            .create(name(&format!("n{n}")))
            .await
            .answer(format_args!("create n{n}"));
    }
    let seen = first.take(5).await;
    drop(first);

    let mut resumed = Subscriber::after(
        &*feed,
        Some(&seen[1].cursor),
        "resumed after the second of five creates",
    )
    .await;
    assert!(
        !resumed.subscription.reset,
        "C14: a retained cursor resumes, it is no reset"
    );
    assert_eq!(
        resumed.subscription.start, seen[1].cursor,
        "C14: a resumed stream starts at the cursor asked for"
    );
    items.create(name("n6")).await.answer("create n6");
    let after = resumed.take(4).await;
    assert_eq!(
        what(&after),
        [
            created(3, "n3"),
            created(4, "n4"),
            created(5, "n5"),
            created(6, "n6")
        ],
        "C14: resuming after the second change gives the third, fourth and fifth, none missed or \
         repeated, then the change committed since"
    );
    assert_eq!(
        after[..3],
        seen[2..],
        "C14: a resumed change has the cursor it had the first time"
    );

    let mut from_start = Subscriber::after(
        &*feed,
        Some(&start),
        "resumed from the start of the first subscription",
    )
    .await;
    let again = from_start.take(6).await;
    assert_eq!(
        what(&again[..5]),
        what(&seen),
        "C14: a subscription's start cursor resumes exactly where it began"
    );
    assert_eq!(again[5].change, created(6, "n6"));

    let mut at_the_end = Subscriber::after(
        &*feed,
        Some(&after[3].cursor),
        "resumed after the latest change",
    )
    .await;
    at_the_end
        .assert_quiet("resumed after the latest change, with nothing written since")
        .await;
}

/// C14: a cursor the store does not know (made up, malformed for it, from
/// another store) gets `reset` and the stream starts at the present.
pub async fn an_unknown_cursor_is_reset_to_the_present_c14(store: &impl ChangeFeedFixture) {
    let items = store.items();
    let feed = store.changes();
    items.create(name("old")).await.answer("create old");
    let mut probe = Subscriber::after(&*feed, None, "a probe").await;
    items.create(name("known")).await.answer("create known");
    let known = probe.next().await.cursor;
    drop(probe);

    for unknown in [
        "0",
        "unknown",
        "m0.0",
        "s0.1",
        "p0.1",
        "99999999999999999999",
        &format!("{known}0"),
        &format!("x{known}"),
    ] {
        let Ok(cursor) = Cursor::parse(unknown.as_bytes()) else {
            continue;
        };
        let mut subscriber =
            Subscriber::after(&*feed, Some(&cursor), format!("resumed after {unknown:?}")).await;
        assert!(
            subscriber.subscription.reset,
            "C14: a cursor the store never gave ({unknown:?}) is a reset"
        );
        let wrote = items
            .create(name(unknown))
            .await
            .answer(format_args!("create {unknown}"));
        let first = subscriber.next().await;
        assert_eq!(
            first.change,
            ItemChange::Created(wrote),
            "C14: after a reset the stream starts at the present, with the next change"
        );
    }
}

/// C14: a cursor older than the retention gets `reset` and the stream
/// starts at the present; what was written meanwhile is not replayed.
pub async fn an_expired_cursor_is_reset_to_the_present_c14(store: &impl ChangeFeedFixture) {
    let items = store.items();
    let feed = store.changes();
    let mut probe = Subscriber::after(&*feed, None, "a probe").await;
    let first = items.create(name("first")).await.answer("create first");
    items.create(name("second")).await.answer("create second");
    // The cursor of the first: the change after it expires too.
    let cursor = probe.next().await.cursor;
    drop(probe);
    store.expire_changes().await;
    items
        .create(name("meanwhile"))
        .await
        .answer("create meanwhile");

    let mut subscriber = Subscriber::after(
        &*feed,
        Some(&cursor),
        "resumed after a change older than the retention",
    )
    .await;
    assert!(
        subscriber.subscription.reset,
        "C14: a cursor past the retention (the create of item {}) is a reset",
        first.id
    );
    let later = items.create(name("later")).await.answer("create later");
    let next = subscriber.next().await;
    assert_eq!(
        next.change,
        ItemChange::Created(later),
        "C14: after a reset the stream starts at the present: what was written between the \
         expired cursor and the subscription is not replayed"
    );
}

/// C14: a write that wrote nothing is no change: a replace of a missing id
/// or with a stale expected name, a delete of a missing id.
pub async fn a_write_that_wrote_nothing_is_no_change_c14(store: &impl ChangeFeedFixture) {
    let items = store.items();
    items.create(name("kept")).await.answer("create kept");
    let mut subscriber = Subscriber::after(
        &*store.changes(),
        None,
        "wrote nothing three ways, then created",
    )
    .await;
    let missing = item(9, "ghost");
    let replaced_missing = items
        .replace(&missing, None)
        .await
        .answer("replace missing 9");
    assert_eq!(replaced_missing, Replaced::NotFound);
    let stale = items
        .replace(&item(1, "new"), Some(name("stale")))
        .await
        .answer("replace 1 expecting a stale name");
    assert_eq!(stale, Replaced::Changed);
    let existed = items.delete(Id::new(9)).await.answer("delete missing 9");
    assert!(!existed);
    let marker = items.create(name("marker")).await.answer("create marker");

    let next = subscriber.next().await;

    assert_eq!(
        next.change,
        ItemChange::Created(marker),
        "C14: a replace of a missing id, a replace with a stale expected name and a delete of a \
         missing id write nothing, so the first change is the create after them"
    );
}

/// C14: under concurrent writers every subscriber gets every change once,
/// all subscribers in the same order, each item's changes in the order
/// they committed (also when writers race on one item), and the changes
/// replayed give the store's final state.
pub async fn concurrent_writes_reach_every_subscriber_once_in_commit_order_c14(
    store: &impl ChangeFeedFixture,
) {
    const WRITERS: usize = 8;
    const ROUNDS: usize = 6;
    let items = store.items();
    let feed = store.changes();
    let shared = items.create(name("shared")).await.answer("create shared");
    let mut subscribers = Vec::new();
    for n in 0..3 {
        subscribers.push(Subscriber::after(&*feed, None, format!("subscriber {n} of 3")).await);
    }
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let items = Arc::clone(&items);
            tokio::spawn(async move { write_rounds(&*items, writer, ROUNDS, shared.id).await })
        })
        .collect();
    let mut written = 0;
    for writer in writers {
        written += writer.await.answer("a writer task");
    }

    let mut orders = Vec::new();
    for subscriber in &mut subscribers {
        let changes = subscriber.take(written).await;
        subscriber
            .assert_quiet("every change committed was delivered")
            .await;
        orders.push(changes);
    }
    let first = &orders[0];
    for (n, other) in orders.iter().enumerate().skip(1) {
        assert!(
            other == first,
            "C14: every subscriber gets the same changes in the same order: subscriber {n} \
             differs from subscriber 0"
        );
    }
    let mut cursors: Vec<&str> = first.iter().map(|change| change.cursor.as_str()).collect();
    cursors.sort_unstable();
    cursors.dedup();
    assert_eq!(
        cursors.len(),
        written,
        "C14: each change once, each with a cursor of its own"
    );

    // Replaying the changes in their order gives the store as it is.
    let mut replayed: BTreeMap<Id, Name> = BTreeMap::from([(shared.id, shared.name.clone())]);
    for change in first {
        match &change.change {
            ItemChange::Created(item) => {
                let fresh = replayed.insert(item.id, item.name.clone()).is_none();
                assert!(
                    fresh,
                    "C14: {item:?} is created once, before any change to it"
                );
            }
            ItemChange::Replaced(item) => {
                let known = replayed.insert(item.id, item.name.clone()).is_some();
                assert!(
                    known,
                    "C14: {item:?} is replaced after it was created, before its delete"
                );
            }
            ItemChange::Deleted(id) => {
                let known = replayed.remove(id).is_some();
                assert!(
                    known,
                    "C14: item {id} is deleted after it was created, once"
                );
            }
        }
    }
    let listed = items
        .list(&ItemQuery::default())
        .await
        .answer("list the items");
    let stored: BTreeMap<Id, Name> = listed
        .items
        .into_iter()
        .map(|item| (item.id, item.name))
        .collect();
    assert!(
        replayed == stored,
        "C14: the changes, replayed in the order delivered, give the store's final state (each \
         item's changes in commit order, also for the item {WRITERS} writers renamed at once): \
         replayed {replayed:?}, stored {stored:?}"
    );
}

/// One writer's rounds: create an item, rename it, rename the shared item,
/// delete every other item it made. Returns how many changes it committed.
async fn write_rounds(
    items: &dyn ItemRepository,
    writer: usize,
    rounds: usize,
    shared: Id,
) -> usize {
    let mut committed = 0;
    for round in 0..rounds {
        let made = items
            .create(name(&format!("w{writer}r{round}")))
            .await
            .answer(format_args!("writer {writer} creates round {round}"));
        let renamed = Item {
            id: made.id,
            name: name(&format!("w{writer}r{round}b")),
        };
        let mine = items
            .replace(&renamed, None)
            .await
            .answer(format_args!("writer {writer} renames its item"));
        let theirs = items
            .replace(
                &Item {
                    id: shared,
                    name: name(&format!("shared by w{writer}r{round}")),
                },
                None,
            )
            .await
            .answer(format_args!("writer {writer} renames the shared item"));
        assert_eq!((mine, theirs), (Replaced::Yes, Replaced::Yes));
        committed += 3;
        if round % 2 == 1 {
            let existed = items
                .delete(made.id)
                .await
                .answer(format_args!("writer {writer} deletes its item"));
            assert!(existed);
            committed += 1;
        }
    }
    committed
}

/// C14: a subscriber that does not read never delays a writer: thousands
/// of writes complete while it reads nothing, and its stream then gives
/// the changes in order, or ends as too slow (it resumes with its cursor).
pub async fn a_subscriber_that_does_not_read_never_delays_writes_c14(
    store: &impl ChangeFeedFixture,
) {
    const WRITES: usize = 2000;
    let items = store.items();
    let mut idle =
        Subscriber::after(&*store.changes(), None, "a subscriber that reads nothing").await;
    let started = Instant::now();
    for n in 0..WRITES {
        tokio::time::timeout(PATIENCE, items.create(name(&format!("n{n}"))))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "C14: a subscriber that does not read never delays a writer: create {n} of \
                     {WRITES} took longer than {PATIENCE:?}"
                )
            })
            .answer(format_args!("create n{n}"));
    }
    let took = started.elapsed();

    let mut expected = 1;
    loop {
        let next = tokio::time::timeout(PATIENCE, idle.subscription.changes.next()).await;
        match next {
            Ok(Some(Ok(change))) => {
                assert_eq!(
                    change.change.id(),
                    Id::new(expected),
                    "C14: what a late reader gets comes in order, none missed"
                );
                expected += 1;
                if expected > WRITES as i64 {
                    break;
                }
            }
            Ok(Some(Err(FeedError::TooSlow))) | Ok(None) => break,
            Ok(Some(Err(error))) => panic!("C14: the idle subscriber's stream failed: {error:?}"),
            Err(_) => panic!(
                "C14: the idle subscriber got {} of {WRITES} changes, then nothing for {PATIENCE:?} \
                 (the writes took {took:?})",
                expected - 1
            ),
        }
    }
}
