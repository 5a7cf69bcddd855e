//! Keyed creates (C7) under the budget (C12) in the SQLite writer: a keyed
//! create is a write of the batch like any other, so one whose requester
//! gave up before the writer claimed it is never applied, and its key is
//! left free for the retry.

use std::time::SystemTime;

use items_domain::{IdempotencyKey, Keyed, Product};

use super::*;

fn key(raw: &str) -> IdempotencyKey {
    IdempotencyKey::parse(raw.as_bytes()).expect("a valid key")
}

fn price(value: f64) -> Price {
    Price::new(value).expect("a valid price")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_create_whose_budget_passed_before_the_lock_was_free_is_never_applied_and_its_key_stays_free_c7_c12()
 {
    let (file, lock) = budgeted_file_behind_a_lock().await;
    let at = SystemTime::now();

    // As for unkeyed writes: the second keyed create's batch gets the lock
    // only past its deadline, so the writer must leave it out.
    assert_first_and_late_refused(
        lock,
        {
            let items = file.store.items();
            async move { items.create_keyed(name("first"), &key("k1"), at).await }
        },
        {
            let products = file.store.products();
            async move {
                products
                    .create_keyed(name("late"), price(2.5), &key("k2"), at)
                    .await
            }
        },
    )
    .await;
    assert_eq!(
        file.store
            .items()
            .list(&Default::default())
            .await
            .unwrap()
            .total,
        0
    );
    assert_eq!(file.store.products().list().await.unwrap(), []);

    // Neither key was stored: each retry creates, under the first ids.
    let items = file.store.items();
    let item = items.create_keyed(name("first"), &key("k1"), at).await;
    let first = Item {
        id: Id::new(1),
        name: name("first"),
    };
    assert_eq!(item.unwrap(), Keyed::Created(first));
    let products = file.store.products();
    let product = products
        .create_keyed(name("late"), price(2.5), &key("k2"), at)
        .await;
    let late = Product {
        id: Id::new(1),
        name: name("late"),
        price: price(2.5),
    };
    assert_eq!(product.unwrap(), Keyed::Created(late));
    file.teardown().await;
}
