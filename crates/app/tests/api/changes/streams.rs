//! The feed's events, cursors, resumption and heartbeats, and the edge
//! around a stream (C14 with C7, C8, C9), over the in-memory store.

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use items_adapters::http::{ChangeStreamSettings, HttpSettings, RateLimitSettings};
use reqwest::Method;
use serde_json::json;

use super::{MemoryFeed, created, delete, deleted, rename, replaced, said};
use crate::support::*;

#[tokio::test]
async fn every_change_is_an_event_in_commit_order_with_its_item_and_cursor_c14() {
    let feed = MemoryFeed::start().await;
    let app = &feed.app;
    app.create_item("before").await;
    let (mut stream, start, reset) = EventStream::subscribe(app, None).await;
    assert!(!reset, "C14: a stream without Last-Event-ID is no reset");
    assert!(
        start.len() <= 64 && start.bytes().all(|byte| (0x21..=0x7e).contains(&byte)),
        "C14: a cursor is at most 64 visible ASCII characters: {start:?}"
    );
    assert_eq!(stream.header("cache-control"), "no-cache");
    assert_eq!(
        stream.header("etag"),
        "",
        "a stream is no fixed representation"
    );

    let wrote = Instant::now();
    app.create_item("pen").await;
    rename(app, 2, "quill \"q\"\nnew line").await;
    app.create_item("ink").await;
    delete(app, 2).await;
    delete(app, 2).await; // deleted already: no change
    let events = stream.events(4).await;

    assert!(
        wrote.elapsed() < Duration::from_secs(1),
        "C14: each change arrives within 1 s of its commit"
    );
    let what: Vec<_> = events.iter().map(said).collect();
    assert_eq!(
        what,
        [
            created(2, "pen"),
            replaced(2, "quill \"q\"\nnew line"),
            created(3, "ink"),
            deleted(2),
        ],
        "C14: every committed change once, in commit order, with the item as JSON"
    );
    assert_eq!(
        events[0].data.as_deref(),
        Some(r#"{"id":2,"name":"pen"}"#),
        "C14: data is the item's JSON exactly"
    );
    assert_eq!(events[3].data.as_deref(), Some(r#"{"id":2}"#));
    let mut cursors: Vec<&str> = events
        .iter()
        .filter_map(|event| event.id.as_deref())
        .collect();
    assert_eq!(cursors.len(), 4, "C14: every event has an id");
    cursors.sort_unstable();
    cursors.dedup();
    assert_eq!(cursors.len(), 4, "C14: every event has an id of its own");
    stream
        .assert_no_event_within(
            Duration::from_millis(300),
            "a delete of a deleted item is no change",
        )
        .await;
}

#[tokio::test]
async fn last_event_id_resumes_right_after_that_change_none_missed_or_repeated_c14() {
    let feed = MemoryFeed::start().await;
    let app = &feed.app;
    let (mut first, start, _) = EventStream::subscribe(app, None).await;
    for name in ["a", "b", "c", "d"] {
        app.create_item(name).await;
    }
    let seen = first.events(4).await;
    drop(first);
    // Written while nobody listened.
    rename(app, 1, "a2").await;
    delete(app, 3).await;

    let after_b = seen[1].id.clone().unwrap();
    let (mut resumed, resumed_at, reset) = EventStream::subscribe(app, Some(&after_b)).await;
    assert!(!reset, "C14: a retained cursor resumes");
    assert_eq!(resumed_at, after_b, "C14: the stream says where it resumed");
    let events = resumed.events(4).await;
    assert_eq!(
        events.iter().map(said).collect::<Vec<_>>(),
        [
            created(3, "c"),
            created(4, "d"),
            replaced(1, "a2"),
            deleted(3)
        ],
        "C14: resuming after b gives c, d and what was written while away, none missed or repeated"
    );
    assert_eq!(
        events[..2],
        seen[2..],
        "the same events, with the same cursors"
    );

    // The opening's cursor resumes a stream that saw no change at all.
    let (mut from_start, _, reset) = EventStream::subscribe(app, Some(&start)).await;
    assert!(!reset);
    let again = from_start.events(6).await;
    assert_eq!(said(&again[0]), created(1, "a"));
    assert_eq!(said(&again[5]), deleted(3));
}

#[tokio::test]
async fn an_unknown_or_malformed_cursor_gets_one_reset_then_the_present_c14() {
    let feed = MemoryFeed::start().await;
    let app = &feed.app;
    app.create_item("old").await;
    for unknown in [
        "m0.1",
        "not-a-cursor",
        "\u{e9}t\u{e9}",
        &"x".repeat(65),
        " ",
    ] {
        let (mut stream, start, reset) = EventStream::subscribe(app, Some(unknown)).await;
        assert!(
            reset,
            "C14: {unknown:?} is no cursor of this store: one reset"
        );
        let created_now = app.create_item("now").await;
        let event = stream.event().await;
        assert_eq!(
            said(&event),
            ("created".to_owned(), created_now),
            "C14: after the reset the stream goes on from the present"
        );
        // The reset named where it stood: resuming from there misses nothing.
        let (mut resumed, _, reset) = EventStream::subscribe(app, Some(&start)).await;
        assert!(!reset, "C14: the reset's cursor is a known one");
        assert_eq!(resumed.event().await, event);
    }
}

#[tokio::test]
async fn a_cursor_older_than_the_last_100000_changes_gets_a_reset_c14() {
    let feed = MemoryFeed::start().await;
    let (mut stream, _, _) = EventStream::subscribe(&feed.app, None).await;
    feed.app.create_item("first").await;
    let first = stream.event().await.id.unwrap();
    drop(stream);
    let name = items_domain::Name::parse("n").unwrap();
    // 100,001 changes after it: the one right after it is gone too.
    for _ in 0..50_001 {
        let item = feed.items.create(name.clone()).await.unwrap();
        feed.items.delete(item.id).await.unwrap();
    }
    let (_, _, reset) = EventStream::subscribe(&feed.app, Some(&first)).await;
    assert!(
        reset,
        "C14: in memory, a cursor 100,000 changes old is past the retention"
    );
}

#[tokio::test]
async fn an_idle_stream_gets_a_comment_line_every_heartbeat_c14() {
    let settings = HttpSettings {
        changes: ChangeStreamSettings {
            heartbeat: Duration::from_millis(100),
            ..ChangeStreamSettings::default()
        },
        ..test_settings()
    };
    let feed = MemoryFeed::with(settings).await;
    let (mut stream, _, _) = EventStream::subscribe(&feed.app, None).await;
    let started = Instant::now();
    for beat in 0..3 {
        let frame = stream.frame_within(Duration::from_secs(2)).await.unwrap();
        assert!(
            !frame.is_event() && !frame.comments.is_empty(),
            "C14: an idle stream gets comment lines only: beat {beat} was {frame:?}"
        );
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(2),
        "C14: a heartbeat every 100 ms: three took {took:?}"
    );
}

#[tokio::test]
async fn the_default_heartbeat_is_at_most_15_s_c14() {
    assert!(ChangeStreamSettings::default().heartbeat <= Duration::from_secs(15));
}

#[tokio::test]
async fn a_stream_carries_the_cors_headers_and_is_never_compressed_c8_c14() {
    let feed = MemoryFeed::start().await;
    let response = feed
        .app
        .request(Method::GET, "/items")
        .header("accept", "text/event-stream")
        .header("origin", "https://example.com")
        .header("accept-encoding", "gzip, br, zstd")
        .send()
        .await
        .unwrap();
    let mut stream = EventStream::from_response(response);
    assert_eq!(stream.status, 200);
    assert_eq!(
        stream.header("access-control-allow-origin"),
        "*",
        "C8: a stream is a response like any other"
    );
    assert_eq!(stream.header("content-encoding"), "", "C14: no compression");
    assert_eq!(stream.header("content-type"), "text/event-stream");
    stream.frame().await.unwrap();
    feed.app.create_item(&"long ".repeat(50)).await;
    let event = stream.event().await;
    assert_eq!(event.event.as_deref(), Some("created"));
}

#[tokio::test]
async fn a_stream_counts_as_one_request_for_the_rate_limit_c9_c14() {
    let settings = HttpSettings {
        rate_limit: RateLimitSettings {
            max: NonZeroU32::new(3),
            window: Duration::from_secs(600),
            trust_proxy: 0,
        },
        ..test_settings()
    };
    let feed = MemoryFeed::with(settings).await;
    let app = &feed.app;
    let (mut stream, _, _) = EventStream::subscribe(app, None).await;
    assert_eq!(stream.header("ratelimit-remaining"), "2");
    for name in ["a", "b", "c", "d", "e"] {
        feed.items
            .create(items_domain::Name::parse(name).unwrap())
            .await
            .unwrap();
    }
    assert_eq!(stream.events(5).await.len(), 5);
    let response = app.get("/items/1").await;
    assert_eq!(
        header(&response, "ratelimit-remaining"),
        "1",
        "C9: five events cost nothing"
    );
    app.get("/items/1").await;
    let refused = app.get("/items/1").await;
    assert_eq!(
        refused.status(),
        429,
        "C9: the stream was one of three requests"
    );
}

#[tokio::test]
async fn head_answers_the_stream_headers_without_a_body_c7_c14() {
    let feed = MemoryFeed::start().await;
    let response = feed
        .app
        .request(Method::HEAD, "/items")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), "text/event-stream");
    assert!(response.bytes().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_feed_takes_no_listing_parameters_and_json_stays_the_default_c10_c14() {
    let feed = MemoryFeed::start().await;
    let app = &feed.app;
    let response = app
        .request(Method::GET, "/items?limit=5")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_problem(response, 400).await;
    for accept in ["application/json", "*/*", "text/event-stream;q=0"] {
        let response = app
            .request(Method::GET, "/items")
            .header("accept", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(
            header(&response, "content-type"),
            "application/json",
            "{accept}"
        );
        assert_eq!(
            response.json::<serde_json::Value>().await.unwrap(),
            json!([])
        );
    }
}
