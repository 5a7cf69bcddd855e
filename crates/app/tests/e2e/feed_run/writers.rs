//! The run's writers: each a task with its own HTTP client, bound to one
//! instance, creating, renaming and deleting its own items and renaming the
//! one item every writer renames (so commits contend on its row and commit
//! in another order than they began), as fast as the service answers.
//!
//! Every name is unique to its write (`<writer>.<n>`), so an event names
//! the write that made it ([`Key`]). A writer records when each 2xx
//! arrived (the delivery latency's start), the writes refused with a 503
//! (C12: nothing written, so no event may name them), and counts the
//! writes whose outcome it cannot know (a 504, a connection lost or
//! refused: the instance was killed, the primary lost); after one it
//! leaves the item alone, and the check compares the events with the
//! final state rather than with the acknowledgements only.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::harness::Instances;
use crate::crash::rng::Rng;

/// Writer tasks.
pub const WRITERS: u64 = 8;

/// Items a writer owns at most: beyond, it deletes; the listing stays
/// small however long the run.
const MOST_OWNED: usize = 32;

/// What names one write, as its event shows it: `(writer << 32) | n` for
/// the create or rename that set the name `<writer>.<n>`, or
/// [`Key::deleted`] of the item's id.
pub type Key = u64;

/// The key of the name `<writer>.<n>`, when it is one.
pub fn name_key(name: &str) -> Option<Key> {
    let (writer, n) = name.split_once('.')?;
    Some((writer.parse::<u64>().ok()? << 32) | n.parse::<u64>().ok()?)
}

/// The key of the delete of item `id`.
pub fn deleted_key(id: i64) -> Key {
    (1 << 62) | id.unsigned_abs()
}

/// The shared item's first name, and the name of the create that ends the
/// run (writer numbers are `1..=WRITERS`).
pub const SHARED_NAME: &str = "0.0";
pub const SENTINEL_NAME: &str = "9.0";

/// What one writer did.
#[derive(Debug, Default)]
pub struct WriterLog {
    /// Each acknowledged write's key and when its 2xx arrived.
    pub acked: Vec<(Key, Instant)>,
    /// Writes answered 503: nothing written.
    pub refused: Vec<Key>,
    /// Writes whose outcome is unknown (504, no answer, no connection).
    pub unknown: usize,
    /// Answers no write should get (a 404 for an item the writer owns, a
    /// 4xx), as text.
    pub unexpected: Vec<String>,
}

enum Write {
    Create,
    Rename(i64),
    Delete(i64),
}

/// How a writer is paced: at most one write every `interval`, or as
/// fast as the service answers.
#[derive(Debug, Clone, Copy)]
pub struct Pace(pub Option<Duration>);

/// Writer `number` (`1..=WRITERS`) writing through instance `instance`
/// until `stop`; counts its acknowledged writes in `acked`.
#[allow(clippy::too_many_arguments)] // each is one thing the run shares
pub async fn write(
    number: u64,
    instance: usize,
    instances: Instances,
    shared: i64,
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    mut dice: Rng,
    Pace(interval): Pace,
) -> WriterLog {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("a plain HTTP client builds");
    let mut log = WriterLog::default();
    let mut owned: Vec<i64> = Vec::new();
    let mut n = 0u64;
    let mut due = tokio::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if let Some(interval) = interval {
            due += interval;
            tokio::time::sleep_until(due).await;
        }
        n += 1;
        let name = format!("{number}.{n}");
        let roll = dice.below(100);
        let pick = |dice: &mut Rng, owned: &[i64]| owned[dice.below(owned.len() as u64) as usize];
        let write = if owned.len() < 4 || (roll < 30 && owned.len() < MOST_OWNED) {
            Write::Create
        } else if roll < 55 {
            Write::Rename(pick(&mut dice, &owned))
        } else if roll < 80 {
            Write::Rename(shared)
        } else {
            Write::Delete(pick(&mut dice, &owned))
        };
        let base = instances.base(instance);
        let (request, key, target) = match write {
            Write::Create => (
                http.post(format!("{base}/items"))
                    .json(&json!({ "name": name })),
                name_key(&name).unwrap_or_default(),
                None,
            ),
            Write::Rename(id) => (
                http.put(format!("{base}/items/{id}"))
                    .json(&json!({ "name": name })),
                name_key(&name).unwrap_or_default(),
                Some(id),
            ),
            Write::Delete(id) => (
                http.delete(format!("{base}/items/{id}")),
                deleted_key(id),
                Some(id),
            ),
        };
        let disown = |owned: &mut Vec<i64>| {
            if let Some(id) = target.filter(|id| *id != shared) {
                owned.retain(|owned| *owned != id);
            }
        };
        let response = match request.send().await {
            Ok(response) => response,
            Err(_) => {
                // Sent or not, applied or not: unknown.
                log.unknown += 1;
                disown(&mut owned);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let answered = Instant::now();
        let status = response.status().as_u16();
        let body = response.bytes().await;
        match (status, write) {
            (201, Write::Create) => {
                let id = body
                    .ok()
                    .and_then(|body| serde_json::from_slice::<Value>(&body).ok())
                    .and_then(|item| item["id"].as_i64());
                match id {
                    Some(id) => owned.push(id),
                    // Committed under an id the writer cannot name: its
                    // event is still checked against the final state.
                    None => log.unexpected.push(format!("201 without an id for {name}")),
                }
            }
            (200, Write::Rename(_)) => {}
            (204, Write::Delete(_)) => disown(&mut owned),
            (503, _) => {
                log.refused.push(key);
                disown(&mut owned);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            (504, _) => {
                log.unknown += 1;
                disown(&mut owned);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            (status, _) => {
                log.unexpected
                    .push(format!("{status} for {name} on {target:?}"));
                disown(&mut owned);
                continue;
            }
        }
        log.acked.push((key, answered));
        acked.fetch_add(1, Ordering::Relaxed);
    }
    log
}
