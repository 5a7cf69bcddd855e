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
//! And across a failover (a primary and one standby, the primary killed,
//! the standby promoted): a token of the old timeline at or before where
//! the new one left it is met (the primary's `.history` file), one past it
//! (a write the failover lost) is a 409 `consistency-unmet`.
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

mod probe_run;

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

/// GETs `path` on `service` with `token` until it is answered other than
/// 503 (the service finding the promoted primary), for at most 30 s. A
/// kept-alive connection the service closed while idle (its keep-alive
/// ends during the failover's wait) fails the send once: that GET is sent
/// again, as any client would.
async fn read_with(service: &Service, path: &str, token: &str) -> Response {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let sent = service
            .client
            .request(Method::GET, path)
            .header("consistency-token", token)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) if error.is_request() && Instant::now() < deadline => continue,
            Err(error) => panic!("GET {path}: {error}"),
        };
        if response.status() != 503 || Instant::now() > deadline {
            return response;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_token_from_before_a_failover_is_met_after_it_and_one_the_failover_lost_is_a_409_c13() {
    let mut pair = Pair::start(Replication::Asynchronous).await;
    let service = Service::start(&[
        ("DATABASE_URL", &pair.database_url()),
        ("RATE_LIMIT_MAX", "0"),
    ])
    .await;
    let created = service
        .client
        .post_json("/items", &json!({ "name": "kept" }))
        .await;
    assert_eq!(created.status(), 201);
    let before = items_domain::Position::parse(&token(&created)).expect("a position");
    // The standby has it before the primary goes: the failover keeps it.
    let standby = pair.nodes[1].connect().await;
    let wanted = format!(
        "{:X}/{:X}",
        before.offset() >> 32,
        before.offset() & 0xFFFF_FFFF
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let replayed: bool = standby
            .query_one(
                "select pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
                &[&wanted],
            )
            .await
            .unwrap()
            .get(0);
        if replayed {
            break;
        }
        assert!(Instant::now() < deadline, "the standby replays the write");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(standby);
    pair.kill_primary();
    pair.promote_standby().await;

    let read = read_with(&service, "/items/1", &before.to_string()).await;
    assert_eq!(
        read.status(),
        200,
        "C13: a token of the old timeline the new one kept is met"
    );
    let after = items_domain::Position::parse(&token(&read)).expect("a position");
    assert!(
        after.era() > before.era(),
        "served on the new timeline: {after}"
    );
    assert_eq!(read.json::<Value>().await.unwrap()["name"], "kept");

    // A position of the old timeline past where the new one left it: a
    // write the failover lost.
    let lost = items_domain::Position::new(before.era(), before.offset() + (1 << 32));
    let read = read_with(&service, "/items/1", &lost.to_string()).await;
    assert_eq!(read.status(), 409, "C13: a token no server can meet");
    assert_eq!(
        read.json::<Value>().await.unwrap()["type"],
        "consistency-unmet"
    );
}
