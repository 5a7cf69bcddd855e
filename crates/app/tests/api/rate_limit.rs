//! Rate limiting: contract C9 (and C8 for the 429's CORS headers).

use std::num::NonZeroU32;
use std::time::Duration;

use items_adapters::http::{HttpSettings, RateLimitSettings};
use reqwest::{Method, Response};

use crate::support::*;

async fn limited_app(max: u32, window: Duration, trust_proxy: u32) -> TestApp {
    let settings = HttpSettings {
        rate_limit: RateLimitSettings {
            max: NonZeroU32::new(max),
            window,
            trust_proxy,
        },
        ..test_settings()
    };
    TestApp::spawn_with(settings, TestServices::in_memory()).await
}

fn number(response: &Response, name: &str) -> u64 {
    header(response, name)
        .parse()
        .unwrap_or_else(|_| panic!("{name} is a number"))
}

fn assert_no_legacy_headers(response: &Response) {
    for name in response.headers().keys() {
        assert!(
            !name.as_str().starts_with("x-ratelimit"),
            "legacy header {name} sent"
        );
    }
}

#[tokio::test]
async fn counted_responses_carry_the_standard_ratelimit_headers_and_no_legacy_ones_c9() {
    let app = limited_app(5, Duration::from_secs(60), 0).await;

    for expected_remaining in (0..5).rev() {
        let response = app.get("/items").await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "ratelimit-policy"), "5;w=60");
        assert_eq!(number(&response, "ratelimit-limit"), 5);
        assert_eq!(number(&response, "ratelimit-remaining"), expected_remaining);
        // GCRA refills one request every 12 s: the budget is full again after
        // (5 - remaining) periods.
        let reset = number(&response, "ratelimit-reset");
        assert_eq!(
            reset,
            12 * (5 - expected_remaining),
            "reset after {expected_remaining} left"
        );
        assert_no_legacy_headers(&response);
    }
}

#[tokio::test]
async fn the_default_policy_header_is_100_per_900_seconds_c9() {
    let app = limited_app(100, Duration::from_millis(900_000), 0).await;

    let response = app.get("/").await;

    assert_eq!(header(&response, "ratelimit-policy"), "100;w=900");
    assert_eq!(number(&response, "ratelimit-limit"), 100);
    assert_eq!(number(&response, "ratelimit-remaining"), 99);
}

#[tokio::test]
async fn over_the_budget_is_a_429_problem_with_retry_after_rounded_up_c9() {
    let app = limited_app(3, Duration::from_secs(30), 0).await;
    for _ in 0..3 {
        assert_eq!(app.get("/items").await.status(), 200);
    }

    let refused = app.get("/items").await;

    assert_eq!(
        number(&refused, "retry-after"),
        10,
        "one period of 10 s, rounded up, never 0"
    );
    assert_eq!(number(&refused, "ratelimit-remaining"), 0);
    assert_eq!(header(&refused, "ratelimit-policy"), "3;w=30");
    assert_eq!(number(&refused, "ratelimit-reset"), 30);
    assert_no_legacy_headers(&refused);
    assert_problem(refused, 429).await;
}

#[tokio::test]
async fn a_429_carries_the_cors_headers_c8_c9() {
    let app = limited_app(1, Duration::from_secs(60), 0).await;
    app.get("/").await;

    let refused = app
        .request(Method::GET, "/")
        .header("origin", "http://other.test")
        .send()
        .await
        .unwrap();

    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "access-control-allow-origin"), "*");
    assert_eq!(header(&refused, "x-content-type-options"), "nosniff");
}

#[tokio::test]
async fn the_budget_refills_continuously_over_the_window_c9() {
    let app = limited_app(2, Duration::from_millis(600), 0).await;
    app.get("/").await;
    app.get("/").await;
    assert_eq!(app.get("/").await.status(), 429);

    // One request comes back every 300 ms.
    tokio::time::sleep(Duration::from_millis(350)).await;

    assert_eq!(app.get("/").await.status(), 200);
    assert_eq!(app.get("/").await.status(), 429);
}

#[tokio::test]
async fn preflights_are_not_counted_c8_c9() {
    let app = limited_app(2, Duration::from_secs(60), 0).await;

    for _ in 0..10 {
        let preflight = app
            .request(Method::OPTIONS, "/items")
            .header("origin", "http://other.test")
            .header("access-control-request-method", "POST")
            .send()
            .await
            .unwrap();
        assert_eq!(preflight.status(), 204);
        assert_eq!(
            header(&preflight, "ratelimit-limit"),
            "",
            "a preflight is not counted"
        );
    }

    assert_eq!(number(&app.get("/").await, "ratelimit-remaining"), 1);
}

#[tokio::test]
async fn without_trust_proxy_a_spoofed_forwarded_for_does_not_change_the_key_c9() {
    let app = limited_app(2, Duration::from_secs(60), 0).await;

    let mut statuses = Vec::new();
    for address in ["198.51.100.1", "198.51.100.2", "198.51.100.3"] {
        let response = app
            .request(Method::GET, "/")
            .header("x-forwarded-for", address)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }

    assert_eq!(statuses, [200, 200, 429]);
}

#[tokio::test]
async fn with_trust_proxy_each_forwarded_client_has_its_own_budget_c9() {
    let app = &limited_app(1, Duration::from_secs(60), 1).await;
    let status = |name: &'static str, value: &'static str| async move {
        let response = app.request(Method::GET, "/").header(name, value).send();
        response.await.unwrap().status().as_u16()
    };

    // One proxy: the client is the rightmost entry, the one our proxy wrote.
    assert_eq!(
        status("x-forwarded-for", "198.51.100.1, 10.0.0.1").await,
        200
    );
    assert_eq!(status("x-forwarded-for", "198.51.100.2").await, 200);
    assert_eq!(
        status("x-forwarded-for", "198.51.100.9, 10.0.0.1").await,
        429
    );
    assert_eq!(status("forwarded", "for=\"[2001:db8::1]:4711\"").await, 200);
    // The same /56 prefix is the same client.
    assert_eq!(status("forwarded", "for=\"[2001:db8:0:ff::2]\"").await, 429);
    // Garbage falls back to the peer address, which has its own budget.
    assert_eq!(status("x-forwarded-for", "unknown").await, 200);
    assert_eq!(status("x-forwarded-for", "not an address").await, 429);
}

/// Forged addresses (C9): behind one proxy that appends the real address, a
/// client that writes its own entries to the left cannot choose its key.
#[tokio::test]
async fn forged_forwarded_entries_to_the_left_do_not_change_the_budget_c1_c9() {
    let app = limited_app(3, Duration::from_secs(60), 1).await;

    let mut statuses = Vec::new();
    for i in 1..=6 {
        let response = app
            .request(Method::GET, "/")
            .header("x-forwarded-for", format!("10.0.0.{i}, 203.0.113.7"))
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }

    assert_eq!(statuses, [200, 200, 200, 429, 429, 429]);
}

/// Two proxies of ours: the client is the second entry from the right.
#[tokio::test]
async fn with_two_trusted_proxies_the_second_entry_from_the_right_is_the_client_c9() {
    let app = &limited_app(1, Duration::from_secs(60), 2).await;
    let status = |value: &'static str| async move {
        let response = app
            .request(Method::GET, "/")
            .header("x-forwarded-for", value)
            .send();
        response.await.unwrap().status().as_u16()
    };

    assert_eq!(status("10.9.9.9, 203.0.113.7, 192.0.2.1").await, 200);
    assert_eq!(status("10.8.8.8, 203.0.113.7, 192.0.2.2").await, 429);
    assert_eq!(status("203.0.113.8, 192.0.2.1").await, 200);
}

#[tokio::test]
async fn rate_limit_max_0_turns_limiting_off_c1_c9() {
    let app = TestApp::in_memory().await; // test_settings(): RATE_LIMIT_MAX=0

    for _ in 0..300 {
        let response = app.get("/").await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "ratelimit-limit"), "");
        assert_no_legacy_headers(&response);
    }
}
