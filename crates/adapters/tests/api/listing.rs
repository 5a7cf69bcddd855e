//! Listing items at scale: contract C10.

use serde_json::Value;

use crate::helpers::*;

async fn app_with_items(names: &[&str]) -> TestApp {
    let app = spawn_app().await;
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
