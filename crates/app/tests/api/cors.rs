//! Cross-origin requests: contract C8.

use reqwest::Method;
use serde_json::json;

use crate::support::*;

const ORIGIN: &str = "http://elsewhere.test:8080";

#[tokio::test]
async fn every_response_to_a_request_with_origin_allows_any_origin_without_credentials_c8() {
    let app = TestApp::in_memory().await;
    app.create_item("one").await;

    let requests = [
        app.request(Method::GET, "/items/1"),
        app.request(Method::GET, "/items/99"),  // 404 text
        app.request(Method::GET, "/nowhere"),   // 404 problem
        app.request(Method::PATCH, "/items/1"), // 405
        app.request(Method::POST, "/items")
            .header("content-type", "text/plain")
            .body("x"), // 415
        app.request(Method::POST, "/items")
            .json(&json!({ "name": "" })), // 400
        app.request(Method::POST, "/items")
            .json(&json!({ "name": "two" })), // 201
        app.request(Method::DELETE, "/items/2"), // 204
    ];
    for request in requests {
        let response = request.header("origin", ORIGIN).send().await.unwrap();
        let status = response.status();
        assert_eq!(
            header(&response, "access-control-allow-origin"),
            "*",
            "status {status}"
        );
        assert_eq!(
            header(&response, "access-control-allow-credentials"),
            "",
            "status {status}"
        );
    }
}

#[tokio::test]
async fn browsers_may_read_the_headers_that_matter_c8() {
    let app = TestApp::in_memory().await;

    let response = app
        .request(Method::GET, "/items")
        .header("origin", ORIGIN)
        .send()
        .await
        .unwrap();

    let exposed = header(&response, "access-control-expose-headers").to_lowercase();
    for name in [
        "etag",
        "location",
        "link",
        "x-total-count",
        "retry-after",
        "ratelimit-policy",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
        "idempotent-replayed",
    ] {
        assert!(
            exposed.split(',').any(|listed| listed.trim() == name),
            "{name} is exposed: {exposed}"
        );
    }
}

/// The names a `Vary` header lists, lower-cased.
fn varies_by(response: &reqwest::Response) -> Vec<String> {
    header(response, "vary")
        .split(',')
        .map(|name| name.trim().to_lowercase())
        .filter(|name| !name.is_empty())
        .collect()
}

#[tokio::test]
async fn responses_with_and_without_origin_say_they_vary_by_origin_so_caches_keep_them_apart_c8() {
    // A response made without `Origin` has no CORS headers: a shared cache
    // must not hand it to a browser's cross-origin request.
    let app = TestApp::in_memory().await;
    app.create_item("one").await;

    for path in ["/", "/items/1", "/items/99", "/nowhere"] {
        for origin in [None, Some(ORIGIN)] {
            let mut request = app.request(Method::GET, path);
            if let Some(origin) = origin {
                request = request.header("origin", origin);
            }
            let response = request.send().await.unwrap();
            assert_eq!(
                varies_by(&response),
                ["origin"],
                "GET {path}, origin {origin:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_preflight_answer_varies_by_origin_and_the_requested_method_and_headers_c8() {
    let app = TestApp::in_memory().await;

    let response = app
        .request(Method::OPTIONS, "/items")
        .header("origin", ORIGIN)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 204);
    assert_eq!(
        varies_by(&response),
        [
            "origin",
            "access-control-request-method",
            "access-control-request-headers"
        ]
    );
}

#[tokio::test]
async fn a_preflight_gets_204_with_methods_requested_headers_and_max_age_c8() {
    let app = TestApp::in_memory().await;

    for (path, method, route_methods) in [
        ("/items", "POST", &["GET", "HEAD", "POST"][..]),
        ("/items/1", "PUT", &["GET", "HEAD", "PUT", "DELETE"][..]),
        ("/items/1", "DELETE", &["DELETE"][..]),
        ("/login", "POST", &["POST"][..]),
    ] {
        let response = app
            .request(Method::OPTIONS, path)
            .header("origin", ORIGIN)
            .header("access-control-request-method", method)
            .header(
                "access-control-request-headers",
                "content-type, if-match, idempotency-key",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 204, "{method} {path}");
        assert_eq!(header(&response, "access-control-allow-origin"), "*");
        let methods = header(&response, "access-control-allow-methods");
        for expected in route_methods {
            assert!(
                methods.split(", ").any(|m| m == *expected),
                "{expected} in {methods}"
            );
        }
        let headers = header(&response, "access-control-allow-headers").to_lowercase();
        assert!(
            headers.contains("content-type")
                && headers.contains("if-match")
                && headers.contains("idempotency-key"),
            "{headers}"
        );
        assert!(
            header(&response, "access-control-max-age")
                .parse::<u64>()
                .unwrap()
                > 0
        );
    }
}

#[tokio::test]
async fn a_preflight_for_a_method_no_route_has_is_still_a_2xx_the_browser_then_refuses_c8() {
    let app = TestApp::in_memory().await;

    let response = app
        .request(Method::OPTIONS, "/items/1")
        .header("origin", ORIGIN)
        .header("access-control-request-method", "PATCH")
        .send()
        .await
        .unwrap();

    assert_eq!(response.status(), 204);
    assert_eq!(header(&response, "access-control-allow-origin"), "*");
    assert!(!header(&response, "access-control-allow-methods").contains("PATCH"));
}
