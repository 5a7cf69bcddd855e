//! The checks of reading and writing one item: `get`, `replace` and its
//! compare-and-swap (C7), `delete`, and names kept exactly (C3).

use std::sync::Arc;

use items_domain::{Id, Item, ItemRepository, Replaced};

use super::name;
use crate::answer::Answer;

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

    let replaced = items.replace(&renamed, None).await.answer("replace item 1");
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
