//! Listing items at scale: contract C10.

use items_adapters::memory::{
    InMemoryItemRepository, InMemoryProductRepository, InMemoryUserRepository,
};
use items_domain::{ItemRepository, Name};
use items_testkit::Repositories;
use serde_json::Value;

use crate::support::*;

async fn app_with_items(names: &[&str]) -> TestApp {
    let app = TestApp::in_memory().await;
    for name in names {
        app.create_item(name).await;
    }
    app
}

fn ids(body: &Value) -> Vec<i64> {
    body.as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn limit_and_after_page_through_items_in_id_order_with_a_next_link_c10() {
    let app = app_with_items(&["a", "b", "c", "d", "e"]).await;

    let first = app.get("/items?limit=2").await;
    assert_eq!(first.status(), 200);
    assert_eq!(header(&first, "x-total-count"), "5");
    assert_eq!(
        header(&first, "link"),
        r#"</items?limit=2&after=2>; rel="next""#
    );
    assert_eq!(ids(&first.json().await.unwrap()), [1, 2]);

    let second = app.get("/items?limit=2&after=2").await;
    assert_eq!(
        header(&second, "link"),
        r#"</items?limit=2&after=4>; rel="next""#
    );
    assert_eq!(ids(&second.json().await.unwrap()), [3, 4]);

    let last = app.get("/items?limit=2&after=4").await;
    assert_eq!(header(&last, "x-total-count"), "5");
    assert_eq!(header(&last, "link"), "", "no next link on the last page");
    assert_eq!(ids(&last.json().await.unwrap()), [5]);
}

#[tokio::test]
async fn a_page_that_ends_exactly_at_the_last_item_has_no_next_link_c10() {
    let app = app_with_items(&["a", "b"]).await;

    let page = app.get("/items?limit=2").await;

    assert_eq!(header(&page, "link"), "");
    assert_eq!(ids(&page.json().await.unwrap()), [1, 2]);
}

#[tokio::test]
async fn after_alone_returns_every_later_item_c10() {
    let app = app_with_items(&["a", "b", "c"]).await;

    let page = app.get("/items?after=1").await;

    assert_eq!(ids(&page.json().await.unwrap()), [2, 3]);
}

#[tokio::test]
async fn the_name_filter_matches_exactly_and_the_total_counts_all_matches_c10() {
    let app = app_with_items(&["x y", "other", "x y", "x y ", "x y"]).await;

    let page = app.get("/items?name=x%20y&limit=1&after=1").await;

    assert_eq!(
        header(&page, "x-total-count"),
        "3",
        "counts matches before `after` too"
    );
    assert_eq!(
        header(&page, "link"),
        r#"</items?limit=1&after=3&name=x+y>; rel="next""#
    );
    let body: Value = page.json().await.unwrap();
    assert_eq!(ids(&body), [3]);
    assert_eq!(body[0]["name"], "x y");

    let next = app.get("/items?limit=1&after=3&name=x+y").await;
    assert_eq!(header(&next, "link"), "");
    assert_eq!(ids(&next.json().await.unwrap()), [5]);
}

#[tokio::test]
async fn the_full_listing_carries_the_total_count_c10() {
    let app = app_with_items(&["a", "b"]).await;

    let response = app.get("/items").await;

    assert_eq!(header(&response, "x-total-count"), "2");
    assert_eq!(header(&response, "link"), "");
}

#[tokio::test]
async fn invalid_query_values_are_a_400_problem_with_an_errors_entry_c10() {
    let app = app_with_items(&["a"]).await;

    for (query, path) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=abc", "limit"),
        ("limit=-1", "limit"),
        ("limit=1.5", "limit"),
        ("limit=", "limit"),
        ("after=x", "after"),
        ("after=1.0", "after"),
        ("after=99999999999999999999", "after"),
        ("name=", "name"),
        ("limit=1&limit=2", "limit"),
    ] {
        let response = app.get(&format!("/items?{query}")).await;
        let problem = assert_problem(response, 400).await;
        let entry = &problem["errors"][0];
        assert_eq!(entry["path"], path, "{query}");
        assert_eq!(entry["location"], "query", "{query}");
        assert_eq!(entry["type"], "field", "{query}");
    }
}

#[tokio::test]
async fn limits_of_1_and_1000_are_accepted_and_unknown_parameters_ignored_c10() {
    let app = app_with_items(&["a", "b"]).await;

    assert_eq!(
        ids(&app.get("/items?limit=1").await.json().await.unwrap()),
        [1]
    );
    assert_eq!(
        ids(&app.get("/items?limit=1000").await.json().await.unwrap()),
        [1, 2]
    );
    assert_eq!(
        ids(&app
            .get("/items?sort=desc&page=3")
            .await
            .json()
            .await
            .unwrap()),
        [1, 2]
    );
}

/// Only `name` filters by name (C10): a parameter the service does not read
/// is ignored, like an unknown body field (C3), even one whose name looks
/// like a filter or whose value would be refused as a name; a page keeps its
/// `X-Total-Count` and its `next` link.
#[tokio::test]
async fn unknown_parameters_beside_a_page_query_filter_nothing_and_are_never_refused_c10() {
    let app = app_with_items(&["a", "b", "a"]).await;

    for query in [
        "limit=2&names=a",
        "limit=2&filter=a",
        "limit=2&nam=",
        "limit=2&Name=b",
    ] {
        let page = app.get(&format!("/items?{query}")).await;
        assert_eq!(page.status(), 200, "{query}");
        assert_eq!(header(&page, "x-total-count"), "3", "{query}");
        assert_eq!(
            header(&page, "link"),
            r#"</items?limit=2&after=2>; rel="next""#,
            "{query}"
        );
        assert_eq!(ids(&page.json().await.unwrap()), [1, 2], "{query}");
    }

    let filtered = app.get("/items?limit=2&name=a&names=b").await;
    assert_eq!(header(&filtered, "x-total-count"), "2");
    assert_eq!(ids(&filtered.json().await.unwrap()), [1, 3]);
}

/// `GET /items`: its tag and its bytes.
async fn full_listing(app: &TestApp) -> (String, Vec<u8>) {
    let response = app.get("/items").await;
    assert_eq!(response.status(), 200);
    let tag = header(&response, "etag");
    (tag, response.bytes().await.unwrap().to_vec())
}

/// The full listing is streamed and its tag comes from the store's version
/// (C7, C10): the same collection gives the same tag and the same bytes; each
/// kind of write gives a new tag; the current tag gives 304; HEAD carries the
/// same headers and no body.
#[tokio::test]
async fn the_streamed_listing_has_a_tag_that_changes_exactly_when_its_bytes_do_c7_c10() {
    let app = app_with_items(&["a", "b", "c"]).await;
    let (tag, bytes) = full_listing(&app).await;
    let (again_tag, again_bytes) = full_listing(&app).await;
    assert!(tag.starts_with('"') && tag.ends_with('"'), "a strong tag");
    assert_eq!((&tag, &bytes), (&again_tag, &again_bytes));
    assert_eq!(ids(&serde_json::from_slice(&bytes).unwrap()), [1, 2, 3]);

    let mut seen = vec![tag.clone()];
    app.create_item("d").await;
    seen.push(full_listing(&app).await.0);
    app.put_json("/items/1", &serde_json::json!({"name": "z"}))
        .await;
    seen.push(full_listing(&app).await.0);
    app.delete("/items/2").await;
    let (last_tag, last_bytes) = full_listing(&app).await;
    seen.push(last_tag.clone());
    let distinct: std::collections::HashSet<_> = seen.iter().collect();
    assert_eq!(distinct.len(), 4, "every write changes the tag: {seen:?}");
    assert_eq!(
        serde_json::from_slice::<Value>(&last_bytes).unwrap(),
        serde_json::json!([{"id": 1, "name": "z"}, {"id": 3, "name": "c"}, {"id": 4, "name": "d"}])
    );

    let cached = app
        .request(reqwest::Method::GET, "/items")
        .header("if-none-match", &last_tag)
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status(), 304);
    assert_eq!(header(&cached, "etag"), last_tag);
    let stale = app
        .request(reqwest::Method::GET, "/items")
        .header("if-none-match", &tag)
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 200);

    let head = app
        .request(reqwest::Method::HEAD, "/items")
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(header(&head, "etag"), last_tag);
    assert_eq!(header(&head, "x-total-count"), "3");
    assert!(head.bytes().await.unwrap().is_empty());
}

#[tokio::test]
async fn an_empty_collection_streams_an_empty_array_c10() {
    let app = TestApp::in_memory().await;

    let response = app.get("/items").await;

    assert_eq!(header(&response, "x-total-count"), "0");
    assert_eq!(&response.bytes().await.unwrap()[..], b"[]");
}

/// A server over `count` items put in through the repository port: quicker
/// than HTTP for a listing larger than the socket buffers.
async fn app_with_many_items(count: usize) -> TestApp {
    let items = InMemoryItemRepository::new();
    for n in 1..=count {
        items
            .create(Name::parse(&format!("item-{n}")).unwrap())
            .await
            .unwrap();
    }
    TestApp::spawn(TestServices::over(Repositories::new(
        items,
        InMemoryProductRepository::new(),
        InMemoryUserRepository::seeded(),
    )))
    .await
}

/// Writes that land while a full listing streams neither cut it short nor
/// show up in it: it completes with the very bytes the same tag named
/// before the writes, a valid JSON array (C7: equal tags, equal bytes; C10).
/// The body (~8 MB) outgrows the socket buffers, so the server is still
/// producing it when the writes land: the client stops reading after the
/// first chunk until they are done.
#[tokio::test]
async fn writes_during_a_streamed_listing_leave_it_whole_and_true_to_its_tag_c7_c10() {
    let app = app_with_many_items(300_000).await;
    let (tag, bytes) = full_listing(&app).await;

    let mut listing = app.get("/items").await;
    assert_eq!(header(&listing, "etag"), tag);
    let mut streamed = listing.chunk().await.unwrap().unwrap().to_vec();
    assert!(
        streamed.len() < bytes.len(),
        "the listing is still streaming"
    );
    app.create_item("late").await;
    let renamed = app
        .put_json("/items/200000", &serde_json::json!({"name": "renamed"}))
        .await;
    assert_eq!(renamed.status(), 200);
    assert_eq!(app.delete("/items/299999").await.status(), 204);
    while let Some(chunk) = listing.chunk().await.unwrap() {
        streamed.extend_from_slice(&chunk);
    }

    assert!(streamed == bytes, "the listing is the one its tag names");
    let items: Value = serde_json::from_slice(&streamed).unwrap();
    assert_eq!(items.as_array().unwrap().len(), 300_000);
    let (after, _) = full_listing(&app).await;
    assert_ne!(after, tag, "the writes made a new version");
}
