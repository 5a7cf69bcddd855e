//! When things go wrong: an unreachable store (503, nothing internal sent,
//! C6), a write whose outcome the store cannot tell (504, C12) and a client
//! that sends its body too slowly (408).

use std::time::Duration;

use futures_util::StreamExt;
use items_adapters::http::{BodyLimits, HttpSettings};
use items_domain::ports::{MockItemRepository, MockProductRepository, MockUserRepository};
use items_domain::{Id, Item, ItemListing, Name, RepositoryError};
use items_testkit::Repositories;
use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

const SECRET: &str = "connection to postgres://admin:hunter2@10.0.0.5/db refused";

fn failure() -> RepositoryError {
    RepositoryError::unavailable(SECRET)
}

/// Use cases over repositories that always fail, as a dead database would.
fn unavailable_services() -> TestServices {
    let mut items = MockItemRepository::new();
    items.expect_list().returning(|_| Err(failure()));
    items.expect_list_all().returning(|| Err(failure()));
    items.expect_get().returning(|_| Err(failure()));
    items.expect_create().returning(|_| Err(failure()));
    items
        .expect_create_keyed()
        .returning(|_, _, _| Err(failure()));
    items.expect_replace().returning(|_, _| Err(failure()));
    items.expect_delete().returning(|_| Err(failure()));
    let mut products = MockProductRepository::new();
    products.expect_list().returning(|| Err(failure()));
    products.expect_create().returning(|_, _| Err(failure()));
    products
        .expect_create_keyed()
        .returning(|_, _, _, _| Err(failure()));
    let mut users = MockUserRepository::new();
    users.expect_list().returning(|| Err(failure()));
    TestServices::over(Repositories::new(items, products, users))
}

/// Use cases whose every write was sent for commit and lost, its fate
/// unknown to the store.
fn outcome_unknown_services() -> TestServices {
    let unknown = || RepositoryError::outcome_unknown(SECRET);
    let mut items = MockItemRepository::new();
    items.expect_create().returning(move |_| Err(unknown()));
    items
        .expect_create_keyed()
        .returning(move |_, _, _| Err(unknown()));
    items.expect_replace().returning(move |_, _| Err(unknown()));
    items.expect_delete().returning(move |_| Err(unknown()));
    let mut products = MockProductRepository::new();
    products
        .expect_create()
        .returning(move |_, _| Err(unknown()));
    TestServices::over(Repositories::new(
        items,
        products,
        MockUserRepository::new(),
    ))
}

#[tokio::test]
async fn a_write_whose_outcome_is_unknown_gets_504_outcome_unknown_without_retry_after_c12() {
    let app = TestApp::spawn(outcome_unknown_services()).await;

    let responses = [
        app.post_json("/items", &json!({ "name": "x" })).await,
        app.post_keyed("/items", "key", &json!({ "name": "x" }))
            .await,
        app.put_json("/items/1", &json!({ "name": "x" })).await,
        app.delete("/items/1").await,
        app.post_json("/products", &json!({ "name": "x", "price": 1 }))
            .await,
    ];
    for response in responses {
        let url = response.url().clone();
        assert!(header(&response, "retry-after").is_empty(), "{url}");
        let problem = assert_problem_of_type(response, 504, "outcome-unknown").await;
        let text = problem.to_string();
        assert!(text.contains("Idempotency-Key"), "{url}: {text}");
        assert!(!text.contains("hunter2"), "{url} leaks the cause: {text}");
    }
}

/// Use cases over an item store whose full listing starts, then fails:
/// before any row when `rows_first` is false, after a batch of rows when it
/// is true.
fn listing_failing_after(rows_first: bool) -> TestServices {
    let mut items = MockItemRepository::new();
    items.expect_list_all().returning(move || {
        let pen = Item {
            id: Id::new(1),
            name: Name::parse("pen").unwrap(),
        };
        let batches = if rows_first {
            vec![Ok(vec![pen]), Err(failure())]
        } else {
            vec![Err(failure())]
        };
        // A batch a moment after the one before, as rows come from a
        // store: the first is sent before the failure is met.
        let batches = futures_util::stream::iter(batches).then(|batch| async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            batch
        });
        Ok(ItemListing {
            version: 7,
            total: 2,
            batches: batches.boxed(),
        })
    });
    TestServices::over(Repositories::new(
        items,
        MockProductRepository::new(),
        MockUserRepository::new(),
    ))
}

#[tokio::test]
async fn a_listing_whose_store_fails_before_its_first_rows_gets_503_not_a_cut_200_c12() {
    let app = TestApp::spawn(listing_failing_after(false)).await;

    let response = app.get("/items").await;

    assert_problem(response, 503).await;
}

#[tokio::test]
async fn a_listing_whose_store_fails_after_rows_were_sent_ends_unterminated_c12() {
    let app = TestApp::spawn(listing_failing_after(true)).await;

    let response = app.get("/items").await;

    assert_eq!(
        response.status(),
        200,
        "the status went with the first rows"
    );
    assert!(
        response.bytes().await.is_err(),
        "the body ends without its last chunk: the client sees it incomplete"
    );
}

#[tokio::test]
async fn an_unreachable_store_gives_503_with_retry_after_and_no_internal_detail_c6() {
    let app = TestApp::spawn(unavailable_services()).await;

    let responses = [
        app.get("/items").await,
        app.get("/items/1").await,
        app.post_json("/items", &json!({ "name": "x" })).await,
        app.put_json("/items/1", &json!({ "name": "x" })).await,
        app.request(Method::PUT, "/items/1")
            .header("if-match", "*")
            .json(&json!({ "name": "x" }))
            .send()
            .await
            .unwrap(),
        app.delete("/items/1").await,
        app.get("/users").await,
        app.get("/products").await,
        app.post_json("/products", &json!({ "name": "x", "price": 1 }))
            .await,
    ];
    for response in responses {
        let url = response.url().clone();
        assert!(
            header(&response, "retry-after")
                .parse::<u64>()
                .is_ok_and(|secs| secs > 0),
            "{url}"
        );
        let problem = assert_problem(response, 503).await;
        let text = problem.to_string();
        for leak in ["hunter2", "postgres", "10.0.0.5", "refused"] {
            assert!(!text.contains(leak), "{url} leaks {leak:?}: {text}");
        }
    }
}

#[tokio::test]
async fn routes_that_need_no_store_keep_answering_when_it_is_down() {
    let app = TestApp::spawn(unavailable_services()).await;

    assert_eq!(app.get("/").await.status(), 200);
    assert_eq!(app.get("/products/1").await.status(), 200);
    // Validation happens before the store is asked.
    assert_problem(app.post_json("/items", &json!({})).await, 400).await;
    // An id that names no item needs no store either.
    assert_eq!(app.get("/items/abc").await.status(), 404);
}

#[tokio::test]
async fn a_body_that_arrives_too_slowly_is_cut_off_with_408() {
    let settings = HttpSettings {
        body_limits: BodyLimits {
            max_bytes: 1024,
            read_timeout: Duration::from_millis(300),
        },
        ..test_settings()
    };
    let app = TestApp::spawn_with(settings, TestServices::in_memory()).await;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", app.port))
        .await
        .unwrap();

    let head = "POST /items HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(b"{\"name\"").await.unwrap();
    let mut response = Vec::new();
    let read =
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut response)).await;

    assert!(
        read.is_ok(),
        "the server answered instead of waiting forever"
    );
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("application/problem+json"), "{text}");
    assert_eq!(
        app.get("/items")
            .await
            .json::<Vec<serde_json::Value>>()
            .await
            .unwrap()
            .len(),
        0
    );
}
