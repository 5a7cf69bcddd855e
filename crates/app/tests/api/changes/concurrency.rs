//! Many writers and a subscriber forced to reconnect again and again with
//! `Last-Event-ID` (C14): no change missed, none repeated, none out of
//! order, checked against the final listing (and, for the durable stores,
//! their change tables, in `durable.rs`).

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use serde_json::{Value, json};

use super::MemoryFeed;
use crate::support::*;

/// Writer tasks.
pub(super) const WRITERS: usize = 8;
/// Rounds per writer: a create, two renames (its item, then the item
/// every writer renames), and every other round a delete.
const ROUNDS: usize = 10;
/// Events read per connection before the subscriber drops it and
/// reconnects after the last id it saw.
const EVENTS_PER_CONNECTION: usize = 7;

/// What the subscriber saw, and what the writers committed.
pub(super) struct Outcome {
    /// Every event, in the order received across all reconnections.
    pub events: Vec<Frame>,
    /// How many changes the writers' 2xx answers account for.
    pub committed: usize,
    /// How many times the subscriber reconnected.
    pub reconnects: usize,
}

/// Runs the writers, writer `w` through `writers[w % len]`, while one
/// subscriber reads through `readers` in turn, reconnecting every
/// [`EVENTS_PER_CONNECTION`] events; then checks what it got against the
/// listing of `writers[0]` and returns it.
pub(super) async fn writers_and_a_reconnecting_subscriber(
    writers: &[Client],
    readers: &[Client],
) -> Outcome {
    let shared = writers[0].create_item("shared").await;
    let (mut stream, _, _) = EventStream::subscribe(&readers[0], None).await;
    let tasks: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let client = writers[writer % writers.len()].clone();
            let shared = shared["id"].as_i64().unwrap();
            tokio::spawn(async move { write_rounds(&client, writer, shared).await })
        })
        .collect();

    let mut events = Vec::new();
    let mut reconnects = 0;
    let mut committed = None;
    let mut tasks = Some(tasks);
    loop {
        if let Some(running) = tasks.take() {
            if running.iter().all(tokio::task::JoinHandle::is_finished) {
                let mut total = 0;
                for task in running {
                    total += task.await.unwrap();
                }
                committed = Some(total);
            } else {
                tasks = Some(running);
            }
        }
        if committed.is_some_and(|total| events.len() >= total) {
            break;
        }
        let frame = match stream.frame().await {
            Ok(frame) => frame,
            Err(ended) => panic!("C14: the stream {ended:?} after {} events", events.len()),
        };
        if !frame.is_event() {
            continue;
        }
        assert_ne!(
            frame.event.as_deref(),
            Some("reset"),
            "C14: a known cursor never resets"
        );
        let last = frame.id.clone().expect("C14: every event has an id");
        events.push(frame);
        if events.len() % EVENTS_PER_CONNECTION == 0 {
            reconnects += 1;
            let reader = &readers[reconnects % readers.len()];
            let (resumed, at, reset) = EventStream::subscribe(reader, Some(&last)).await;
            assert!(!reset, "C14: a cursor just seen is within the retention");
            assert_eq!(
                at, last,
                "C14: the stream resumes right after the last event seen"
            );
            stream = resumed;
        }
    }
    let outcome = Outcome {
        committed: committed.unwrap_or_default(),
        events,
        reconnects,
    };
    stream
        .assert_no_event_within(
            Duration::from_millis(1500),
            "every committed change was seen",
        )
        .await;
    assert_replays_to(&outcome, &writers[0].list("/items").await, &shared);
    outcome
}

/// One writer's rounds; the number of changes its 2xx answers committed.
async fn write_rounds(client: &Client, writer: usize, shared: i64) -> usize {
    let mut committed = 0;
    for round in 0..ROUNDS {
        let item = client.create_item(&format!("w{writer}r{round}")).await;
        let id = item["id"].as_i64().unwrap();
        for (target, name) in [
            (id, format!("w{writer}r{round}b")),
            (shared, format!("shared by w{writer}r{round}")),
        ] {
            let response = client
                .put_json(&format!("/items/{target}"), &json!({ "name": name }))
                .await;
            assert_eq!(response.status(), 200);
        }
        committed += 3;
        if round % 2 == 1 {
            assert_eq!(client.delete(&format!("/items/{id}")).await.status(), 204);
            committed += 1;
        }
    }
    committed
}

/// The events, replayed in the order received, give `listing`: each
/// item's changes came in commit order (the shared item's too), none
/// missed or repeated.
fn assert_replays_to(outcome: &Outcome, listing: &[Value], shared: &Value) {
    let events = &outcome.events;
    assert_eq!(
        events.len(),
        outcome.committed,
        "C14: as many events as committed changes ({} reconnections)",
        outcome.reconnects
    );
    let ids: HashSet<&str> = events
        .iter()
        .filter_map(|event| event.id.as_deref())
        .collect();
    assert_eq!(ids.len(), events.len(), "C14: no event twice");
    let mut state: BTreeMap<i64, Value> = BTreeMap::new();
    state.insert(shared["id"].as_i64().unwrap(), shared["name"].clone());
    for event in events {
        let (kind, data) = event.change();
        let id = data["id"].as_i64().unwrap();
        let known = match kind.as_str() {
            "created" => state.insert(id, data["name"].clone()).is_none(),
            "replaced" => state.insert(id, data["name"].clone()).is_some(),
            "deleted" => state.remove(&id).is_some(),
            other => panic!("C14: an unknown event {other}"),
        };
        assert!(known, "C14: {kind} of item {id} came out of its order");
    }
    let stored: BTreeMap<i64, Value> = listing
        .iter()
        .map(|item| (item["id"].as_i64().unwrap(), item["name"].clone()))
        .collect();
    assert_eq!(
        state, stored,
        "C14: the events replayed in order give the final listing"
    );
}

/// The positions a store's cursors name (`<kind><origin>.<position>`), in
/// the order the events came: they only grow when nothing is out of order.
pub(super) fn positions(events: &[Frame]) -> Vec<u64> {
    events
        .iter()
        .map(|event| {
            let cursor = event.id.as_deref().unwrap();
            let (_, position) = cursor.rsplit_once('.').expect("the store's own cursor");
            position.parse().expect("a position")
        })
        .collect()
}

pub(super) fn assert_in_order(events: &[Frame]) {
    let positions = positions(events);
    assert!(
        positions.windows(2).all(|pair| pair[0] < pair[1]),
        "C14: events come in the store's order, none out of order"
    );
}

#[tokio::test]
async fn eight_writers_and_many_reconnections_miss_repeat_and_reorder_nothing_in_memory_c14() {
    let feed = MemoryFeed::start().await;
    let clients = [feed.app.clone()];
    let outcome = writers_and_a_reconnecting_subscriber(&clients, &clients).await;
    assert!(
        outcome.reconnects >= 30,
        "{} reconnections",
        outcome.reconnects
    );
    assert_in_order(&outcome.events);
}
