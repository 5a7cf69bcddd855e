//! The checks of `list`, a page of items (C10): id order, `after`, `limit`,
//! the name filter, `has_more`, and totals exact under concurrent writes.

use std::sync::Arc;

use items_domain::{Id, ItemPage, ItemQuery, ItemRepository, PageLimit};

use super::{create_all, ids, name};
use crate::answer::Answer;

fn page_query(after: Option<i64>, limit: u64) -> ItemQuery {
    ItemQuery {
        after: after.map(Id::new),
        limit: Some(PageLimit::new(limit).answer("the kit's page limit")),
        name: None,
    }
}

/// A page as `(ids, total, has_more)`, for messages that show all three.
fn summary(page: &ItemPage) -> (Vec<i64>, u64, bool) {
    (ids(&page.items), page.total, page.has_more)
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

pub async fn list_filters_by_exact_name_and_counts_all_matches_c10(items: Arc<dyn ItemRepository>) {
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
