//! What bounds the feed (C14): a subscriber too slow is cut while the
//! others get every change and writers go on; at most
//! `CHANGES_MAX_STREAMS` streams; a drain ends every stream.

use std::time::{Duration, Instant};

use items_adapters::http::{ChangeStreamSettings, Draining, HttpSettings};
use items_domain::Name;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::MemoryFeed;
use crate::support::*;

/// Settings with these stream settings.
fn with_changes(changes: ChangeStreamSettings) -> HttpSettings {
    HttpSettings {
        changes,
        ..test_settings()
    }
}

/// A client that asks for the feed and then reads nothing, on a socket
/// with a small receive buffer, so what it is sent backs up soon.
async fn stalled_subscriber(port: u16) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
    stream
        .write_all(b"GET /items HTTP/1.1\r\nHost: feed\r\nAccept: text/event-stream\r\n\r\n")
        .await
        .unwrap();
    stream
}

#[tokio::test]
async fn a_subscriber_too_slow_is_cut_while_the_others_get_every_change_and_writers_go_on_c14() {
    const WRITES: usize = 30_000;
    let feed = MemoryFeed::with(with_changes(ChangeStreamSettings {
        max_streams: 2,
        buffer: 8,
        stall: Duration::from_millis(300),
        ..ChangeStreamSettings::default()
    }))
    .await;
    let app = &feed.app;
    let mut stalled = stalled_subscriber(app.port).await;
    let (mut reader, _, _) = EventStream::subscribe(app, None).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let items = std::sync::Arc::clone(&feed.items);
    let writes = tokio::spawn(async move {
        let started = Instant::now();
        for n in 0..WRITES {
            let name = Name::parse(&format!("{n:0>250}")).unwrap();
            items.create(name).await.unwrap();
        }
        started.elapsed()
    });
    for expected in 1..=WRITES as i64 {
        let event = reader.event().await;
        assert_eq!(
            event.json()["id"],
            expected,
            "C14: a subscriber that keeps up gets every change, in order"
        );
    }
    let took = writes.await.unwrap();
    assert!(
        took < Duration::from_secs(20),
        "C14: a stalled subscriber never delays writers: {WRITES} creates took {took:?}"
    );

    // The stalled subscriber's slot is given back once its buffer stayed
    // full for the stall (300 ms), which may begin only near the end of
    // the writes, when its socket's buffers are full: then a new stream
    // opens although two is the limit.
    let given_back = Instant::now() + Duration::from_secs(5);
    let mut third = loop {
        let stream = EventStream::open(app, None).await;
        if stream.status != 503 {
            break stream;
        }
        assert!(
            Instant::now() < given_back,
            "C14: the stalled subscriber was never cut: its slot is still taken"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(third.status, 200, "C14: the feed answers 200");
    third
        .assert_no_event_within(Duration::from_millis(100), "nothing was written since")
        .await;

    let mut sent = Vec::new();
    let read = tokio::time::timeout(FRAME_PATIENCE, stalled.read_to_end(&mut sent)).await;
    assert!(
        read.is_ok(),
        "C14: the stalled subscriber's connection is closed once read"
    );
    let sent = String::from_utf8_lossy(&sent);
    let events = sent.matches("event: created").count();
    assert!(
        events < WRITES,
        "C14: the stalled subscriber was cut: it got {events} of {WRITES} events"
    );
    assert!(
        !sent.ends_with("0\r\n\r\n"),
        "C14: a cut stream ends without its last chunk, so the client knows"
    );
}

#[tokio::test]
async fn at_most_changes_max_streams_are_open_beyond_503_with_retry_after_c14() {
    // A client that goes away is noticed when its stream is next written
    // to: here, the next heartbeat.
    let feed = MemoryFeed::with(with_changes(ChangeStreamSettings {
        max_streams: 2,
        heartbeat: Duration::from_millis(100),
        ..ChangeStreamSettings::default()
    }))
    .await;
    let app = &feed.app;
    let (first, _, _) = EventStream::subscribe(app, None).await;
    let (_second, _, _) = EventStream::subscribe(app, None).await;

    let refused = app
        .request(reqwest::Method::GET, "/items")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let retry_after: u64 = header(&refused, "retry-after")
        .parse()
        .expect("Retry-After");
    assert!(retry_after >= 1);
    assert_problem(refused, 503).await;
    let listing = app.get("/items").await;
    assert_eq!(listing.status(), 200, "C14: the limit is on streams only");

    drop(first);
    let deadline = Instant::now() + FRAME_PATIENCE;
    loop {
        let again = EventStream::open(app, None).await;
        if again.status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "C14: a stream closed by its client gives its slot back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_drain_ends_every_stream_and_opens_no_new_one_c1_c14() {
    let draining = Draining::default();
    let settings = HttpSettings {
        draining: draining.clone(),
        ..test_settings()
    };
    let feed = MemoryFeed::with(settings).await;
    let app = &feed.app;
    let (mut first, _, _) = EventStream::subscribe(app, None).await;
    let (mut second, _, _) = EventStream::subscribe(app, None).await;
    app.create_item("before").await;
    first.event().await;
    second.event().await;

    let began = Instant::now();
    draining.begin();
    for stream in [&mut first, &mut second] {
        let end = loop {
            match stream.frame().await {
                Ok(frame) if !frame.is_event() => continue,
                Ok(frame) => panic!("C14: nothing was written, yet {frame:?}"),
                Err(end) => break end,
            }
        };
        assert_eq!(end, Ended::Cleanly, "C14: a drain ends the stream, cleanly");
    }
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "C14: streams end at once when the drain begins: {:?}",
        began.elapsed()
    );
    let mut refused = EventStream::open(app, Some("m1.1")).await;
    assert_eq!(
        (refused.status, refused.header("content-type")),
        (200, "text/event-stream".to_owned()),
        "C14: a stopping instance answers 200, which an EventSource retries (a 503 ends it)"
    );
    let only = refused.frame().await.expect("one frame");
    assert!(
        only.retry.is_some() && only.id.is_none() && only.event.is_none(),
        "C14: a stopping instance sends only when to retry, and keeps the client's cursor: \
         {only:?}"
    );
    assert_eq!(
        refused.frame().await.expect_err("then the answer ends"),
        Ended::Cleanly,
        "C14: a stopping instance opens no stream"
    );
}
