//! The checks that need a whole store ([`Repositories`]): keys of items and
//! keys of products are apart (C7).

use items_domain::{Keyed, Price, Repositories};

use super::items::keys::{key, start};
use super::name;
use crate::answer::Answer;

pub async fn keys_of_items_and_products_are_apart_c7(store: Repositories) {
    let item = store
        .items
        .create_keyed(name("pen"), &key("shared"), start())
        .await
        .answer("create the item pen under the key shared");
    assert!(
        matches!(item, Keyed::Created(_)),
        "C7: a new key creates: {item:?}"
    );
    let price = Price::new(1.5).answer("the kit's price");
    let product = store
        .products
        .create_keyed(name("pen"), price, &key("shared"), start())
        .await
        .answer("create the product pen under the same key");
    assert!(
        matches!(product, Keyed::Created(_)),
        "C7: a key of an item does not answer for a product: {product:?}"
    );
    let products = store.products.list().await.answer("list the products");
    assert_eq!(products.len(), 1, "C7: the product was created");
}
