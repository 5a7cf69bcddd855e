//! HTTP semantics: HEAD, OPTIONS, 405, 404, ETags and conditional requests
//! (contract C7), `nosniff` on every response (C4).

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

const GET_ROUTES: [&str; 9] = [
    "/",
    "/hello?person=a",
    "/data",
    "/items",
    "/items/1",
    "/users",
    "/products",
    "/products/1",
    "/items?limit=1",
];

#[tokio::test]
async fn every_get_route_answers_head_with_the_same_headers_and_no_body_c7() {
    let app = TestApp::in_memory().await;
    app.create_item("one").await;

    for path in GET_ROUTES {
        let get = app.get(path).await;
        let head = app.request(Method::HEAD, path).send().await.unwrap();
        assert_eq!(head.status(), get.status(), "{path}");
        for name in ["content-type", "content-length", "etag", "x-total-count"] {
            assert_eq!(
                header(&head, name),
                header(&get, name),
                "{name} of HEAD {path}"
            );
        }
        assert!(
            head.bytes().await.unwrap().is_empty(),
            "HEAD {path} has no body"
        );
    }
}

#[tokio::test]
async fn options_answers_204_with_the_methods_of_the_route_c7() {
    let app = TestApp::in_memory().await;

    for (path, allow) in [
        ("/", "GET, HEAD, OPTIONS"),
        ("/items", "GET, HEAD, POST, OPTIONS"),
        ("/items/1", "GET, HEAD, PUT, DELETE, OPTIONS"),
        ("/products", "GET, HEAD, POST, OPTIONS"),
        ("/login", "POST, OPTIONS"),
    ] {
        let response = app.request(Method::OPTIONS, path).send().await.unwrap();
        assert_eq!(response.status(), 204, "{path}");
        assert_eq!(header(&response, "allow"), allow, "{path}");
    }
}

#[tokio::test]
async fn another_method_on_a_known_path_is_405_with_allow_and_a_problem_c7() {
    let app = TestApp::in_memory().await;

    for (method, path, allow) in [
        (Method::PATCH, "/items/1", "GET, HEAD, PUT, DELETE, OPTIONS"),
        (Method::DELETE, "/items", "GET, HEAD, POST, OPTIONS"),
        (Method::PUT, "/users", "GET, HEAD, OPTIONS"),
        (Method::GET, "/login", "POST, OPTIONS"),
    ] {
        let response = app.request(method.clone(), path).send().await.unwrap();
        assert_eq!(header(&response, "allow"), allow, "{method} {path}");
        assert_problem(response, 405).await;
    }
}

#[tokio::test]
async fn an_unknown_path_is_a_404_problem_c7() {
    let app = TestApp::in_memory().await;

    for path in ["/nope", "/items/1/extra", "/v1/items"] {
        assert_problem(app.get(path).await, 404).await;
    }
}

#[tokio::test]
async fn get_responses_carry_a_strong_etag_and_if_none_match_gives_304_c7() {
    let app = TestApp::in_memory().await;
    app.create_item("one").await;

    for path in GET_ROUTES {
        let first = app.get(path).await;
        let tag = header(&first, "etag");
        assert!(
            tag.starts_with('"') && tag.ends_with('"') && tag.len() > 2,
            "{path}: {tag:?}"
        );

        let again = app
            .request(Method::GET, path)
            .header("if-none-match", &tag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{path}");
        assert_eq!(header(&again, "etag"), tag);
        assert!(again.bytes().await.unwrap().is_empty());

        let weak = app
            .request(Method::GET, path)
            .header("if-none-match", format!("\"other\", W/{tag}"))
            .send()
            .await
            .unwrap();
        assert_eq!(weak.status(), 304, "{path}: If-None-Match compares weakly");
    }
}

#[tokio::test]
async fn the_etag_changes_when_the_item_changes_c7() {
    let app = TestApp::in_memory().await;
    app.create_item("one").await;
    let before = header(&app.get("/items/1").await, "etag");

    app.put_json("/items/1", &json!({ "name": "two" })).await;
    let stale = app
        .request(Method::GET, "/items/1")
        .header("if-none-match", &before)
        .send()
        .await
        .unwrap();

    assert_eq!(stale.status(), 200);
    assert_ne!(header(&stale, "etag"), before);
}

#[tokio::test]
async fn put_with_the_current_if_match_tag_replaces_the_item_c7() {
    let app = TestApp::in_memory().await;
    app.create_item("one").await;
    let tag = header(&app.get("/items/1").await, "etag");

    let response = app
        .request(Method::PUT, "/items/1")
        .header("if-match", &tag)
        .json(&json!({ "name": "two" }))
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({ "id": 1, "name": "two" })
    );
}

#[tokio::test]
async fn a_put_answer_carries_the_new_tag_that_a_get_sends_and_the_next_if_match_accepts_c7() {
    let app = TestApp::in_memory().await;
    app.create_item("one").await;

    let replaced = app.put_json("/items/1", &json!({ "name": "two" })).await;
    assert_eq!(replaced.status(), 200);
    let tag = header(&replaced, "etag");
    assert_eq!(tag, header(&app.get("/items/1").await, "etag"));

    let next = app
        .request(Method::PUT, "/items/1")
        .header("if-match", &tag)
        .json(&json!({ "name": "three" }))
        .send()
        .await
        .unwrap();
    assert_eq!(next.status(), 200);
    assert_ne!(header(&next, "etag"), tag);
}

#[tokio::test]
async fn put_with_a_stale_if_match_tag_is_412_and_changes_nothing_c7() {
    let app = TestApp::in_memory().await;
    app.create_item("one").await;
    let stale = header(&app.get("/items/1").await, "etag");
    app.put_json("/items/1", &json!({ "name": "two" })).await;

    for tag in [stale.as_str(), "\"nonsense\"", &format!("W/{stale}")] {
        let response = app
            .request(Method::PUT, "/items/1")
            .header("if-match", tag)
            .json(&json!({ "name": "three" }))
            .send()
            .await
            .unwrap();
        assert_problem(response, 412).await;
    }
    assert_eq!(
        app.get("/items/1").await.json::<Value>().await.unwrap()["name"],
        "two"
    );
}

#[tokio::test]
async fn put_with_if_match_star_needs_the_item_to_exist_c7() {
    let app = TestApp::in_memory().await;
    app.create_item("one").await;

    let existing = app
        .request(Method::PUT, "/items/1")
        .header("if-match", "*")
        .json(&json!({ "name": "two" }))
        .send()
        .await
        .unwrap();
    let missing = app
        .request(Method::PUT, "/items/9")
        .header("if-match", "*")
        .json(&json!({ "name": "two" }))
        .send()
        .await
        .unwrap();

    assert_eq!(existing.status(), 200);
    assert_eq!(missing.status(), 404);
    assert_eq!(missing.text().await.unwrap(), "Item not found");
}

#[tokio::test]
async fn every_response_carries_nosniff_c4() {
    let app = TestApp::in_memory().await;

    let responses = [
        app.get("/").await,
        app.get("/items/9").await,
        app.get("/nope").await,
        app.request(Method::PATCH, "/items").send().await.unwrap(),
        app.post_raw("/items", "text/plain", "x").await,
        app.request(Method::OPTIONS, "/items").send().await.unwrap(),
    ];
    for response in responses {
        assert_eq!(
            header(&response, "x-content-type-options"),
            "nosniff",
            "{}",
            response.url()
        );
    }
}

#[tokio::test]
async fn an_empty_if_match_sets_no_condition_c7() {
    let app = TestApp::in_memory().await;
    app.create_item("one").await;

    let response = app
        .request(Method::PUT, "/items/1")
        .header("if-match", "")
        .json(&json!({ "name": "two" }))
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 200);
}
