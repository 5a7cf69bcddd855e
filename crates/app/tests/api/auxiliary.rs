//! The auxiliary routes: spec §4 "Auxiliary routes", contract C3, C4.

use std::time::Duration;

use items_adapters::http::{BodyLimits, HttpSettings};
use serde_json::{Value, json};

use crate::support::*;

const TEXT: &str = "text/plain; charset=utf-8";

#[tokio::test]
async fn the_root_greets_the_world_in_plain_text_c4() {
    let app = TestApp::in_memory().await;

    let response = app.get("/").await;

    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), TEXT);
    assert_eq!(response.text().await.unwrap(), "Hello World!");
}

#[tokio::test]
async fn hello_greets_a_named_person_c4() {
    let app = TestApp::in_memory().await;

    let response = app.get("/hello?person=Ada%20Lovelace").await;

    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), TEXT);
    assert_eq!(response.text().await.unwrap(), "Hello, Ada Lovelace!");
}

#[tokio::test]
async fn hello_without_person_answers_200_with_the_validation_errors_and_no_value_spec_7_c4() {
    let app = TestApp::in_memory().await;

    let response = app.get("/hello").await;

    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), "application/json");
    assert_eq!(
        response.text().await.unwrap(),
        r#"{"errors":[{"type":"field","msg":"Invalid value","path":"person","location":"query"}]}"#
    );
}

#[tokio::test]
async fn hello_with_an_empty_person_reports_the_empty_value_spec_7_c4() {
    let app = TestApp::in_memory().await;

    let response = app.get("/hello?person=").await;

    assert_eq!(response.status(), 200);
    assert_eq!(
        response.text().await.unwrap(),
        r#"{"errors":[{"type":"field","value":"","msg":"Invalid value","path":"person","location":"query"}]}"#
    );
}

#[tokio::test]
async fn a_script_in_a_name_comes_back_as_inert_text_c4() {
    let app = TestApp::in_memory().await;
    let script = "<script>alert(1)</script>";

    let hello = app
        .get("/hello?person=%3Cscript%3Ealert(1)%3C%2Fscript%3E")
        .await;
    let login = app
        .post_raw(
            "/login",
            "application/x-www-form-urlencoded",
            format!("username={script}"),
        )
        .await;

    for (response, expected) in [
        (hello, format!("Hello, {script}!")),
        (login, format!("welcome, {script}")),
    ] {
        assert_eq!(header(&response, "content-type"), TEXT);
        assert_eq!(header(&response, "x-content-type-options"), "nosniff");
        assert_eq!(response.text().await.unwrap(), expected);
    }
}

#[tokio::test]
async fn data_is_the_fixed_sample_object_c4() {
    let app = TestApp::in_memory().await;

    let response = app.get("/data").await;

    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({ "name": "John Doe", "age": 30, "email": "john.doe@example.com" })
    );
}

#[tokio::test]
async fn login_welcomes_the_username_from_a_urlencoded_form_c3_c4() {
    let app = TestApp::in_memory().await;

    let response = app
        .post_raw(
            "/login",
            "application/x-www-form-urlencoded; charset=utf-8",
            "username=ada+l%C3%B6v&x=1",
        )
        .await;

    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), TEXT);
    assert_eq!(response.text().await.unwrap(), "welcome, ada löv");
}

#[tokio::test]
async fn login_without_a_username_is_a_400_problem_with_an_errors_entry_c3() {
    let app = TestApp::in_memory().await;

    for (body, value) in [
        ("", None),
        ("other=1", None),
        ("username=", Some(json!(""))),
    ] {
        let response = app
            .post_raw("/login", "application/x-www-form-urlencoded", body)
            .await;
        let problem = assert_problem(response, 400).await;
        assert_eq!(problem["errors"][0]["path"], "username", "{body:?}");
        assert_eq!(problem["errors"][0]["location"], "body");
        assert_eq!(
            problem["errors"][0].get("value").cloned(),
            value,
            "{body:?}"
        );
    }
}

#[tokio::test]
async fn login_with_another_content_type_is_415_c3() {
    let app = TestApp::in_memory().await;

    let response = app.post_json("/login", &json!({ "username": "ada" })).await;

    assert_problem(response, 415).await;
}

#[tokio::test]
async fn login_over_max_json_bytes_is_413_c3() {
    let settings = HttpSettings {
        body_limits: BodyLimits {
            max_bytes: 32,
            read_timeout: Duration::from_secs(5),
        },
        ..test_settings()
    };
    let app = TestApp::spawn_with(settings, TestServices::in_memory()).await;

    let response = app
        .post_raw(
            "/login",
            "application/x-www-form-urlencoded",
            format!("username={}", "a".repeat(64)),
        )
        .await;

    assert_problem(response, 413).await;
}

#[tokio::test]
async fn api_users_echoes_any_json_object_unchanged_c3() {
    let app = TestApp::in_memory().await;
    let body = r#"{"z":1,"a":[true,null,{"n":1.5}],"name":"ünïcode"}"#;

    let response = app.post_raw("/api/users", "application/json", body).await;

    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), "application/json");
    assert_eq!(
        response.text().await.unwrap(),
        body,
        "same object, key order included"
    );
    assert_eq!(
        app.get("/users")
            .await
            .json::<Vec<Value>>()
            .await
            .unwrap()
            .len(),
        2,
        "users stay read-only"
    );
}

#[tokio::test]
async fn api_users_refuses_what_every_json_route_refuses_c3() {
    let app = TestApp::in_memory().await;

    assert_problem(
        app.post_raw("/api/users", "application/json", "[1,2]")
            .await,
        400,
    )
    .await;
    assert_problem(
        app.post_raw("/api/users", "application/json", "{oops")
            .await,
        400,
    )
    .await;
    assert_problem(app.post_raw("/api/users", "text/plain", "{}").await, 415).await;
}
