//! The HTTP behaviour every durable store must give, written once: the
//! PostgreSQL and SQLite tests each start a server over their store and
//! call these bodies on it (C2, C4, C7, C10).

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

/// Creates, reads, conditionally replaces and deletes items, then lists
/// them by page and by name: ids follow each other and are never reused
/// (C2, C7, C10).
pub async fn the_item_lifecycle_matches_the_spec(app: &TestApp) {
    for name in ["a", "b", "a"] {
        app.create_item(name).await;
    }
    let created = app.post_json("/items", &json!({ "name": "d" })).await;
    assert_eq!(created.status(), 201);
    assert_eq!(header(&created, "location"), "/items/4");
    assert_eq!(
        app.get("/items/2").await.json::<Value>().await.unwrap(),
        json!({ "id": 2, "name": "b" })
    );
    assert_eq!(
        app.get("/items/99").await.text().await.unwrap(),
        "Item not found"
    );

    let tag = header(&app.get("/items/2").await, "etag");
    let stale = app
        .request(Method::PUT, "/items/2")
        .header("if-match", "\"stale\"")
        .json(&json!({ "name": "x" }))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 412);
    let fresh = app
        .request(Method::PUT, "/items/2")
        .header("if-match", &tag)
        .json(&json!({ "name": "B" }))
        .send()
        .await
        .unwrap();
    assert_eq!(fresh.status(), 200);

    assert_eq!(app.delete("/items/4").await.status(), 204);
    assert_eq!(app.delete("/items/4").await.status(), 204);
    assert_eq!(app.create_item("e").await["id"], 5, "ids are never reused");

    let page = app.get("/items?limit=2&name=a").await;
    assert_eq!(header(&page, "x-total-count"), "2");
    assert_eq!(header(&page, "link"), "");
    let first = app.get("/items?limit=2").await;
    assert_eq!(
        header(&first, "link"),
        r#"</items?limit=2&after=2>; rel="next""#
    );
    assert_eq!(header(&first, "x-total-count"), "4");
}

/// A created product is listed; the seeded users are there (C4).
pub async fn products_and_users_are_served(app: &TestApp) {
    let created = app
        .post_json("/products", &json!({ "name": "pen", "price": 1.5 }))
        .await;
    assert_eq!(created.status(), 201);
    assert_eq!(
        app.get("/products").await.json::<Value>().await.unwrap(),
        json!([{ "id": 1, "name": "pen", "price": 1.5 }])
    );
    assert_eq!(
        app.get("/users").await.json::<Value>().await.unwrap(),
        json!([{ "id": 1, "name": "John Doe" }, { "id": 2, "name": "Jane Doe" }])
    );
}

/// 300 creates at once get 300 distinct ids, and all 300 are stored (C2).
pub async fn concurrent_creates_get_distinct_ids(app: &TestApp) {
    let creates: Vec<_> = (0..300)
        .map(|n| {
            let request = app
                .request(Method::POST, "/items")
                .json(&json!({ "name": format!("n{n}") }));
            tokio::spawn(async move {
                request.send().await.unwrap().json::<Value>().await.unwrap()["id"]
                    .as_i64()
                    .unwrap()
            })
        })
        .collect();
    let mut ids = std::collections::HashSet::new();
    for create in creates {
        assert!(ids.insert(create.await.unwrap()));
    }

    assert_eq!(ids.len(), 300);
    assert_eq!(app.list("/items").await.len(), 300);
}

/// The first answers of two keyed creates, to compare their repeats with.
pub struct KeyedOriginals {
    location: String,
    item: String,
    product: String,
}

/// Keyed creates of an item and a product under the same key (C7: keys of
/// items and products are apart); [`keyed_creates_are_replayed`] repeats
/// them on another process over the same store.
pub async fn keyed_creates(first: &TestApp) -> KeyedOriginals {
    let created = first
        .post_keyed("/items", "order-1", &json!({ "name": "pen" }))
        .await;
    assert_eq!(created.status(), 201);
    let location = header(&created, "location");
    let item = created.text().await.unwrap();
    let product = json!({ "name": "pen", "price": 1.5 });
    let created = first.post_keyed("/products", "order-1", &product).await;
    assert_eq!(created.status(), 201, "C7: item and product keys are apart");
    KeyedOriginals {
        location,
        item,
        product: created.text().await.unwrap(),
    }
}

/// The repeats of [`keyed_creates`] on `second` (the same store after a
/// restart, or another instance over it): the key is in the store, so a
/// repeat answers the first response and creates nothing, and another body
/// gets 422 (C7).
pub async fn keyed_creates_are_replayed(second: &TestApp, originals: &KeyedOriginals) {
    let replay = second
        .post_keyed("/items", "order-1", &json!({ "name": "pen" }))
        .await;
    assert_eq!(replay.status(), 201);
    assert_eq!(
        header(&replay, "location"),
        originals.location,
        "C7: the same Location"
    );
    assert_eq!(header(&replay, "idempotent-replayed"), "true");
    assert_eq!(
        replay.text().await.unwrap(),
        originals.item,
        "C7: the same body"
    );
    let product = json!({ "name": "pen", "price": 1.5 });
    let replay = second.post_keyed("/products", "order-1", &product).await;
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.text().await.unwrap(), originals.product);
    let other = second
        .post_keyed("/items", "order-1", &json!({ "name": "ink" }))
        .await;
    assert_problem(other, 422).await;

    let items = second.list("/items").await;
    assert_eq!(items.len(), 1, "C7: replays create nothing");
    let products = second.list("/products").await;
    assert_eq!(products.len(), 1, "C7: replays create nothing");
}
