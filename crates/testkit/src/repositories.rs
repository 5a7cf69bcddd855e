//! The repository contract: one check per MUST of the ports
//! [`ItemRepository`], [`ProductRepository`] and [`UserRepository`].
//!
//! Every check takes fresh, empty [`Repositories`] (users seeded as C4 says)
//! and panics, as a failed test does, when the adapter breaks the rule named
//! in its name. Run them all with [`contract_tests!`](crate::contract_tests).
//!
//! [`ItemRepository`]: items_domain::ItemRepository
//! [`ProductRepository`]: items_domain::ProductRepository
//! [`UserRepository`]: items_domain::UserRepository

// A check fails by panicking, as a test does: `unwrap` is its assertion that
// the adapter answered.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Arc;

/// One adapter's repositories, as the checks use them (the domain's bundle).
pub use items_domain::Repositories;
use items_domain::{Id, Item, ItemQuery, Name, PageLimit, Price, Replaced};

use crate::Fixture;

/// Repositories that need nothing undone after a test (in memory).
impl Fixture for Repositories {}

/// A store under test that can hand out [`Repositories`]: what
/// `contract_tests!(repositories …)` builds once per check. Implement it
/// (and [`Fixture::teardown`]) for a store that needs setting up, such as
/// a database created for the test.
pub trait RepositoryFixture: Fixture {
    /// The store's repositories; every call shares the same data.
    fn repositories(&self) -> Repositories;
}

impl RepositoryFixture for Repositories {
    fn repositories(&self) -> Repositories {
        self.clone()
    }
}

fn name(raw: &str) -> Name {
    Name::parse(raw).unwrap()
}

fn ids(items: &[Item]) -> Vec<i64> {
    items.iter().map(|item| item.id.get()).collect()
}

async fn create_all(repositories: &Repositories, names: &[&str]) {
    for raw in names {
        repositories.items.create(name(raw)).await.unwrap();
    }
}

pub async fn ids_start_at_1_and_count_up_c2(repositories: Repositories) {
    for expected in 1..=3 {
        let item = repositories.items.create(name("x")).await.unwrap();
        assert_eq!(item.id, Id::new(expected));
        assert_eq!(item.name, name("x"));
    }
}

pub async fn ids_are_never_reused_after_a_delete_c2(repositories: Repositories) {
    create_all(&repositories, &["a", "b"]).await;
    assert!(repositories.items.delete(Id::new(2)).await.unwrap());

    let next = repositories.items.create(name("c")).await.unwrap();

    assert_eq!(next.id, Id::new(3));
}

pub async fn concurrent_creates_get_distinct_ids_and_none_is_lost_c2(repositories: Repositories) {
    let items = Arc::clone(&repositories.items);
    let creates: Vec<_> = (0..200)
        .map(|n| {
            let items = Arc::clone(&items);
            tokio::spawn(
                async move { items.create(name(&format!("n{n}"))).await.unwrap().id.get() },
            )
        })
        .collect();
    let mut seen = HashSet::new();
    for create in creates {
        assert!(
            seen.insert(create.await.unwrap()),
            "an id was handed out twice"
        );
    }

    let page = repositories
        .items
        .list(&ItemQuery::default())
        .await
        .unwrap();
    assert_eq!(page.total, 200);
    assert_eq!(ids(&page.items).into_iter().collect::<HashSet<_>>(), seen);
}

pub async fn get_returns_the_stored_item_or_none(repositories: Repositories) {
    let created = repositories.items.create(name("one")).await.unwrap();

    assert_eq!(
        repositories.items.get(created.id).await.unwrap(),
        Some(created)
    );
    assert_eq!(repositories.items.get(Id::new(99)).await.unwrap(), None);
    assert_eq!(repositories.items.get(Id::new(-1)).await.unwrap(), None);
}

pub async fn replace_without_expectation_writes_or_reports_not_found(repositories: Repositories) {
    repositories.items.create(name("old")).await.unwrap();
    let renamed = Item {
        id: Id::new(1),
        name: name("new"),
    };

    assert_eq!(
        repositories.items.replace(&renamed, None).await.unwrap(),
        Replaced::Yes
    );
    assert_eq!(
        repositories.items.get(Id::new(1)).await.unwrap(),
        Some(renamed)
    );

    let ghost = Item {
        id: Id::new(7),
        name: name("ghost"),
    };
    assert_eq!(
        repositories.items.replace(&ghost, None).await.unwrap(),
        Replaced::NotFound
    );
    assert_eq!(
        repositories.items.get(Id::new(7)).await.unwrap(),
        None,
        "replace creates nothing"
    );
}

pub async fn replace_with_expectation_is_a_compare_and_swap_c7(repositories: Repositories) {
    repositories.items.create(name("v1")).await.unwrap();
    let v2 = Item {
        id: Id::new(1),
        name: name("v2"),
    };
    let v3 = Item {
        id: Id::new(1),
        name: name("v3"),
    };

    assert_eq!(
        repositories
            .items
            .replace(&v2, Some(name("v1")))
            .await
            .unwrap(),
        Replaced::Yes
    );
    assert_eq!(
        repositories
            .items
            .replace(&v3, Some(name("v1")))
            .await
            .unwrap(),
        Replaced::Changed
    );
    assert_eq!(
        repositories.items.get(Id::new(1)).await.unwrap(),
        Some(v2),
        "a failed swap changes nothing"
    );

    let ghost = Item {
        id: Id::new(5),
        name: name("x"),
    };
    assert_eq!(
        repositories
            .items
            .replace(&ghost, Some(name("x")))
            .await
            .unwrap(),
        Replaced::NotFound
    );
}

pub async fn delete_reports_whether_the_item_existed(repositories: Repositories) {
    repositories.items.create(name("a")).await.unwrap();

    assert!(repositories.items.delete(Id::new(1)).await.unwrap());
    assert!(!repositories.items.delete(Id::new(1)).await.unwrap());
    assert!(!repositories.items.delete(Id::new(i64::MAX)).await.unwrap());
    assert_eq!(repositories.items.get(Id::new(1)).await.unwrap(), None);
}

pub async fn list_returns_everything_in_id_order_with_the_total_c10(repositories: Repositories) {
    let empty = repositories
        .items
        .list(&ItemQuery::default())
        .await
        .unwrap();
    assert_eq!(
        (empty.items.len(), empty.total, empty.has_more),
        (0, 0, false)
    );
    create_all(&repositories, &["c", "a", "b"]).await;
    repositories.items.delete(Id::new(2)).await.unwrap();

    let page = repositories
        .items
        .list(&ItemQuery::default())
        .await
        .unwrap();

    assert_eq!(ids(&page.items), [1, 3]);
    assert_eq!(page.items[1].name, name("b"));
    assert_eq!((page.total, page.has_more), (2, false));
}

pub async fn list_pages_with_after_and_limit_and_says_when_more_follow_c10(
    repositories: Repositories,
) {
    create_all(&repositories, &["a", "b", "c", "d", "e"]).await;
    let query = |after: Option<i64>, limit: u64| ItemQuery {
        after: after.map(Id::new),
        limit: Some(PageLimit::new(limit).unwrap()),
        name: None,
    };

    let first = repositories.items.list(&query(None, 2)).await.unwrap();
    let middle = repositories.items.list(&query(Some(2), 2)).await.unwrap();
    let last = repositories.items.list(&query(Some(4), 2)).await.unwrap();
    let exact = repositories.items.list(&query(Some(3), 2)).await.unwrap();
    let beyond = repositories.items.list(&query(Some(5), 2)).await.unwrap();
    let before_all = repositories
        .items
        .list(&query(Some(i64::MIN), 1000))
        .await
        .unwrap();

    assert_eq!(
        (ids(&first.items), first.has_more, first.total),
        (vec![1, 2], true, 5)
    );
    assert_eq!((ids(&middle.items), middle.has_more), (vec![3, 4], true));
    assert_eq!(
        (ids(&last.items), last.has_more, last.total),
        (vec![5], false, 5)
    );
    assert_eq!((ids(&exact.items), exact.has_more), (vec![4, 5], false));
    assert_eq!((ids(&beyond.items), beyond.has_more), (vec![], false));
    assert_eq!(ids(&before_all.items), [1, 2, 3, 4, 5]);
}

pub async fn list_filters_by_exact_name_and_counts_all_matches_c10(repositories: Repositories) {
    create_all(&repositories, &["x", "y", "x", "X", "x ", "x"]).await;
    let query = ItemQuery {
        after: Some(Id::new(1)),
        limit: Some(PageLimit::new(1).unwrap()),
        name: Some(name("x")),
    };

    let page = repositories.items.list(&query).await.unwrap();

    assert_eq!(ids(&page.items), [3]);
    assert_eq!(page.total, 3, "counts matches before `after` too");
    assert!(page.has_more);
    let none = ItemQuery {
        name: Some(name("absent")),
        ..ItemQuery::default()
    };
    let page = repositories.items.list(&none).await.unwrap();
    assert_eq!((page.items.len(), page.total, page.has_more), (0, 0, false));
}

pub async fn names_are_stored_exactly_c3(repositories: Repositories) {
    let long = "é".repeat(256);
    for raw in [
        "  spaced  ",
        "😀 emoji",
        "quote ' and \" and \\",
        long.as_str(),
        "<script>",
    ] {
        let created = repositories.items.create(name(raw)).await.unwrap();
        let read = repositories.items.get(created.id).await.unwrap().unwrap();
        assert_eq!(read.name.as_str(), raw);
    }
}

pub async fn products_get_counter_ids_and_keep_their_price_c2_c3(repositories: Repositories) {
    assert!(repositories.products.list().await.unwrap().is_empty());
    let pen = repositories
        .products
        .create(name("pen"), Price::new(1.25).unwrap())
        .await
        .unwrap();
    let free = repositories
        .products
        .create(name("free"), Price::new(0.0).unwrap())
        .await
        .unwrap();
    let big = repositories
        .products
        .create(name("big"), Price::new(1e300).unwrap())
        .await
        .unwrap();

    assert_eq!(
        [pen.id, free.id, big.id],
        [Id::new(1), Id::new(2), Id::new(3)]
    );
    let listed = repositories.products.list().await.unwrap();
    assert_eq!(listed, vec![pen, free, big]);
}

pub async fn users_are_the_two_seeded_users_c4(repositories: Repositories) {
    let users = repositories.users.list().await.unwrap();
    let pairs: Vec<(i64, &str)> = users
        .iter()
        .map(|user| (user.id.get(), user.name.as_str()))
        .collect();
    assert_eq!(pairs, [(1, "John Doe"), (2, "Jane Doe")]);
}

/// Twenty tasks create 300 items, then twenty delete every third of them
/// while twenty more create 300: 500 remain, and the total (on a page and on the whole listing) is exactly what is
/// stored. Over PostgreSQL the writers use many connections, so they land on
/// different slots of the tally (C10).
pub async fn totals_stay_exact_under_concurrent_creates_and_deletes_c10(
    repositories: Repositories,
) {
    let items = Arc::clone(&repositories.items);
    let create_batch = |tag: &'static str| {
        let items = Arc::clone(&items);
        tokio::spawn(async move {
            for n in 0..15 {
                items.create(name(&format!("{tag}{n}"))).await.unwrap();
            }
        })
    };
    let first: Vec<_> = (0..20).map(|_| create_batch("a")).collect();
    for task in first {
        task.await.unwrap();
    }
    let mut writers: Vec<_> = (0..20)
        .map(|task| {
            let items = Arc::clone(&items);
            tokio::spawn(async move {
                for id in (1..=300).filter(|id| id % 3 == 0 && id % 20 == task) {
                    assert!(items.delete(Id::new(id)).await.unwrap());
                }
            })
        })
        .collect();
    writers.extend((0..20).map(|_| create_batch("b")));
    for task in writers {
        task.await.unwrap();
    }

    let everything = items.list(&ItemQuery::default()).await.unwrap();
    assert_eq!(everything.items.len(), 500);
    assert_eq!(everything.total, 500);
    let page = items
        .list(&ItemQuery {
            limit: Some(PageLimit::new(1).unwrap()),
            ..ItemQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.total, 500);
}

/// Reads a whole listing: its version and items.
async fn full_listing(repositories: &Repositories) -> (u64, Vec<Item>) {
    use futures_util::TryStreamExt;
    let listing = repositories.items.list_all().await.unwrap();
    let batches: Vec<Vec<Item>> = listing.batches.try_collect().await.unwrap();
    (listing.version, batches.concat())
}

/// Create, replace and delete each change the version; reads do not; a
/// failed replace or delete (nothing written) does not (C7, C10).
pub async fn every_write_changes_the_listing_version_c7_c10(repositories: Repositories) {
    let (empty, items) = full_listing(&repositories).await;
    assert!(items.is_empty());
    create_all(&repositories, &["a", "b"]).await;
    let (created, items) = full_listing(&repositories).await;
    assert_ne!(created, empty);
    assert_eq!(ids(&items), [1, 2]);
    assert_eq!(
        full_listing(&repositories).await.0,
        created,
        "a read is no write"
    );

    let renamed = Item {
        id: Id::new(1),
        name: name("z"),
    };
    assert_eq!(
        repositories.items.replace(&renamed, None).await.unwrap(),
        Replaced::Yes
    );
    let (replaced, items) = full_listing(&repositories).await;
    assert_ne!(replaced, created);
    assert_eq!(items[0].name, name("z"));

    assert!(repositories.items.delete(Id::new(2)).await.unwrap());
    let (deleted, items) = full_listing(&repositories).await;
    assert_ne!(deleted, replaced);
    assert_eq!(ids(&items), [1]);

    assert!(!repositories.items.delete(Id::new(2)).await.unwrap());
    assert_eq!(full_listing(&repositories).await.0, deleted);
}

/// A listing larger than one batch comes out whole, in id order, with its
/// total (C10).
pub async fn the_full_listing_streams_every_item_in_id_order_c10(repositories: Repositories) {
    let names: Vec<String> = (0..2500).map(|n| format!("n{n}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    create_all(&repositories, &names).await;
    let listing = repositories.items.list_all().await.unwrap();
    assert_eq!(listing.total, 2500);

    let (_, items) = full_listing(&repositories).await;

    assert_eq!(ids(&items), (1..=2500).collect::<Vec<_>>());
}

/// A listing serves the collection as it was when it began: a create, a
/// replace and a delete landing mid-stream neither show up in it nor end it,
/// so the bytes are exactly those its version's tag vouches for, under
/// steady writes too (C7, C10).
pub async fn a_write_during_a_listing_never_mixes_into_it_c7_c10(repositories: Repositories) {
    use futures_util::TryStreamExt;
    let names: Vec<String> = (1..=1500).map(|n| format!("n{n}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    create_all(&repositories, &names).await;
    let mut listing = repositories.items.list_all().await.unwrap();
    let mut seen = listing.batches.try_next().await.unwrap().unwrap();
    assert!(seen.len() < 1500, "the listing is still streaming");

    let items = &repositories.items;
    items.create(name("late")).await.unwrap();
    let renamed = Item {
        id: Id::new(1200),
        name: name("renamed"),
    };
    assert_eq!(items.replace(&renamed, None).await.unwrap(), Replaced::Yes);
    assert!(items.delete(Id::new(1300)).await.unwrap());
    while let Some(batch) = listing.batches.try_next().await.unwrap() {
        seen.extend(batch);
    }

    assert_eq!(listing.total, 1500);
    assert_eq!(ids(&seen), (1..=1500).collect::<Vec<_>>());
    let seen_names: Vec<&str> = seen.iter().map(|item| item.name.as_str()).collect();
    assert_eq!(seen_names, names);
}
