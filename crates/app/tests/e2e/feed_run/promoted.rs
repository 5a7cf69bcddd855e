//! A position the lost primary handed out, and the promoted standby hands
//! out again (C14). PostgreSQL WAL-logs a sequence 32 values ahead, so
//! values taken after the last such record that reached the standby are
//! taken again once it is promoted. The feed's reader must not carry what
//! it learned of the lost primary (a position it was waiting on, and a
//! transaction id of its own) to the new one: there the position is not
//! final, whatever the running transactions say, and taking it for final
//! skips the change the new primary commits under it.
//!
//! Made deterministic: the sequence's batch is used up while the standby
//! follows, the standby is then detached, and a transaction left open on
//! the primary takes the next position (so its WAL record never reaches
//! the standby) while a subscriber's poller waits on it; the primary dies,
//! the standby is promoted, and the first change committed there takes
//! that same position again.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::failover::cluster::{Pair, Replication};
use crate::helpers::{Client, Service};

/// The sequence of the change table's positions.
const SEQUENCE: &str = "pg_get_serial_sequence('changes', 'position')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_the_promoted_standby_hands_out_again_reaches_the_subscribers_c14() {
    let mut pair = Pair::start(Replication::Synchronous).await;
    let url = pair.database_url();
    let service = Service::start(&[
        ("DATABASE_URL", url.as_str()),
        ("DATABASE_STATEMENT_TIMEOUT_MS", "1000"),
        ("RATE_LIMIT_MAX", "0"),
        ("ADMIN_PORT", "0"),
    ])
    .await;
    let client = &service.client;
    client.create_item("before").await;
    let (mut stream, _, _) = crate::support::EventStream::subscribe(client, None).await;

    // The sequence's batch used up while the standby follows: it holds the
    // record of the batch's last value, and the next value starts a batch
    // whose record only the primary will have.
    let primary = pair.primary().connect_to("items").await;
    let sequence = sequence_name(&primary).await;
    let left: i64 = primary
        .query_one(&format!("select log_cnt from {sequence}"), &[])
        .await
        .unwrap()
        .get(0);
    primary
        .batch_execute(&format!(
            "select nextval('{sequence}') from generate_series(1, {left})"
        ))
        .await
        .unwrap();
    detach_the_standby(&pair).await;

    // On the primary only: a transaction that takes the next position and
    // stays open, so the subscriber's poller waits on it.
    primary
        .batch_execute("begin; insert into items (name) values ('never committed'::bytea)")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    pair.kill_primary();
    drop(primary);
    pair.promote_standby().await;
    wait_writing_to(&service.admin(), pair.primary().port).await;
    // The poller's turns on the new primary, before anything is written.
    tokio::time::sleep(Duration::from_millis(1000)).await;

    let first = write_until_acknowledged(client, "first on the new primary").await;
    let second = write_until_acknowledged(client, "second on the new primary").await;
    let mut got = Vec::new();
    while got.len() < 2 {
        match stream.frame_within(Duration::from_secs(3)).await {
            Ok(frame) if frame.is_event() => got.push(frame.change().1),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert_eq!(
        got,
        [first, second],
        "C14: every change committed on the promoted standby reaches the subscriber, the one \
         under a position the lost primary had handed out too"
    );
}

/// The sequence's qualified name.
async fn sequence_name(client: &tokio_postgres::Client) -> String {
    client
        .query_one(&format!("select {SEQUENCE}"), &[])
        .await
        .unwrap()
        .get(0)
}

/// Stops the standby's WAL receiver: nothing the primary writes from now
/// on reaches it.
async fn detach_the_standby(pair: &Pair) {
    let standby = pair.nodes[1 - pair.primary].connect().await;
    standby
        .batch_execute("alter system set primary_conninfo = ''")
        .await
        .unwrap();
    standby
        .batch_execute("select pg_reload_conf()")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let receiving: i64 = standby
            .query_one("select count(*) from pg_stat_wal_receiver", &[])
            .await
            .unwrap()
            .get(0);
        if receiving == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "the standby still receives");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates `name` until a 201 comes; the item.
async fn write_until_acknowledged(client: &Client, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let response = client.post_json("/items", &json!({ "name": name })).await;
        if response.status() == 201 {
            return response.json().await.unwrap();
        }
        assert!(Instant::now() < deadline, "no write acknowledged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `/readyz` says the service writes to the server on `port`.
async fn wait_writing_to(admin: &Client, port: u16) {
    let expected = format!("ok: writing to 127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ready: Value = admin.get("/readyz").await.json().await.unwrap_or_default();
        if ready["checks"]["database"] == expected.as_str() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not writing to the promoted standby: {ready}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A change committed on the primary alone (a synchronous commit whose
/// wait for the standby was cancelled, as a postmaster that dies also
/// ends it) is visible there, and the promoted standby never had it.
/// Published, it would leave a subscriber holding a change the store does
/// not: C14's "nothing that was not committed ever appears" asks the feed
/// to publish a change only once the synchronous standby has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_no_synchronous_standby_confirmed_never_reaches_the_subscribers_c14() {
    let mut pair = Pair::start(Replication::Synchronous).await;
    let url = pair.database_url();
    let service = Service::start(&[
        ("DATABASE_URL", url.as_str()),
        ("DATABASE_STATEMENT_TIMEOUT_MS", "1000"),
        ("RATE_LIMIT_MAX", "0"),
        ("ADMIN_PORT", "0"),
    ])
    .await;
    let client = service.client.clone();
    client.create_item("before").await;
    let (mut stream, _, _) = crate::support::EventStream::subscribe(&client, None).await;
    detach_the_standby(&pair).await;

    let admin = pair.primary().connect().await;
    let writer = client.clone();
    let write = tokio::spawn(async move {
        writer
            .post_json("/items", &json!({ "name": "unconfirmed" }))
            .await
            .status()
            .as_u16()
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let backend: i32 = loop {
        let row = admin
            .query_opt(
                "select pid from pg_stat_activity \
                 where datname = 'items' and wait_event = 'SyncRep' limit 1",
                &[],
            )
            .await
            .unwrap();
        if let Some(row) = row {
            break row.get(0);
        }
        assert!(Instant::now() < deadline, "no write waits for the standby");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    admin
        .query_one("select pg_cancel_backend($1)", &[&backend])
        .await
        .unwrap();
    let status = write.await.unwrap();
    let published = stream.frame_within(Duration::from_secs(2)).await;

    pair.kill_primary();
    drop(admin);
    pair.promote_standby().await;
    wait_writing_to(&service.admin(), pair.primary().port).await;
    let listed: Vec<String> = client
        .list("/items")
        .await
        .iter()
        .map(|item| item["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(listed, ["before"], "the promoted standby never had it");
    assert_eq!(status, 504, "C12: the write's outcome is unknown");
    assert!(
        !published
            .as_ref()
            .is_ok_and(crate::support::Frame::is_event),
        "C14: a change the store lost with its primary reached a subscriber: {published:?}"
    );
}
