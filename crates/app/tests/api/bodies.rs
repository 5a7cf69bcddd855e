//! JSON bodies and their validation: contract C3 and the problem format C6.

use std::time::Duration;

use items_adapters::http::{BodyLimits, HttpSettings};
use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn a_json_body_needs_content_type_application_json_else_415_c3() {
    let app = TestApp::in_memory().await;
    let body = r#"{"name":"x"}"#;

    for content_type in [
        "text/plain",
        "text/json",
        "application/merge-patch+json",
        "application/x-www-form-urlencoded",
    ] {
        let response = app.post_raw("/items", content_type, body).await;
        assert_problem(response, 415).await;
    }
    let response = app
        .request(reqwest::Method::POST, "/items")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_problem(response, 415).await;
    // Parameters such as charset are allowed, and the type is case-insensitive.
    assert_eq!(
        app.post_raw("/items", "application/json; charset=utf-8", body)
            .await
            .status(),
        201
    );
    assert_eq!(
        app.post_raw("/items", "Application/JSON", body)
            .await
            .status(),
        201
    );
}

#[tokio::test]
async fn malformed_json_is_a_400_problem_c3_c6() {
    let app = TestApp::in_memory().await;

    for body in [
        r#"{"name":"x""#,
        "{name: 'x'}",
        "",
        "nul",
        r#"{"name":"x"} trailing"#,
    ] {
        let response = app.post_raw("/items", "application/json", body).await;
        let problem = assert_problem(response, 400).await;
        assert!(
            problem["detail"].as_str().unwrap().contains("JSON"),
            "{body:?}: {problem}"
        );
    }
}

#[tokio::test]
async fn a_body_that_is_not_a_json_object_is_a_400_problem_c3() {
    let app = TestApp::in_memory().await;

    for body in [r#"["x"]"#, r#""x""#, "42", "null", "true"] {
        let response = app.post_raw("/items", "application/json", body).await;
        let problem = assert_problem(response, 400).await;
        assert_eq!(
            problem["detail"], "The body must be a JSON object.",
            "{body:?}"
        );
    }
    assert_eq!(
        app.get("/items").await.json::<Value>().await.unwrap(),
        json!([])
    );
}

#[tokio::test]
async fn a_body_over_max_json_bytes_is_a_413_problem_c3() {
    let settings = HttpSettings {
        body_limits: BodyLimits {
            max_bytes: 64,
            read_timeout: Duration::from_secs(5),
        },
        ..test_settings()
    };
    let app = TestApp::spawn_with(settings, TestServices::in_memory()).await;

    let small = app
        .post_json("/items", &json!({ "name": "x".repeat(40) }))
        .await;
    let large = app
        .post_json("/items", &json!({ "name": "x".repeat(80) }))
        .await;

    assert_eq!(small.status(), 201);
    assert_problem(large, 413).await;
    // A body with no declared length (chunked) is cut at the limit too.
    let stream = futures_util::stream::iter(vec![Ok::<_, std::io::Error>(format!(
        r#"{{"name":"{}"}}"#,
        "y".repeat(100)
    ))]);
    let chunked = app
        .request(reqwest::Method::POST, "/items")
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_problem(chunked, 413).await;
    assert_eq!(
        app.get("/items")
            .await
            .json::<Vec<Value>>()
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn unknown_fields_are_ignored_c3() {
    let app = TestApp::in_memory().await;

    let response = app
        .post_json("/items", &json!({ "name": "x", "colour": "red", "id": 77 }))
        .await;

    assert_eq!(response.status(), 201);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({ "id": 1, "name": "x" })
    );
}

#[tokio::test]
async fn names_that_break_the_rule_are_refused_with_an_errors_entry_c3_c6() {
    let app = TestApp::in_memory().await;
    let too_long = "x".repeat(257);

    for (body, value) in [
        (json!({}), None),
        (json!({ "name": null }), Some(json!(null))),
        (json!({ "name": 7 }), Some(json!(7))),
        (json!({ "name": ["a"] }), Some(json!(["a"]))),
        (json!({ "name": "" }), Some(json!(""))),
        (json!({ "name": too_long }), Some(json!(too_long))),
    ] {
        for response in [
            app.post_json("/items", &body).await,
            app.put_json("/items/1", &body).await,
        ] {
            let problem = assert_problem(response, 400).await;
            let entry = &problem["errors"][0];
            assert_eq!(entry["type"], "field");
            assert_eq!(entry["path"], "name");
            assert_eq!(entry["location"], "body");
            assert!(entry["msg"].as_str().is_some_and(|msg| !msg.is_empty()));
            assert_eq!(entry.get("value").cloned(), value, "{body}");
        }
    }
    assert_eq!(
        app.get("/items").await.json::<Value>().await.unwrap(),
        json!([])
    );
}

#[tokio::test]
async fn names_of_1_to_256_characters_are_kept_exactly_as_sent_c3() {
    let app = TestApp::in_memory().await;

    for name in [
        "x",
        "  padded  ",
        &"y".repeat(256),
        &"😀".repeat(256),
        "<script>alert(1)</script>",
    ] {
        let created = app.create_item(name).await;
        assert_eq!(created["name"], name);
        let read: Value = app
            .get(&format!("/items/{}", created["id"]))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(read["name"], name);
    }
}

#[tokio::test]
async fn duplicate_keys_are_refused_rather_than_silently_picked_c3() {
    let app = TestApp::in_memory().await;

    let response = app
        .post_raw("/items", "application/json", r#"{"name":"a","name":"b"}"#)
        .await;

    assert_problem(response, 400).await;
}
