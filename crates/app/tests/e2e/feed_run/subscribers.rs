//! The run's subscribers: each reads the feed through the instances in
//! turn, dropping its stream after a random number of events and
//! reconnecting with `Last-Event-ID` to the next instance (C14); a stream
//! cut (a killed instance), refused or silent is reconnected the same way.
//! Each records every event as it came, with when it came, and stops at the
//! run's last write (the sentinel: everything committed before it came
//! before it).
//!
//! The stream is read by a small reader of its own rather than the kit's
//! [`EventStream`](crate::support::EventStream): a run reads a million
//! events and must survive a refused connection.

use std::time::{Duration, Instant};

use actix_web::web::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::Value;
use tokio::sync::oneshot;

use super::harness::Instances;
use super::writers::{Key, SENTINEL_NAME, deleted_key, name_key};
use crate::crash::rng::Rng;

/// How long a stream may stay silent (no event, no heartbeat) before the
/// subscriber gives up on it and reconnects.
const SILENCE: Duration = Duration::from_secs(20);

/// What an event said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Created,
    Replaced,
    Deleted,
}

/// One event as a subscriber got it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The position its cursor names (`<kind><origin>.<position>`).
    pub position: u64,
    pub kind: Kind,
    pub id: i64,
    /// The name it carries (`None` for a delete).
    pub name: Option<String>,
    pub arrived: Instant,
}

impl Seen {
    /// The write that made it (see [`Key`]).
    pub fn key(&self) -> Option<Key> {
        match self.kind {
            Kind::Deleted => Some(deleted_key(self.id)),
            _ => self.name.as_deref().and_then(name_key),
        }
    }
}

/// What one subscriber saw and did.
#[derive(Debug, Default)]
pub struct SubscriberLog {
    /// The position its first stream began at.
    pub start: u64,
    pub events: Vec<Seen>,
    /// Streams it dropped itself to reconnect with `Last-Event-ID`.
    pub reconnects: usize,
    /// Streams that ended under it (cut, ended, silent) or could not be
    /// opened (refused, no process), each followed by a reconnection.
    pub broken: usize,
    /// Resumptions answered with `event: reset` (C14: never, for a cursor
    /// just seen).
    pub resets: usize,
    /// Resumptions whose opening named another cursor than the one sent.
    pub misplaced: usize,
    /// Events that did not read as a change (no id, no JSON, unknown kind).
    pub malformed: Vec<String>,
}

/// Subscriber `number` over `instances`, reconnecting after a random
/// number of events between 1 and `2 × every`; says on `ready` once its
/// first stream is open; returns at the sentinel.
pub async fn subscribe(
    number: usize,
    instances: Instances,
    every: usize,
    mut dice: Rng,
    ready: oneshot::Sender<()>,
) -> SubscriberLog {
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("a plain HTTP client builds");
    let mut log = SubscriberLog::default();
    let mut ready = Some(ready);
    let mut instance = number % instances.len();
    let mut last: Option<String> = None;
    let mut quota = 1 + dice.below(2 * every as u64) as usize;
    loop {
        let base = instances.base(instance);
        instance = (instance + 1) % instances.len();
        let mut request = http
            .get(format!("{base}/items"))
            .header("accept", "text/event-stream");
        if let Some(last) = &last {
            request = request.header("last-event-id", last.as_str());
        }
        let response = match request.send().await {
            Ok(response) if response.status() == 200 => response,
            _ => {
                log.broken += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let mut stream = Frames::new(response);
        let Ok(opening) = stream.next(SILENCE).await else {
            log.broken += 1;
            continue;
        };
        if opening.event.as_deref() == Some("reset") {
            log.resets += 1;
        }
        let Some(start) = opening.id else {
            log.malformed
                .push(format!("an opening without an id: {opening:?}"));
            continue;
        };
        match &last {
            Some(last) if *last != start => log.misplaced += 1,
            Some(_) => {}
            None => {
                log.start = position(&start).unwrap_or_default();
                last = Some(start);
            }
        }
        if let Some(ready) = ready.take() {
            let _ = ready.send(());
        }
        loop {
            let frame = match stream.next(SILENCE).await {
                Ok(frame) if frame.data.is_none() => continue,
                Ok(frame) => frame,
                Err(()) => {
                    log.broken += 1;
                    break;
                }
            };
            let arrived = Instant::now();
            let Some(seen) = read(&frame, arrived) else {
                log.malformed.push(format!("{frame:?}"));
                continue;
            };
            last.clone_from(&frame.id);
            let sentinel =
                seen.kind == Kind::Created && seen.name.as_deref() == Some(SENTINEL_NAME);
            log.events.push(seen);
            if sentinel {
                return log;
            }
            quota -= 1;
            if quota == 0 {
                log.reconnects += 1;
                quota = 1 + dice.below(2 * every as u64) as usize;
                break;
            }
        }
    }
}

/// The position a cursor `<kind><origin>.<position>` names.
pub fn position(cursor: &str) -> Option<u64> {
    cursor.rsplit_once('.')?.1.parse().ok()
}

/// An event as a change, when it reads as one.
fn read(frame: &Frame, arrived: Instant) -> Option<Seen> {
    let position = position(frame.id.as_deref()?)?;
    let data: Value = serde_json::from_str(frame.data.as_deref()?).ok()?;
    let kind = match frame.event.as_deref()? {
        "created" => Kind::Created,
        "replaced" => Kind::Replaced,
        "deleted" => Kind::Deleted,
        _ => return None,
    };
    let name = match kind {
        Kind::Deleted => None,
        _ => Some(data["name"].as_str()?.to_owned()),
    };
    Some(Seen {
        position,
        kind,
        id: data["id"].as_i64()?,
        name,
        arrived,
    })
}

/// The fields of one frame.
#[derive(Debug, Default)]
struct Frame {
    event: Option<String>,
    id: Option<String>,
    data: Option<String>,
}

/// A response body read frame by frame.
struct Frames {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    buffer: Vec<u8>,
    /// Where the unread part of `buffer` begins.
    read: usize,
}

impl Frames {
    fn new(response: reqwest::Response) -> Self {
        Self {
            body: response.bytes_stream().boxed(),
            buffer: Vec::new(),
            read: 0,
        }
    }

    /// The next frame within `patience`; `Err` once the body ended, was
    /// cut, or stayed silent.
    async fn next(&mut self, patience: Duration) -> Result<Frame, ()> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let unread = &self.buffer[self.read..];
            if let Some(end) = unread.windows(2).position(|pair| pair == b"\n\n") {
                let frame = parse(&unread[..end]);
                self.read += end + 2;
                return Ok(frame);
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Ok(Some(Ok(bytes))) => {
                    self.buffer.drain(..self.read);
                    self.read = 0;
                    self.buffer.extend_from_slice(&bytes);
                }
                _ => return Err(()),
            }
        }
    }
}

fn parse(block: &[u8]) -> Frame {
    let mut frame = Frame::default();
    for line in String::from_utf8_lossy(block).lines() {
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
        match field {
            "event" => frame.event = Some(value),
            "id" => frame.id = Some(value),
            "data" => frame.data = Some(value),
            _ => {}
        }
    }
    frame
}
