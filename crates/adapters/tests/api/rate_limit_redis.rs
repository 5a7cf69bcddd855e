//! The shared rate limit over Redis (C9): the Lua script decides as the
//! domain's GCRA does, instances sharing a Redis share one budget, and an
//! unreachable Redis leaves each instance on its own budget at once.
//!
//! These tests need the project's Redis on 127.0.0.1:6379 and fail, never
//! skip, without it. Each uses a key prefix of its own.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use items_adapters::http::{HttpSettings, RateLimitSettings};
use items_adapters::memory::InMemoryRateLimitStore;
use items_adapters::redis::RedisRateLimitStore;
use items_domain::{Gcra, RateLimitStore, RateLimiter};

use items_testkit::http::*;

const REDIS: &str = "redis://127.0.0.1:6379/";

/// A prefix no other test run uses.
fn unique_prefix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("items-service-test:{}:{nanos}:", std::process::id())
}

fn redis_store(url: &str, prefix: &str) -> Arc<RedisRateLimitStore> {
    Arc::new(RedisRateLimitStore::open(url, prefix).unwrap())
}

fn shared(redis: Arc<RedisRateLimitStore>) -> RateLimiter {
    RateLimiter::shared(redis, Arc::new(InMemoryRateLimitStore::default()))
}

async fn app_over(budgets: RateLimiter, max: u32) -> TestApp {
    let settings = HttpSettings {
        rate_limit: RateLimitSettings {
            max: NonZeroU32::new(max),
            window: Duration::from_secs(600),
            trust_proxy: 0,
        },
        ..test_settings()
    };
    TestApp::spawn_with(
        settings,
        TestServices::in_memory().with_rate_limits(budgets),
    )
    .await
}

/// Redis must answer: a missing one is a failure of the test environment,
/// reported as such rather than as a limiter bug.
async fn require_redis(store: &RedisRateLimitStore) {
    use items_domain::HealthCheck;
    store
        .ping()
        .await
        .expect("Redis must answer on 127.0.0.1:6379 (the project's machines run it)");
}

#[tokio::test]
async fn the_redis_script_decides_as_the_in_process_gcra_does_c9() {
    let redis = redis_store(REDIS, &unique_prefix());
    require_redis(&redis).await;
    let local = InMemoryRateLimitStore::default();
    let gcra = Gcra::new(NonZeroU32::new(3).unwrap(), Duration::from_secs(60));
    let client = IpAddr::from([203, 0, 113, 9]);

    for request in 0..6 {
        let from_redis = redis.spend(client, gcra).await.unwrap();
        let in_process = local.spend(client, gcra).await.unwrap();
        assert_eq!(
            from_redis.allowed, in_process.allowed,
            "request {request}: allowed"
        );
        // The clocks differ (Redis's in µs, ours in ns) by the time between
        // the two calls: the budgets agree to within a few milliseconds.
        let apart = from_redis.until_full.abs_diff(in_process.until_full);
        assert!(
            apart < Duration::from_millis(100),
            "request {request}: {apart:?}"
        );
    }
}

#[tokio::test]
async fn two_instances_sharing_redis_give_a_client_one_budget_c9() {
    let prefix = unique_prefix();
    let first_store = redis_store(REDIS, &prefix);
    require_redis(&first_store).await;
    let first = app_over(shared(first_store), 4).await;
    let second = app_over(shared(redis_store(REDIS, &prefix)), 4).await;

    let mut seen = Vec::new();
    for request in 0..6 {
        let app = if request % 2 == 0 { &first } else { &second };
        let response = app.get("/").await;
        let remaining = response
            .headers()
            .get("ratelimit-remaining")
            .map(|value| value.to_str().unwrap().to_owned());
        seen.push((response.status().as_u16(), remaining));
    }

    let expected: Vec<(u16, Option<String>)> = [
        (200, "3"),
        (200, "2"),
        (200, "1"),
        (200, "0"),
        (429, "0"),
        (429, "0"),
    ]
    .into_iter()
    .map(|(status, remaining)| (status, Some(remaining.to_owned())))
    .collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn an_unreachable_redis_leaves_the_instance_on_its_own_budget_at_once_c9() {
    // Port 9 (discard) is closed on loopback: every connection is refused.
    let unreachable = redis_store("redis://127.0.0.1:9/", &unique_prefix());
    let app = app_over(shared(unreachable), 2).await;

    let started = Instant::now();
    let statuses = [
        app.get("/").await.status().as_u16(),
        app.get("/").await.status().as_u16(),
        app.get("/").await.status().as_u16(),
    ];

    assert_eq!(statuses, [200, 200, 429], "the local budget still limits");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered without waiting on Redis: {:?}",
        started.elapsed()
    );
}
