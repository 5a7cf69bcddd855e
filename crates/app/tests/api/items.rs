//! `/items` and `/items/{id}`: spec §4 "Items", §7, contract C2, C3, C7.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn creating_an_item_returns_201_with_the_item_and_its_location_spec_4_c7() {
    let app = TestApp::in_memory().await;

    let response = app.post_json("/items", &json!({ "name": "first" })).await;

    assert_eq!(response.status(), 201);
    assert_eq!(header(&response, "location"), "/items/1");
    assert_eq!(header(&response, "content-type"), "application/json");
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({ "id": 1, "name": "first" })
    );
}

#[tokio::test]
async fn ids_count_up_from_one_and_are_never_reused_after_a_delete_c2() {
    let app = TestApp::in_memory().await;
    app.create_item("a").await;
    app.create_item("b").await;

    assert_eq!(app.delete("/items/2").await.status(), 204);
    let third = app.create_item("c").await;

    // The spec's literal "count + 1" would hand out 2 again; C2 says 3.
    assert_eq!(third["id"], 3);
}

#[tokio::test]
async fn reading_an_item_returns_it_spec_4() {
    let app = TestApp::in_memory().await;
    app.create_item("one").await;

    let response = app.get("/items/1").await;

    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({ "id": 1, "name": "one" })
    );
}

#[tokio::test]
async fn reading_an_unknown_item_is_404_item_not_found_as_plain_text_spec_7_c4() {
    let app = TestApp::in_memory().await;

    let response = app.get("/items/42").await;

    assert_eq!(response.status(), 404);
    assert_eq!(
        header(&response, "content-type"),
        "text/plain; charset=utf-8"
    );
    assert_eq!(response.text().await.unwrap(), "Item not found");
}

#[tokio::test]
async fn path_ids_that_are_not_base_10_integers_name_no_item_c2() {
    let app = TestApp::in_memory().await;
    app.create_item("one").await;

    for id in [
        "abc",
        "1.5",
        "12abc",
        "%201",
        "+1",
        "1e0",
        "99999999999999999999",
        "0x1",
    ] {
        let path = format!("/items/{id}");
        let read = app.get(&path).await;
        assert_eq!(read.status(), 404, "GET {path}");
        assert_eq!(read.text().await.unwrap(), "Item not found", "GET {path}");

        let replaced = app.put_json(&path, &json!({ "name": "x" })).await;
        assert_eq!(replaced.status(), 404, "PUT {path}");
        assert_eq!(
            replaced.text().await.unwrap(),
            "Item not found",
            "PUT {path}"
        );

        assert_eq!(app.delete(&path).await.status(), 204, "DELETE {path}");
    }
    // Leading zeros and a minus sign are still base-10 integers.
    assert_eq!(app.get("/items/001").await.status(), 200);
    assert_eq!(app.get("/items/-1").await.status(), 404);
    assert_eq!(
        app.get("/items/1").await.json::<Value>().await.unwrap()["name"],
        "one"
    );
}

#[tokio::test]
async fn replacing_an_item_returns_the_path_id_and_the_new_name_spec_4_rule_1() {
    let app = TestApp::in_memory().await;
    app.create_item("old").await;

    let response = app
        .put_json("/items/1", &json!({ "name": "new", "id": 99 }))
        .await;

    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({ "id": 1, "name": "new" })
    );
    assert_eq!(
        app.get("/items/1").await.json::<Value>().await.unwrap()["name"],
        "new"
    );
}

#[tokio::test]
async fn replacing_an_unknown_item_is_404_and_creates_nothing_spec_7() {
    let app = TestApp::in_memory().await;

    let response = app.put_json("/items/5", &json!({ "name": "ghost" })).await;

    assert_eq!(response.status(), 404);
    assert_eq!(response.text().await.unwrap(), "Item not found");
    assert_eq!(
        app.get("/items").await.json::<Value>().await.unwrap(),
        json!([])
    );
}

#[tokio::test]
async fn a_put_body_is_validated_before_the_id_c3() {
    let app = TestApp::in_memory().await;

    let response = app.put_json("/items/5", &json!({ "name": "" })).await;

    let problem = assert_problem(response, 400).await;
    assert_eq!(problem["errors"][0]["path"], "name");
}

#[tokio::test]
async fn deleting_returns_204_whether_or_not_the_item_existed_spec_4_rule_2() {
    let app = TestApp::in_memory().await;
    app.create_item("doomed").await;

    let first = app.delete("/items/1").await;
    let again = app.delete("/items/1").await;

    assert_eq!(first.status(), 204);
    assert_eq!(first.bytes().await.unwrap().len(), 0);
    assert_eq!(again.status(), 204);
    assert_eq!(app.get("/items/1").await.status(), 404);
}

#[tokio::test]
async fn listing_returns_every_item_ordered_by_id_spec_4_c10() {
    let app = TestApp::in_memory().await;
    for name in ["a", "b", "c"] {
        app.create_item(name).await;
    }
    app.delete("/items/2").await;

    let response = app.get("/items").await;

    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!([{ "id": 1, "name": "a" }, { "id": 3, "name": "c" }])
    );
}

#[tokio::test]
async fn a_thousand_concurrent_creates_get_a_thousand_distinct_ids_and_all_are_listed_c2() {
    let app = TestApp::in_memory().await;

    let creates = (0..1000).map(|n| {
        let client = app.http.clone();
        let url = app.url("/items");
        tokio::spawn(async move {
            let response = client
                .post(url)
                .json(&json!({ "name": format!("item {n}") }))
                .send()
                .await;
            let body = response.expect("answered").text().await.expect("a body");
            let created: Value = serde_json::from_str(&body).expect("JSON");
            created["id"]
                .as_i64()
                .unwrap_or_else(|| panic!("no id in {body}"))
        })
    });
    let mut ids = HashSet::new();
    for create in creates.collect::<Vec<_>>() {
        ids.insert(create.await.expect("task completes"));
    }

    assert_eq!(ids.len(), 1000);
    assert_eq!(ids, (1..=1000).collect());
    let listed = app.get("/items").await.json::<Vec<Value>>().await.unwrap();
    assert_eq!(listed.len(), 1000);
}
