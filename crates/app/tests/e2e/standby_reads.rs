//! Reads from standbys with read-your-writes (C13), through the built
//! binary: a primary and two streaming standbys of the test's own
//! (`failover/cluster.rs`), one of them applying what it receives 3 s
//! late (`recovery_min_apply_delay`). Instance A writes; instance B, whose
//! `DATABASE_READ_URL` names both standbys, reads each write with A's
//! token:
//!
//! - no read with a token is ever answered from an older state (the name
//!   written, never the one before, never a 404);
//! - most of them are served by a standby (B's `database_reads_total`);
//! - reads without a token avoid the delayed standby (its lag gauge is
//!   over `DATABASE_READ_MAX_LAG_MS`, and reads of a fresh write find it);
//! - with the prompt standby stopped, reads go on, none stale.
//!
//! `STANDBY_PROBES` sets how many writes are read back (2,000 by default;
//! the test takes about 30 s on a loaded 2-core machine). With the prompt
//! standby down each read with a token waits `DATABASE_READ_WAIT_MS` for
//! the delayed one before the primary serves it, so that phase is short.

use std::time::{Duration, Instant};

use reqwest::{Method, Response};
use serde_json::{Value, json};

use crate::failover::cluster::{Pair, Replication};
use crate::helpers::Service;
use crate::support::header;

/// What the delayed standby waits before applying what it receives.
const DELAY: &str = "3s";

fn probes() -> usize {
    std::env::var("STANDBY_PROBES")
        .ok()
        .and_then(|probes| probes.parse().ok())
        .unwrap_or(2000)
}

/// The token of `response`.
fn token(response: &Response) -> String {
    let token = header(response, "consistency-token");
    assert!(
        !token.is_empty(),
        "C13: a PostgreSQL-backed answer carries a token"
    );
    token
}

/// The value of `metric` (with its labels, as `/metrics` prints them) on
/// `service`'s admin listener; 0 when absent.
async fn metric(service: &Service, metric: &str) -> f64 {
    let text = service.admin().get("/metrics").await.text().await.unwrap();
    text.lines()
        .filter(|line| line.starts_with(metric))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |sum, value| sum + value)
}

/// Writes on A and reads back on B with A's token, `count` times: a new
/// item every fourth probe, else a new name for the last one. Returns how
/// many reads were stale (an older name, or not found).
async fn probe(a: &Service, b: &Service, count: usize) -> usize {
    let mut stale = 0;
    let mut id = 0;
    for round in 0..count {
        let name = format!("name {round}");
        let written = if round % 4 == 0 {
            let created = a.client.post_json("/items", &json!({ "name": name })).await;
            assert_eq!(created.status(), 201);
            let token = token(&created);
            id = created.json::<Value>().await.unwrap()["id"]
                .as_i64()
                .unwrap();
            token
        } else {
            let replaced = a
                .client
                .put_json(&format!("/items/{id}"), &json!({ "name": name }))
                .await;
            assert_eq!(replaced.status(), 200);
            token(&replaced)
        };
        let read = b
            .client
            .request(Method::GET, &format!("/items/{id}"))
            .header("consistency-token", &written)
            .send()
            .await
            .unwrap();
        let status = read.status();
        let served = read.json::<Value>().await.ok();
        if status != 200 || served.as_ref().map(|item| &item["name"]) != Some(&json!(name)) {
            stale += 1;
            eprintln!("stale: {status} {served:?} for {name} at {written}");
        }
    }
    stale
}

#[tokio::test]
async fn reads_with_a_token_never_see_an_older_state_and_mostly_go_to_standbys_c13() {
    let started = Instant::now();
    let mut pair = Pair::start(Replication::Asynchronous).await;
    let delayed = pair
        .add_standby("c", &format!("recovery_min_apply_delay = '{DELAY}'"))
        .await;
    let primary = pair.database_url();
    let prompt = &pair.nodes[1];
    let late = &pair.nodes[delayed];
    let standbys = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/items",
        prompt.port, late.port
    );
    let a = Service::start(&[("DATABASE_URL", &primary), ("RATE_LIMIT_MAX", "0")]).await;
    let b = Service::start(&[
        ("DATABASE_URL", &primary),
        ("RATE_LIMIT_MAX", "0"),
        ("DATABASE_READ_URL", &standbys),
        ("ADMIN_PORT", "0"),
    ])
    .await;

    let count = probes();
    let probing = Instant::now();
    let stale = probe(&a, &b, count).await;
    let took = probing.elapsed();
    let by_standbys = metric(&b, "database_reads_total{role=\"standby\"}").await;
    let by_primary = metric(&b, "database_reads_total{role=\"primary\"}").await;
    eprintln!(
        "{count} probes in {took:?}: {stale} stale, {by_standbys} reads by standbys, \
         {by_primary} by the primary"
    );
    assert_eq!(stale, 0, "C13: no read with a token sees an older state");
    assert!(
        by_standbys > count as f64 / 2.0,
        "C13: most reads with a token go to a standby: {by_standbys} of {count}"
    );

    // The delayed standby lags by its delay while writes go on: reads
    // without a token avoid it.
    let late_lag = metric(
        &b,
        &format!(
            "database_standby_lag_seconds{{standby=\"127.0.0.1:{}\"}}",
            late.port
        ),
    )
    .await;
    assert!(
        late_lag > 1.0,
        "C13: the delayed standby's lag shows: {late_lag}"
    );
    for round in 0..20 {
        let created = a
            .client
            .post_json("/items", &json!({ "name": format!("fresh {round}") }))
            .await;
        let id = created.json::<Value>().await.unwrap()["id"]
            .as_i64()
            .unwrap();
        // Long enough for the prompt standby and the tracker, far too short
        // for the delayed one.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let read = b.client.get(&format!("/items/{id}")).await;
        assert_eq!(
            read.status(),
            200,
            "C13: a read without a token avoids the standby lagging {DELAY}"
        );
    }

    // The prompt standby stops: reads go on (the delayed one or the
    // primary), none stale.
    pair.stop_node(1);
    let stale = probe(&a, &b, 50).await;
    assert_eq!(stale, 0, "C13: with a standby down, no read is stale");
    assert_eq!(
        b.admin().get("/readyz").await.status(),
        200,
        "C13: /readyz unaffected"
    );
    eprintln!("the whole test took {:?}", started.elapsed());
}
