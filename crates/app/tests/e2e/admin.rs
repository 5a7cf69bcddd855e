//! The admin listener of the real binary (C11): readiness over PostgreSQL,
//! the pool gauges, and a shutdown that turns readiness to 503 while the
//! public port still serves, before the drain.

use std::time::{Duration, Instant};

use items_testkit::postgres::{ScratchDatabase, test_database_url};
use serde_json::Value;

use crate::helpers::*;

#[tokio::test]
async fn a_shutdown_turns_readyz_to_503_while_requests_are_still_served_c11() {
    let url = test_database_url();
    let database = ScratchDatabase::create(&url).await.unwrap();
    let database_url = database.url();
    let mut service = Service::start(&[
        ("DATABASE_URL", database_url.as_str()),
        ("DATABASE_POOL_SIZE", "3"),
        ("ADMIN_PORT", "0"),
        ("SHUTDOWN_DRAIN_MS", "1500"),
    ])
    .await;

    let ready = service.admin().get("/readyz").await;
    assert_eq!(ready.status(), 200);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["checks"]["database"], "ok");
    let metrics = service.admin().get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("database_pool_max_connections 3"),
        "{metrics}"
    );
    assert!(metrics.contains("database_pool_idle_connections "));
    assert!(metrics.contains("database_pool_connections "));

    service.terminate();
    let signalled = Instant::now();
    // Readiness flips at once (the balancer's next check sees it)…
    loop {
        let status = service.admin().get("/readyz").await.status();
        if status == 503 {
            break;
        }
        assert!(
            signalled.elapsed() < Duration::from_millis(500),
            "readyz still {status} after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // …while the public port keeps answering during the drain delay.
    let during_drain = service.client.get("/items").await;
    assert_eq!(during_drain.status(), 200);
    assert!(signalled.elapsed() < Duration::from_millis(1500));

    let status = service.wait(Duration::from_secs(35)).await;
    assert!(status.success(), "{status:?}");
    assert!(
        signalled.elapsed() >= Duration::from_millis(1500),
        "exited before the drain delay"
    );
    drop(service);
    database.drop().await;
}

#[tokio::test]
async fn without_an_admin_port_there_is_no_admin_listener_and_sigterm_exits_at_once_c11() {
    let mut service = Service::start(&[]).await;
    assert_eq!(service.client.get("/readyz").await.status(), 404);

    service.terminate();
    let signalled = Instant::now();
    assert!(service.wait(Duration::from_secs(10)).await.success());
    assert!(
        signalled.elapsed() < Duration::from_secs(1),
        "no drain delay"
    );
}

#[tokio::test]
async fn with_an_admin_port_the_process_exits_promptly_after_its_stopped_line_c1_c11() {
    let mut service = Service::start(&[("ADMIN_PORT", "0"), ("SHUTDOWN_DRAIN_MS", "200")]).await;
    // A prober and a scraper that keep their connections open, as a load
    // balancer and Prometheus do, and a client of the public port.
    let admin = service.admin();
    assert_eq!(admin.get("/readyz").await.status(), 200);
    assert_eq!(admin.get("/metrics").await.status(), 200);
    assert_eq!(service.client.get("/").await.status(), 200);

    service.terminate();
    let signalled = Instant::now();
    let logged_stopped = loop {
        let log = std::fs::read_to_string(service.log_path()).unwrap();
        if log.contains("items_service: stopped") {
            break Instant::now();
        }
        if let Some(status) = service.child.try_wait().unwrap() {
            panic!("exited ({status:?}) without its stopped line: {log}");
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(10),
            "no stopped line: {log}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let status = service.wait(Duration::from_secs(10)).await;

    assert!(status.success(), "{status:?}");
    let after_stopped = logged_stopped.elapsed();
    assert!(
        after_stopped < Duration::from_secs(1),
        "exited {after_stopped:?} after its stopped line"
    );
}

#[tokio::test]
async fn admin_host_keeps_the_admin_listener_off_the_public_address_c1_c11() {
    // Public on every interface, admin on loopback's 127.0.0.1 only: the
    // public port answers on 127.0.0.2 too, the admin port does not.
    let service = Service::start(&[
        ("HOST", "0.0.0.0"),
        ("ADMIN_PORT", "0"),
        ("ADMIN_HOST", "127.0.0.1"),
    ])
    .await;
    let log = service.log_once_it_contains("listening").await;
    let public = service.listening.address.port();
    let admin = service.listening.admin_address.unwrap();
    assert_eq!(admin.ip().to_string(), "127.0.0.1", "{log}");
    assert!(
        log.contains(&format!(
            "address=0.0.0.0:{public} admin_address=127.0.0.1:"
        )),
        "the start-up line names the admin address bound: {log}"
    );
    let http = reqwest::Client::new();
    let on_another_address = |port: u16, path: &str| {
        http.get(format!("http://127.0.0.2:{port}{path}"))
            .timeout(Duration::from_secs(5))
            .send()
    };

    assert_eq!(on_another_address(public, "/").await.unwrap().status(), 200);
    assert_eq!(service.admin().get("/livez").await.status(), 200);
    let refused = on_another_address(admin.port(), "/metrics").await;
    assert!(
        refused.as_ref().is_err_and(reqwest::Error::is_connect),
        "the admin port answered on 127.0.0.2: {refused:?}"
    );
}

#[tokio::test]
async fn without_admin_host_the_admin_listener_binds_on_host_c11() {
    let service = Service::start(&[("HOST", "127.0.0.1"), ("ADMIN_PORT", "0")]).await;

    let admin = service.listening.admin_address.unwrap();

    assert_eq!(admin.ip().to_string(), "127.0.0.1");
    assert_eq!(service.admin().get("/livez").await.status(), 200);
}

/// The sum of `metric`'s samples for `operation` on a Prometheus page.
fn histogram_sum(metrics: &str, metric: &str, operation: &str) -> Option<f64> {
    let prefix = format!("{metric}_sum{{operation=\"{operation}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|value| value.trim().parse().ok())
}

#[tokio::test]
async fn every_read_and_create_over_postgres_is_counted_once_in_requests_per_statement_c11() {
    let url = test_database_url();
    let database = ScratchDatabase::create(&url).await.unwrap();
    let database_url = database.url();
    let service = Service::start(&[
        ("DATABASE_URL", database_url.as_str()),
        ("DATABASE_POOL_SIZE", "3"),
        ("ADMIN_PORT", "0"),
    ])
    .await;

    // Concurrent, so some may share a coalesced statement; each is
    // counted once either way.
    let creates: Vec<_> = (0..40)
        .map(|n| {
            let client = service.client.clone();
            tokio::spawn(async move {
                let body = serde_json::json!({ "name": format!("n{n}") });
                client.post_json("/items", &body).await.status()
            })
        })
        .collect();
    let mut created = Vec::new();
    for create in creates {
        created.push(create.await.unwrap());
    }
    assert!(created.iter().all(|status| *status == 201), "{created:?}");
    let reads: Vec<_> = (1..=60)
        .map(|id| {
            let client = service.client.clone();
            tokio::spawn(async move { client.get(&format!("/items/{id}")).await.status() })
        })
        .collect();
    let mut read = Vec::new();
    for one in reads {
        read.push(one.await.unwrap());
    }
    assert_eq!(read.iter().filter(|status| **status == 200).count(), 40);
    assert_eq!(read.iter().filter(|status| **status == 404).count(), 20);

    let metrics = service.admin().get("/metrics").await.text().await.unwrap();
    let metric = "database_requests_per_statement";
    assert!(
        metrics.contains(&format!(
            "{metric}_bucket{{operation=\"get_item\",le=\"1\"}}"
        )),
        "{metrics}"
    );
    assert_eq!(histogram_sum(&metrics, metric, "create_item"), Some(40.0));
    assert_eq!(histogram_sum(&metrics, metric, "get_item"), Some(60.0));
    drop(service);
    database.drop().await;
}
