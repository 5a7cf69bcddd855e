//! The checks of [`ItemRepository`]: ids (C2), reads, writes and the
//! compare-and-swap (C7), names kept exactly (C3), pages and totals (C10),
//! and the full listing's version and snapshot (C7, C10). Each takes a
//! fresh, empty repository.

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::TryStreamExt;
use items_domain::{Id, Item, ItemPage, ItemQuery, ItemRepository, PageLimit, Replaced};

use super::name;
use crate::answer::Answer;

fn ids(items: &[Item]) -> Vec<i64> {
    items.iter().map(|item| item.id.get()).collect()
}

/// A page as `(ids, total, has_more)`, for messages that show all three.
fn summary(page: &ItemPage) -> (Vec<i64>, u64, bool) {
    (ids(&page.items), page.total, page.has_more)
}

async fn create_all(items: &dyn ItemRepository, names: &[&str]) {
    for raw in names {
        items
            .create(name(raw))
            .await
            .answer(format_args!("create an item named {raw:?}"));
    }
}

fn page_query(after: Option<i64>, limit: u64) -> ItemQuery {
    ItemQuery {
        after: after.map(Id::new),
        limit: Some(PageLimit::new(limit).answer("the kit's page limit")),
        name: None,
    }
}

pub async fn ids_start_at_1_and_count_up_c2(items: Arc<dyn ItemRepository>) {
    for expected in 1..=3 {
        let item = items.create(name("x")).await.answer("create an item");
        assert_eq!(
            item.id,
            Id::new(expected),
            "C2: ids start at 1 and count up by one: create number {expected} on an empty store \
             returned id {}, expected {expected}",
            item.id.get()
        );
        assert_eq!(
            item.name,
            name("x"),
            "create returns the item as stored: created \"x\", got back {:?}",
            item.name.as_str()
        );
    }
}

pub async fn ids_are_never_reused_after_a_delete_c2(items: Arc<dyn ItemRepository>) {
    create_all(&*items, &["a", "b"]).await;
    let deleted = items.delete(Id::new(2)).await.answer("delete item 2");
    assert!(
        deleted,
        "delete reports whether the item existed: created items 1 and 2, deleting 2 returned false"
    );

    let next = items.create(name("c")).await.answer("create a third item");

    assert_eq!(
        next.id,
        Id::new(3),
        "C2: an id is never handed out twice, not even after a delete: created 1 and 2, deleted 2, \
         the next create got id {}, expected 3",
        next.id.get()
    );
}

pub async fn concurrent_creates_get_distinct_ids_and_none_is_lost_c2(
    items: Arc<dyn ItemRepository>,
) {
    let creates: Vec<_> = (0..200)
        .map(|n| {
            let items = Arc::clone(&items);
            tokio::spawn(async move {
                items
                    .create(name(&format!("n{n}")))
                    .await
                    .answer(format_args!("create item n{n} concurrently"))
                    .id
                    .get()
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for create in creates {
        let id = create.await.answer("join a creating task");
        assert!(
            seen.insert(id),
            "C2: concurrent creates get distinct ids: 200 concurrent creates handed out id {id} twice"
        );
    }

    let page = items
        .list(&ItemQuery::default())
        .await
        .answer("list every item");
    assert_eq!(
        page.total, 200,
        "C2: no concurrent create is lost: after 200 concurrent creates the total was {}, expected 200",
        page.total
    );
    let listed: HashSet<i64> = ids(&page.items).into_iter().collect();
    assert_eq!(
        listed,
        seen,
        "C2: the listing holds exactly the created items: after 200 concurrent creates it held {} \
         ids, of which {} were never returned by a create",
        listed.len(),
        listed.difference(&seen).count()
    );
}

pub async fn get_returns_the_stored_item_or_none(items: Arc<dyn ItemRepository>) {
    let created = items.create(name("one")).await.answer("create an item");

    let read = items.get(created.id).await.answer("get the created item");
    assert_eq!(
        read,
        Some(created.clone()),
        "get returns the stored item: created {created:?}, get returned {read:?}"
    );
    for absent in [99, -1] {
        let read = items
            .get(Id::new(absent))
            .await
            .answer(format_args!("get the absent id {absent}"));
        assert_eq!(
            read, None,
            "get returns None for an unknown id: with only item 1 stored, get({absent}) returned {read:?}"
        );
    }
}

pub async fn replace_without_expectation_writes_or_reports_not_found(
    items: Arc<dyn ItemRepository>,
) {
    items.create(name("old")).await.answer("create an item");
    let renamed = Item {
        id: Id::new(1),
        name: name("new"),
    };

    let replaced = items
        .replace(&renamed, None)
        .await
        .answer("replace item 1");
    assert_eq!(
        replaced,
        Replaced::Yes,
        "replace without an expected name writes: renaming the stored item 1 to \"new\" returned \
         {replaced:?}, expected Yes"
    );
    let read = items.get(Id::new(1)).await.answer("get item 1");
    assert_eq!(
        read,
        Some(renamed),
        "replace writes the new name: after renaming item 1 to \"new\", get returned {read:?}"
    );

    let ghost = Item {
        id: Id::new(7),
        name: name("ghost"),
    };
    let replaced = items
        .replace(&ghost, None)
        .await
        .answer("replace the unknown item 7");
    assert_eq!(
        replaced,
        Replaced::NotFound,
        "replace of an unknown id reports it: replacing item 7 (never created) returned \
         {replaced:?}, expected NotFound"
    );
    let read = items.get(Id::new(7)).await.answer("get item 7");
    assert_eq!(
        read, None,
        "replace creates nothing: after replacing the unknown item 7, get(7) returned {read:?}"
    );
}

pub async fn replace_with_expectation_is_a_compare_and_swap_c7(items: Arc<dyn ItemRepository>) {
    items.create(name("v1")).await.answer("create an item");
    let v2 = Item {
        id: Id::new(1),
        name: name("v2"),
    };
    let v3 = Item {
        id: Id::new(1),
        name: name("v3"),
    };

    let swapped = items
        .replace(&v2, Some(name("v1")))
        .await
        .answer("replace item 1 expecting \"v1\"");
    assert_eq!(
        swapped,
        Replaced::Yes,
        "C7: a compare-and-swap with the current name writes: renaming item 1 from \"v1\" to \
         \"v2\" expecting \"v1\" returned {swapped:?}, expected Yes"
    );
    let stale = items
        .replace(&v3, Some(name("v1")))
        .await
        .answer("replace item 1 expecting the stale \"v1\"");
    assert_eq!(
        stale,
        Replaced::Changed,
        "C7: a compare-and-swap with a stale name writes nothing: item 1 is \"v2\", renaming it \
         to \"v3\" expecting \"v1\" returned {stale:?}, expected Changed"
    );
    let read = items.get(Id::new(1)).await.answer("get item 1");
    assert_eq!(
        read,
        Some(v2),
        "C7: a failed swap changes nothing: after a stale swap to \"v3\", item 1 should still be \
         \"v2\", get returned {read:?}"
    );

    let ghost = Item {
        id: Id::new(5),
        name: name("x"),
    };
    let missing = items
        .replace(&ghost, Some(name("x")))
        .await
        .answer("replace the unknown item 5 expecting \"x\"");
    assert_eq!(
        missing,
        Replaced::NotFound,
        "a compare-and-swap on an unknown id reports it: replacing item 5 (never created) \
         expecting \"x\" returned {missing:?}, expected NotFound"
    );
}

pub async fn delete_reports_whether_the_item_existed(items: Arc<dyn ItemRepository>) {
    items.create(name("a")).await.answer("create an item");

    let first = items.delete(Id::new(1)).await.answer("delete item 1");
    assert!(
        first,
        "delete reports an existing item: deleting the stored item 1 returned false"
    );
    let again = items.delete(Id::new(1)).await.answer("delete item 1 again");
    assert!(
        !again,
        "delete reports a missing item: deleting item 1 a second time returned true"
    );
    let never = items
        .delete(Id::new(i64::MAX))
        .await
        .answer("delete the unknown id i64::MAX");
    assert!(
        !never,
        "delete reports a missing item: deleting id {} (never created) returned true",
        i64::MAX
    );
    let read = items.get(Id::new(1)).await.answer("get the deleted item 1");
    assert_eq!(
        read, None,
        "a deleted item is gone: after deleting item 1, get(1) returned {read:?}"
    );
}

pub async fn list_returns_everything_in_id_order_with_the_total_c10(
    items: Arc<dyn ItemRepository>,
) {
    let empty = items
        .list(&ItemQuery::default())
        .await
        .answer("list an empty store");
    assert_eq!(
        (empty.items.len(), empty.total, empty.has_more),
        (0, 0, false),
        "C10: an empty store lists nothing: (items, total, has_more) came back as {:?}, expected \
         (0, 0, false)",
        (empty.items.len(), empty.total, empty.has_more)
    );
    create_all(&*items, &["c", "a", "b"]).await;
    items.delete(Id::new(2)).await.answer("delete item 2");

    let page = items
        .list(&ItemQuery::default())
        .await
        .answer("list every item");

    assert_eq!(
        ids(&page.items),
        [1, 3],
        "C10: a listing holds every item in id order: after creating 1, 2, 3 and deleting 2, the \
         ids were {:?}, expected [1, 3]",
        ids(&page.items)
    );
    assert_eq!(
        page.items[1].name,
        name("b"),
        "a listing holds each item's name: item 3 was created as \"b\", listed as {:?}",
        page.items[1].name.as_str()
    );
    assert_eq!(
        (page.total, page.has_more),
        (2, false),
        "C10: the total counts every item and nothing more follows a full listing: with items 1 \
         and 3 stored, (total, has_more) came back as {:?}, expected (2, false)",
        (page.total, page.has_more)
    );
}

pub async fn list_pages_with_after_and_limit_and_says_when_more_follow_c10(
    items: Arc<dyn ItemRepository>,
) {
    create_all(&*items, &["a", "b", "c", "d", "e"]).await;

    let first = items.list(&page_query(None, 2)).await.answer("list 2");
    let middle = items
        .list(&page_query(Some(2), 2))
        .await
        .answer("list 2 after 2");
    let last = items
        .list(&page_query(Some(4), 2))
        .await
        .answer("list 2 after 4");
    let exact = items
        .list(&page_query(Some(3), 2))
        .await
        .answer("list 2 after 3");
    let beyond = items
        .list(&page_query(Some(5), 2))
        .await
        .answer("list 2 after 5");
    let before_all = items
        .list(&page_query(Some(i64::MIN), 1000))
        .await
        .answer("list 1000 after i64::MIN");

    let rule = "C10: a page holds at most `limit` items with ids above `after`, `has_more` says \
                whether a match follows it and `total` counts every match";
    assert_eq!(
        (ids(&first.items), first.has_more, first.total),
        (vec![1, 2], true, 5),
        "{rule}: with items 1 to 5, limit 2 gave (ids, has_more, total) = {:?}, expected ([1, 2], \
         true, 5)",
        (ids(&first.items), first.has_more, first.total)
    );
    assert_eq!(
        (ids(&middle.items), middle.has_more),
        (vec![3, 4], true),
        "{rule}: with items 1 to 5, after 2 limit 2 gave (ids, total, has_more) = {:?}, expected \
         ids [3, 4] and has_more true",
        summary(&middle)
    );
    assert_eq!(
        (ids(&last.items), last.has_more, last.total),
        (vec![5], false, 5),
        "{rule}: with items 1 to 5, after 4 limit 2 gave (ids, has_more, total) = {:?}, expected \
         ([5], false, 5)",
        (ids(&last.items), last.has_more, last.total)
    );
    assert_eq!(
        (ids(&exact.items), exact.has_more),
        (vec![4, 5], false),
        "{rule}: with items 1 to 5, after 3 limit 2 (a page that ends exactly at the last item) \
         gave (ids, total, has_more) = {:?}, expected ids [4, 5] and has_more false",
        summary(&exact)
    );
    assert_eq!(
        (ids(&beyond.items), beyond.has_more),
        (vec![], false),
        "{rule}: with items 1 to 5, after 5 limit 2 gave (ids, total, has_more) = {:?}, expected \
         no ids and has_more false",
        summary(&beyond)
    );
    assert_eq!(
        ids(&before_all.items),
        [1, 2, 3, 4, 5],
        "{rule}: with items 1 to 5, after i64::MIN limit 1000 gave ids {:?}, expected [1, 2, 3, \
         4, 5]",
        ids(&before_all.items)
    );
}

pub async fn list_filters_by_exact_name_and_counts_all_matches_c10(
    items: Arc<dyn ItemRepository>,
) {
    create_all(&*items, &["x", "y", "x", "X", "x ", "x"]).await;
    let query = ItemQuery {
        after: Some(Id::new(1)),
        limit: Some(PageLimit::new(1).answer("the kit's page limit")),
        name: Some(name("x")),
    };

    let page = items
        .list(&query)
        .await
        .answer("list the items named \"x\"");

    let stored = "with items 1 \"x\", 2 \"y\", 3 \"x\", 4 \"X\", 5 \"x \", 6 \"x\"";
    assert_eq!(
        ids(&page.items),
        [3],
        "C10: the name filter matches exactly: {stored}, name \"x\" after 1 limit 1 gave ids \
         {:?}, expected [3]",
        ids(&page.items)
    );
    assert_eq!(
        page.total, 3,
        "C10: the total counts every match, those before `after` too: {stored}, name \"x\" \
         after 1 limit 1 gave total {}, expected 3",
        page.total
    );
    assert!(
        page.has_more,
        "C10: `has_more` says a match follows the page: {stored}, name \"x\" after 1 limit 1 \
         (item 6 follows) gave has_more false"
    );
    let none = ItemQuery {
        name: Some(name("absent")),
        ..ItemQuery::default()
    };
    let page = items
        .list(&none)
        .await
        .answer("list the items named \"absent\"");
    assert_eq!(
        (page.items.len(), page.total, page.has_more),
        (0, 0, false),
        "C10: a name nothing has matches nothing: {stored}, name \"absent\" gave (items, total, \
         has_more) = {:?}, expected (0, 0, false)",
        (page.items.len(), page.total, page.has_more)
    );
}

pub async fn names_are_stored_exactly_c3(items: Arc<dyn ItemRepository>) {
    let long = "é".repeat(256);
    for raw in [
        "  spaced  ",
        "😀 emoji",
        "quote ' and \" and \\",
        long.as_str(),
        "<script>",
    ] {
        let created = items
            .create(name(raw))
            .await
            .answer(format_args!("create an item named {raw:?}"));
        let read = items
            .get(created.id)
            .await
            .answer(format_args!("get the item named {raw:?}"))
            .unwrap_or_else(|| {
                panic!(
                    "get returns the stored item: item {} (named {raw:?}) was created, get \
                     returned None",
                    created.id.get()
                )
            });
        assert_eq!(
            read.name.as_str(),
            raw,
            "C3: a name is stored exactly as sent, spaces and every character kept: created \
             {raw:?}, read back {:?}",
            read.name.as_str()
        );
    }
}

/// Twenty tasks create 300 items, then twenty delete every third of them
/// while twenty more create 300: 500 remain, and the total (on a page and
/// on the whole listing) is exactly what is stored. Over PostgreSQL the
/// writers use many connections, so they land on different slots of the
/// tally (C10).
pub async fn totals_stay_exact_under_concurrent_creates_and_deletes_c10(
    items: Arc<dyn ItemRepository>,
) {
    let create_batch = |tag: &'static str| {
        let items = Arc::clone(&items);
        tokio::spawn(async move {
            for n in 0..15 {
                items
                    .create(name(&format!("{tag}{n}")))
                    .await
                    .answer(format_args!("create item {tag}{n} concurrently"));
            }
        })
    };
    let first: Vec<_> = (0..20).map(|_| create_batch("a")).collect();
    for task in first {
        task.await.answer("join a creating task");
    }
    let mut writers: Vec<_> = (0..20)
        .map(|task| {
            let items = Arc::clone(&items);
            tokio::spawn(async move {
                for id in (1..=300).filter(|id| id % 3 == 0 && id % 20 == task) {
                    let deleted = items
                        .delete(Id::new(id))
                        .await
                        .answer(format_args!("delete item {id} concurrently"));
                    assert!(
                        deleted,
                        "delete reports an existing item: deleting item {id} (created, deleted \
                         by no other task) during concurrent creates returned false"
                    );
                }
            })
        })
        .collect();
    writers.extend((0..20).map(|_| create_batch("b")));
    for task in writers {
        task.await.answer("join a writing task");
    }

    let done = "after creating 300 items, then deleting 100 of them while creating 300 more, \
                from 20 tasks each";
    let everything = items
        .list(&ItemQuery::default())
        .await
        .answer("list every item");
    assert_eq!(
        everything.items.len(),
        500,
        "C10: no write is lost under concurrency: {done}, the listing held {} items, expected 500",
        everything.items.len()
    );
    assert_eq!(
        everything.total, 500,
        "C10: the total is exact under concurrent writes: {done}, the full page's total was {}, \
         expected 500",
        everything.total
    );
    let page = items
        .list(&ItemQuery {
            limit: Some(PageLimit::new(1).answer("the kit's page limit")),
            ..ItemQuery::default()
        })
        .await
        .answer("list one item");
    assert_eq!(
        page.total, 500,
        "C10: the total is exact under concurrent writes: {done}, a page of 1 said total {}, \
         expected 500",
        page.total
    );
}

/// Reads a whole listing: its version and items.
async fn full_listing(items: &dyn ItemRepository) -> (u64, Vec<Item>) {
    let listing = items.list_all().await.answer("open the full listing");
    let batches: Vec<Vec<Item>> = listing
        .batches
        .try_collect()
        .await
        .answer("read the full listing to its end");
    (listing.version, batches.concat())
}

/// Create, replace and delete each change the version; reads do not; a
/// failed replace or delete (nothing written) does not (C7, C10).
pub async fn every_write_changes_the_listing_version_c7_c10(items: Arc<dyn ItemRepository>) {
    let rule = "C7: the listing version changes on every write and on nothing else";
    let (empty, listed) = full_listing(&*items).await;
    assert!(
        listed.is_empty(),
        "C10: an empty store lists nothing: the full listing held ids {:?}",
        ids(&listed)
    );
    create_all(&*items, &["a", "b"]).await;
    let (created, listed) = full_listing(&*items).await;
    assert_ne!(
        created, empty,
        "{rule}: after creating items 1 and 2 the version was still {created}"
    );
    assert_eq!(
        ids(&listed),
        [1, 2],
        "C10: the full listing holds every item in id order: after creating 1 and 2 it held ids \
         {:?}",
        ids(&listed)
    );
    let reread = full_listing(&*items).await.0;
    assert_eq!(
        reread, created,
        "{rule}: a read is no write: listing twice with no write between gave version {created}, \
         then {reread}"
    );

    let renamed = Item {
        id: Id::new(1),
        name: name("z"),
    };
    let replaced = items
        .replace(&renamed, None)
        .await
        .answer("rename item 1 to \"z\"");
    assert_eq!(
        replaced,
        Replaced::Yes,
        "replace without an expected name writes: renaming the stored item 1 to \"z\" returned \
         {replaced:?}, expected Yes"
    );
    let (after_replace, listed) = full_listing(&*items).await;
    assert_ne!(
        after_replace, created,
        "{rule}: after renaming item 1 the version was still {after_replace}"
    );
    assert_eq!(
        listed[0].name,
        name("z"),
        "the full listing shows the current names: after renaming item 1 to \"z\" it listed {:?}",
        listed[0].name.as_str()
    );

    let deleted = items.delete(Id::new(2)).await.answer("delete item 2");
    assert!(
        deleted,
        "delete reports an existing item: deleting the stored item 2 returned false"
    );
    let (after_delete, listed) = full_listing(&*items).await;
    assert_ne!(
        after_delete, after_replace,
        "{rule}: after deleting item 2 the version was still {after_delete}"
    );
    assert_eq!(
        ids(&listed),
        [1],
        "C10: the full listing holds what is stored: after deleting item 2 of 1 and 2 it held ids \
         {:?}, expected [1]",
        ids(&listed)
    );

    let deleted_again = items.delete(Id::new(2)).await.answer("delete item 2 again");
    assert!(
        !deleted_again,
        "delete reports a missing item: deleting item 2 a second time returned true"
    );
    let after_missing = full_listing(&*items).await.0;
    assert_eq!(
        after_missing, after_delete,
        "{rule}: deleting a missing id writes nothing: deleting item 2 a second time changed the \
         version from {after_delete} to {after_missing}"
    );
}

/// A listing larger than one batch comes out whole, in id order, with its
/// total (C10).
pub async fn the_full_listing_streams_every_item_in_id_order_c10(items: Arc<dyn ItemRepository>) {
    let names: Vec<String> = (0..2500).map(|n| format!("n{n}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    create_all(&*items, &names).await;
    let listing = items.list_all().await.answer("open the full listing");
    assert_eq!(
        listing.total, 2500,
        "C10: the full listing's total counts every item: after creating 2,500 items it said {}",
        listing.total
    );

    let (_, listed) = full_listing(&*items).await;

    let listed = ids(&listed);
    assert_eq!(
        listed,
        (1..=2500).collect::<Vec<_>>(),
        "C10: the full listing streams every item once, in id order: after creating items 1 to \
         2,500 it held {} ids, first {:?}, last {:?}",
        listed.len(),
        listed.first(),
        listed.last()
    );
}

/// A listing serves the collection as it was when it began: a create, a
/// replace and a delete landing mid-stream neither show up in it nor end it,
/// so the bytes are exactly those its version's tag vouches for, under
/// steady writes too (C7, C10).
pub async fn a_write_during_a_listing_never_mixes_into_it_c7_c10(items: Arc<dyn ItemRepository>) {
    let names: Vec<String> = (1..=1500).map(|n| format!("n{n}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    create_all(&*items, &names).await;
    let mut listing = items.list_all().await.answer("open the full listing");
    let mut seen = listing
        .batches
        .try_next()
        .await
        .answer("read the listing's first batch")
        .unwrap_or_else(|| {
            panic!("C10: a listing of 1,500 items yields a batch: its stream ended at once")
        });
    assert!(
        seen.len() < 1500,
        "C10: the full listing comes in batches: its first batch held all {} of 1,500 items, so \
         this check cannot write while it streams",
        seen.len()
    );

    items.create(name("late")).await.answer("create an item mid-listing");
    let renamed = Item {
        id: Id::new(1200),
        name: name("renamed"),
    };
    let replaced = items
        .replace(&renamed, None)
        .await
        .answer("rename item 1200 mid-listing");
    assert_eq!(
        replaced,
        Replaced::Yes,
        "replace without an expected name writes: renaming the stored item 1200 mid-listing \
         returned {replaced:?}, expected Yes"
    );
    let deleted = items
        .delete(Id::new(1300))
        .await
        .answer("delete item 1300 mid-listing");
    assert!(
        deleted,
        "delete reports an existing item: deleting the stored item 1300 mid-listing returned false"
    );
    while let Some(batch) = listing
        .batches
        .try_next()
        .await
        .answer("C7, C10: a write during a listing never ends it: read the rest of the listing after a create, a rename and a delete")
    {
        seen.extend(batch);
    }

    let done = "a listing of items 1 to 1,500 was opened, then item 1501 was created, item 1200 \
                renamed and item 1300 deleted before the rest was read";
    assert_eq!(
        listing.total, 1500,
        "C10: the listing's total is that of its snapshot: {done}; its total was {}, expected 1500",
        listing.total
    );
    let seen_ids = ids(&seen);
    assert_eq!(
        seen_ids,
        (1..=1500).collect::<Vec<_>>(),
        "C7, C10: a write during a listing never mixes into it: {done}; it held {} ids (1300 \
         listed: {}, 1501 listed: {})",
        seen_ids.len(),
        seen_ids.contains(&1300),
        seen_ids.contains(&1501)
    );
    let seen_names: Vec<&str> = seen.iter().map(|item| item.name.as_str()).collect();
    assert_eq!(
        seen_names,
        names,
        "C7, C10: a write during a listing never mixes into it: {done}; item 1200 was listed as \
         {:?}, expected \"n1200\"",
        seen_names.get(1199)
    );
}
