//! The checks of `list_all`, the full listing (C7, C10): its version
//! changes on every write and on nothing else, it streams every item in id
//! order, and a write while it streams never mixes into it.

use std::sync::Arc;

use futures_util::TryStreamExt;
use items_domain::{Id, Item, ItemRepository, Replaced};

use super::{create_all, ids, name};
use crate::answer::Answer;

/// Reads a whole listing: its version and items. Its head, read just
/// before with nothing written between, must be the listing's (C7: what a
/// `HEAD` of the listing is told).
async fn full_listing(items: &dyn ItemRepository) -> (u64, Vec<Item>) {
    let head = items
        .listing_head()
        .await
        .answer("read the full listing's version and total");
    let listing = items.list_all().await.answer("open the full listing");
    assert_eq!(
        (head.version, head.total),
        (listing.version, listing.total),
        "C7: listing_head gives the version and total of a listing taken at that moment: it \
         gave (version, total) {:?}, the listing opened right after, with no write between, {:?}",
        (head.version, head.total),
        (listing.version, listing.total)
    );
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
    // Dropped before the next listing opens: a store may let only so many
    // listings read at once (`ItemRepository::list_all`).
    let total = items.list_all().await.answer("open the full listing").total;
    assert_eq!(
        total, 2500,
        "C10: the full listing's total counts every item: after creating 2,500 items it said \
         {total}"
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

    items
        .create(name("late"))
        .await
        .answer("create an item mid-listing");
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
