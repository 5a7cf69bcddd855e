//! The checks of an item's id (C2): a counter from 1, never reused, never
//! handed out twice under concurrent creates.

use std::collections::HashSet;
use std::sync::Arc;

use items_domain::{Id, ItemQuery, ItemRepository};

use super::{create_all, ids, name};
use crate::answer::Answer;

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
