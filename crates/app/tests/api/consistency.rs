//! `Consistency-Token` at the edge (C13): every store refuses a malformed
//! token (400, C6); a store with one copy (memory) accepts a good one,
//! ignores it and sends none; over a store that gives positions, the
//! position served is sent on 2xx, 304 and 404 answers for items and
//! products, and a token no copy can meet is a 409 `consistency-unmet`.
//! `postgres.rs` checks the tokens PostgreSQL gives.

use std::sync::Arc;

use items_adapters::memory;
use items_domain::{ConsistentReads, Position, ReadReport, ReadScope, Repositories};
use reqwest::Method;
use serde_json::json;

use crate::support::*;

const TOKEN: &str = "consistency-token";

/// A store that says every answer was served at `served`, and, when
/// `unmet`, that no copy of it could meet the request's token.
struct Fixed {
    repositories: Repositories,
    served: Position,
    unmet: bool,
}

impl ConsistentReads for Fixed {
    fn scope(&self, _at: Option<Position>) -> ReadScope {
        let report = Arc::new(ReadReport::default());
        report.served(self.served);
        if self.unmet {
            report.unmet();
        }
        ReadScope {
            repositories: self.repositories.clone(),
            report,
        }
    }
}

async fn over_fixed(unmet: bool) -> TestApp {
    let repositories = memory::repositories();
    let mut services = TestServices::over(repositories.clone());
    services.services = services.services.with_reads(Arc::new(Fixed {
        repositories,
        served: Position::new(1, 0x0016_B374_D848),
        unmet,
    }));
    TestApp::spawn(services).await
}

#[tokio::test]
async fn a_malformed_token_is_refused_with_400_on_every_item_and_product_route_c13_c6() {
    let app = TestApp::in_memory().await;
    app.create_item("pen").await;
    // (Spaces around a value are not part of it, RFC 9110 §5.5.)
    for token in ["", "1/16B374D848", "1-", "x-1", "1-2-3", "1 -2", "0x1-2"] {
        for (method, path) in [
            (Method::GET, "/items"),
            (Method::GET, "/items?limit=1"),
            (Method::GET, "/items/1"),
            (Method::HEAD, "/items/1"),
            (Method::DELETE, "/items/1"),
            (Method::GET, "/products"),
        ] {
            let response = app
                .request(method.clone(), path)
                .header(TOKEN, token)
                .send()
                .await
                .unwrap();
            if method == Method::HEAD {
                assert_eq!(response.status(), 400, "{method} {path} {token:?}");
                continue;
            }
            let problem = assert_problem(response, 400).await;
            assert_eq!(
                problem["errors"][0]["path"], "consistency-token",
                "{method} {path} {token:?}"
            );
            assert_eq!(problem["errors"][0]["location"], "headers");
        }
    }
    assert_eq!(
        app.get("/items/1").await.status(),
        200,
        "nothing was deleted"
    );
}

#[tokio::test]
async fn a_token_sent_twice_is_refused_with_400_c13() {
    let app = TestApp::in_memory().await;
    let response = app
        .request(Method::GET, "/items")
        .header(TOKEN, "1-10")
        .header(TOKEN, "1-20")
        .send()
        .await
        .unwrap();
    assert_problem(response, 400).await;
}

#[tokio::test]
async fn the_memory_store_ignores_a_good_token_and_sends_none_c13() {
    let app = TestApp::in_memory().await;
    let created = app
        .request(Method::POST, "/items")
        .header(TOKEN, "1-16B374D848")
        .json(&json!({ "name": "pen" }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    assert_eq!(header(&created, TOKEN), "", "memory sends no token");
    for path in [
        "/items",
        "/items/1",
        "/items?limit=1",
        "/items/9",
        "/products",
    ] {
        let response = app
            .request(Method::GET, path)
            .header(TOKEN, "FFFFFFFF-FFFFFFFFFFFFFFFF")
            .send()
            .await
            .unwrap();
        let expected = if path == "/items/9" { 404 } else { 200 };
        assert_eq!(response.status(), expected, "{path}");
        assert_eq!(header(&response, TOKEN), "", "{path}");
    }
}

#[tokio::test]
async fn a_store_that_gives_positions_sends_the_one_served_on_2xx_304_and_404_c13() {
    let app = over_fixed(false).await;
    let created = app.create_item("pen").await;
    assert_eq!(created["id"], 1);
    for (method, path, status) in [
        (Method::POST, "/items", 201),
        (Method::GET, "/items", 200),
        (Method::GET, "/items?limit=1", 200),
        (Method::GET, "/items/1", 200),
        (Method::HEAD, "/items/1", 200),
        (Method::GET, "/items/9", 404),
        (Method::PUT, "/items/1", 200),
        (Method::GET, "/products", 200),
        (Method::DELETE, "/items/1", 204),
    ] {
        let response = app
            .request(method.clone(), path)
            .header(TOKEN, "1-10")
            .json(&json!({ "name": "ink" }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{method} {path}");
        assert_eq!(header(&response, TOKEN), "1-16B374D848", "{method} {path}");
    }
    let tag = header(&app.get("/items").await, "etag");
    let not_modified = app
        .request(Method::GET, "/items")
        .header("if-none-match", tag)
        .send()
        .await
        .unwrap();
    assert_eq!(not_modified.status(), 304);
    assert_eq!(header(&not_modified, TOKEN), "1-16B374D848");
    for path in ["/users", "/", "/products/1"] {
        let response = app.get(path).await;
        assert_eq!(
            header(&response, TOKEN),
            "",
            "{path} reads no item or product"
        );
    }
}

#[tokio::test]
async fn a_token_no_copy_of_the_store_can_meet_is_a_409_consistency_unmet_c13() {
    let app = over_fixed(true).await;
    let response = app
        .request(Method::GET, "/items/1")
        .header(TOKEN, "1-10")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&response, TOKEN), "", "no position was served");
    assert_problem_of_type(response, 409, "consistency-unmet").await;
}

#[tokio::test]
async fn browsers_may_read_and_send_the_token_c13_c8() {
    let app = TestApp::in_memory().await;
    let response = app
        .request(Method::GET, "/items")
        .header("origin", "https://app.example")
        .send()
        .await
        .unwrap();
    let exposed = header(&response, "access-control-expose-headers").to_lowercase();
    assert!(
        exposed.split(',').any(|listed| listed.trim() == TOKEN),
        "exposed: {exposed}"
    );
    let preflight = app
        .request(Method::OPTIONS, "/items")
        .header("origin", "https://app.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", TOKEN)
        .send()
        .await
        .unwrap();
    let allowed = header(&preflight, "access-control-allow-headers").to_lowercase();
    assert!(allowed.contains(TOKEN), "allowed: {allowed}");
}
