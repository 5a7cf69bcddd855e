//! The checks of [`ProductRepository`]: counter ids (C2), prices and names
//! kept as written (C3), and idempotency keys (C7), each on a fresh, empty
//! repository.

use std::sync::Arc;
use std::time::Duration;

use items_domain::{Id, KEY_LIFETIME, Keyed, Price, Product, ProductRepository};

use super::items::keys::{key, start};
use super::name;
use crate::answer::Answer;

pub async fn products_get_counter_ids_and_keep_their_price_c2_c3(
    products: Arc<dyn ProductRepository>,
) {
    let before = products
        .list()
        .await
        .answer("list the products of a fresh store");
    assert!(
        before.is_empty(),
        "a fresh store has no products: listing them returned {before:?}"
    );
    let mut created = Vec::new();
    for (raw, price) in [("pen", 1.25), ("free", 0.0), ("big", 1e300)] {
        let price = Price::new(price).answer(format_args!("the kit's price {price}"));
        created.push(
            products
                .create(name(raw), price)
                .await
                .answer(format_args!("create the product {raw:?}")),
        );
    }

    let created_ids: Vec<Id> = created.iter().map(|product| product.id).collect();
    assert_eq!(
        created_ids,
        [Id::new(1), Id::new(2), Id::new(3)],
        "C2: product ids start at 1 and count up by one: three creates on a fresh store returned \
         ids {:?}, expected [1, 2, 3]",
        created_ids.iter().map(|id| id.get()).collect::<Vec<_>>()
    );
    let listed = products.list().await.answer("list the products");
    assert_eq!(
        listed, created,
        "C2, C3: the products are listed in id order with their names and prices as created: \
         created pen 1.25, free 0, big 1e300, listed {listed:?}"
    );
}

fn price(value: f64) -> Price {
    Price::new(value).answer(format_args!("the kit's price {value}"))
}

pub async fn a_repeated_product_key_replays_the_first_product_and_refuses_other_values_c7(
    products: Arc<dyn ProductRepository>,
) {
    let k = key("k-1");
    let first = products
        .create_keyed(name("pen"), price(1.5), &k, start())
        .await
        .answer("create pen 1.5 under k-1");
    let pen = Product {
        id: Id::new(1),
        name: name("pen"),
        price: price(1.5),
    };
    assert_eq!(
        first,
        Keyed::Created(pen.clone()),
        "C7: a new key creates the product"
    );
    let later = start() + Duration::from_secs(3600);
    let again = products
        .create_keyed(name("pen"), price(1.5), &k, later)
        .await
        .answer("repeat pen 1.5 under k-1");
    assert_eq!(
        again,
        Keyed::Replayed(pen),
        "C7: the same values replay the first product"
    );
    for (raw, value) in [("pen", 2.0), ("ink", 1.5)] {
        let other = products
            .create_keyed(name(raw), price(value), &k, later)
            .await
            .answer(format_args!("create {raw} {value} under k-1"));
        assert_eq!(
            other,
            Keyed::Mismatch,
            "C7: the same key with another name or price is refused ({raw} {value})"
        );
    }
    let listed = products.list().await.answer("list the products");
    assert_eq!(
        listed.len(),
        1,
        "C7: replays and mismatches create nothing: {listed:?}"
    );
}

pub async fn product_keys_expire_after_24_hours_c7(products: Arc<dyn ProductRepository>) {
    let k = key("k-1");
    products
        .create_keyed(name("pen"), price(1.5), &k, start())
        .await
        .answer("create pen under k-1");
    let expired = start() + KEY_LIFETIME + Duration::from_millis(1);
    let reused = products
        .create_keyed(name("ink"), price(2.0), &k, expired)
        .await
        .answer("reuse k-1 after 24 h");
    assert!(
        matches!(&reused, Keyed::Created(product) if product.id == Id::new(2)),
        "C7: after 24 hours the key is free: {reused:?}"
    );
}
