//! `/users`, `/products` and `/products/{id}`: spec §4, contract C2, C3, C4, C7.

use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn users_are_the_two_read_only_users_of_c4() {
    let app = TestApp::in_memory().await;

    let response = app.get("/users").await;

    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!([{ "id": 1, "name": "John Doe" }, { "id": 2, "name": "Jane Doe" }])
    );
}

#[tokio::test]
async fn creating_a_product_returns_201_with_location_and_numbers_as_sent_c3_c7() {
    let app = TestApp::in_memory().await;

    let first = app
        .post_json("/products", &json!({ "name": "pen", "price": 1.25 }))
        .await;
    assert_eq!(first.status(), 201);
    assert_eq!(header(&first, "location"), "/products/1");
    assert_eq!(
        first.json::<Value>().await.unwrap(),
        json!({ "id": 1, "name": "pen", "price": 1.25 })
    );

    let second = app
        .post_json("/products", &json!({ "name": "free", "price": 0 }))
        .await;
    assert_eq!(
        second.text().await.unwrap(),
        r#"{"id":2,"name":"free","price":0}"#
    );

    let listed = app.get("/products").await.json::<Value>().await.unwrap();
    assert_eq!(
        listed,
        json!([{ "id": 1, "name": "pen", "price": 1.25 }, { "id": 2, "name": "free", "price": 0 }])
    );
}

#[tokio::test]
async fn a_price_must_be_a_finite_number_of_zero_or_more_c3() {
    let app = TestApp::in_memory().await;

    for (price, value) in [
        (json!("9.99"), Some(json!("9.99"))),
        (json!(-0.01), Some(json!(-0.01))),
        (json!(null), Some(json!(null))),
        (json!({ "amount": 1 }), Some(json!({ "amount": 1 }))),
    ] {
        let response = app
            .post_json("/products", &json!({ "name": "pen", "price": price }))
            .await;
        let problem = assert_problem(response, 400).await;
        assert_eq!(problem["errors"][0]["path"], "price");
        assert_eq!(problem["errors"][0].get("value").cloned(), value);
    }
    let missing = app.post_json("/products", &json!({ "name": "pen" })).await;
    let problem = assert_problem(missing, 400).await;
    assert_eq!(problem["errors"][0]["path"], "price");
    assert!(problem["errors"][0].get("value").is_none());
    assert_eq!(
        app.get("/products").await.json::<Value>().await.unwrap(),
        json!([])
    );
}

#[tokio::test]
async fn every_invalid_product_field_is_reported_at_once_c6() {
    let app = TestApp::in_memory().await;

    let response = app
        .post_json("/products", &json!({ "name": "", "price": -1 }))
        .await;

    let problem = assert_problem(response, 400).await;
    let paths: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["name", "price"]);
}

#[tokio::test]
async fn a_product_id_path_answers_the_cors_message_for_any_id_c4() {
    let app = TestApp::in_memory().await;

    for id in ["1", "999", "abc"] {
        let response = app.get(&format!("/products/{id}")).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.json::<Value>().await.unwrap(),
            json!({ "msg": "This is CORS-enabled for all origins!" })
        );
    }
}

#[tokio::test]
async fn product_ids_count_up_from_one_c2() {
    let app = TestApp::in_memory().await;

    for expected in 1..=3 {
        let created: Value = app
            .post_json("/products", &json!({ "name": "p", "price": 1 }))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(created["id"], expected);
    }
}
