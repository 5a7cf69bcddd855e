//! The check of [`ProductRepository`]: counter ids (C2) and prices and names
//! kept as written (C3), on a fresh, empty repository.

use std::sync::Arc;

use items_domain::{Id, Price, ProductRepository};

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
